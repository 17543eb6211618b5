// miniinductor C++ wrapper, GPU part (cpp_wrapper=True on a CUDA graph): Triton's compiled
// kernels launched through the CUDA driver API (`cuLaunchKernel`), as Inductor's
// cpp_wrapper_gpu.py launches them. Python compiles and loads each kernel (Triton: a cubin in a
// CUmodule on this GPU) and writes its CUfunction, grid, warps and shared memory into
// `mi_kernels` once, before the first call (`mi_bind`); a launch is then a table lookup, the
// tensors' data pointers and one driver call. The source defines MI_KERNELS and MI_MAX_ARGS.
#include <dlfcn.h>
#include <cstdint>
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h>

// cuLaunchKernel's C signature, with its handles as void* (cuda.h's CUfunction, CUstream and
// CUresult are pointers and an int): the build needs no CUDA header, the run finds the driver
typedef int (*MiLaunchKernel)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                              unsigned block_x, unsigned block_y, unsigned block_z,
                              unsigned shared_bytes, void* stream, void** params, void** extra);
typedef int (*MiContextFn)(void** context);   // cuCtxGetCurrent
typedef int (*MiSetContextFn)(void* context);  // cuCtxSetCurrent
typedef int (*MiDeviceGetFn)(int* device, int ordinal);            // cuDeviceGet
typedef int (*MiPrimaryContextFn)(void** context, int device);     // cuDevicePrimaryCtxRetain
static MiLaunchKernel mi_cu_launch = nullptr;
static MiContextFn mi_cu_get_context = nullptr;
static MiSetContextFn mi_cu_set_context = nullptr;
static void* mi_context = nullptr;   // the GPU's primary context, which Triton loads kernels in

struct MiKernel {
    void* function = nullptr;   // CUfunction, loaded by Triton on this graph's GPU
    unsigned grid[3] = {0, 0, 0};
    unsigned threads = 0, shared = 0;
    int64_t scratch = 0;        // bytes of global scratch memory per program (TMA descriptors)
};
static MiKernel mi_kernels[MI_KERNELS];

// the CUDA driver's functions, and the graph's GPU's primary context (torch's, and the one
// Triton loads kernels in; any thread may call this); 0 if one of them cannot be found
extern "C" int mi_init() {
    if (mi_context) return 1;
    void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);   // (torch loaded it)
    if (!libcuda) libcuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!libcuda) return 0;
    mi_cu_launch = reinterpret_cast<MiLaunchKernel>(dlsym(libcuda, "cuLaunchKernel"));
    mi_cu_get_context = reinterpret_cast<MiContextFn>(dlsym(libcuda, "cuCtxGetCurrent"));
    mi_cu_set_context = reinterpret_cast<MiSetContextFn>(dlsym(libcuda, "cuCtxSetCurrent"));
    auto device_get = reinterpret_cast<MiDeviceGetFn>(dlsym(libcuda, "cuDeviceGet"));
    auto primary_context = reinterpret_cast<MiPrimaryContextFn>(dlsym(libcuda, "cuDevicePrimaryCtxRetain"));
    int device = -1;
    void* context = nullptr;
    if (!mi_cu_launch || !mi_cu_get_context || !mi_cu_set_context || !device_get || !primary_context ||
        device_get(&device, MI_DEVICE_INDEX) != 0 || primary_context(&context, device) != 0)
        return 0;
    mi_context = context;
    return context != nullptr;
}

// kernel i's table entry
extern "C" int mi_bind(int i, void* function, unsigned gx, unsigned gy, unsigned gz,
                       unsigned warps, unsigned shared, int64_t scratch) {
    if (i < 0 || i >= MI_KERNELS) return 0;
    mi_kernels[i] = MiKernel{function, {gx, gy, gz}, 32 * warps, shared, scratch};
    return 1;
}

static void* mi_ptr_of(AtenTensorHandle t) { void* p; MI_CHECK(aoti_torch_get_data_ptr(t, &p)); return p; }

// Triton compiles for 16-byte aligned pointers (as its `warmup` assumes): `call` hands a
// graph whose inputs are not to the Python wrapper, whose launcher compiles another variant
static bool mi_aligned(std::initializer_list<AtenTensorHandle> tensors) {
    for (AtenTensorHandle t : tensors)
        if (reinterpret_cast<uintptr_t>(mi_ptr_of(t)) % 16) return false;
    return true;
}

// kernel i on `stream`: the tensors' data pointers, then the global and the profile scratch
// pointers that Triton >= 3.3 / 3.5 kernels take last (a kernel with fewer parameters
// reads fewer: the driver takes as many as the kernel declares)
static void mi_launch(int i, const char* name, void* stream, std::initializer_list<AtenTensorHandle> tensors) {
    const MiKernel& k = mi_kernels[i];
    uint64_t programs = uint64_t(k.grid[0]) * k.grid[1] * k.grid[2];
    if (programs == 0) return;   // an empty grid: nothing to compute
    uint64_t values[MI_MAX_ARGS + 2];
    void* params[MI_MAX_ARGS + 2];
    size_t n = 0;
    for (AtenTensorHandle t : tensors) {
        void* p = mi_ptr_of(t);
        if (reinterpret_cast<uintptr_t>(p) % 16)
            throw std::runtime_error(std::string("miniinductor cpp_wrapper: ") + name +
                                     " was given a pointer that is not 16-byte aligned");
        values[n] = reinterpret_cast<uint64_t>(p);
        params[n] = &values[n];
        ++n;
    }
    AtenTensorHandle scratch = nullptr;
    values[n] = 0;
    if (k.scratch > 0) {
        scratch = mi_empty({int64_t(programs) * k.scratch}, {1}, aoti_torch_dtype_uint8());
        values[n] = reinterpret_cast<uint64_t>(mi_ptr_of(scratch));
    }
    params[n] = &values[n];
    values[n + 1] = 0;
    params[n + 1] = &values[n + 1];
    int rc = mi_cu_launch(k.function, k.grid[0], k.grid[1], k.grid[2], k.threads, 1, 1, k.shared,
                          stream, params, nullptr);
    mi_del(scratch);   // (stream-ordered: the caching allocator hands it out after this kernel)
    if (rc != 0)
        throw std::runtime_error(std::string("miniinductor cpp_wrapper: launching ") + name +
                                 " failed with CUDA driver error " + std::to_string(rc));
}

// the graph's GPU made current for the call, and its context (where the kernels were loaded):
// a thread that has not used the GPU yet -- autograd's backward thread -- has no current one
struct MiDeviceGuard {
    CUDAGuardHandle guard = nullptr;
    MiDeviceGuard() {
        MI_CHECK(aoti_torch_create_cuda_guard(MI_DEVICE_INDEX, &guard));
        if (!mi_context) throw std::runtime_error("miniinductor cpp_wrapper: called before mi_init");
        void* context = nullptr;
        if (mi_cu_get_context(&context) != 0 || context != mi_context) mi_cu_set_context(mi_context);
    }
    ~MiDeviceGuard() { if (guard) aoti_torch_delete_cuda_guard(guard); }
};

static void* mi_current_stream() {
    void* stream;
    MI_CHECK(aoti_torch_get_current_cuda_stream(MI_DEVICE_INDEX, &stream));
    return stream;
}
