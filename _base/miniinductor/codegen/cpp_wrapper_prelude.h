// miniinductor C++ wrapper prelude (cpp_wrapper=True): what the generated `call` uses to
// hold tensors. A tensor is an AtenTensorHandle (an owned at::Tensor*, through libtorch's C
// shim, the ABI Inductor's C++ wrappers use); every shim call is checked (MI_CHECK throws,
// `call` turns it into a Python RuntimeError).
#include <Python.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h>
#include <initializer_list>
#include <stdexcept>
#include <string>

using MiShape = std::initializer_list<int64_t>;
#define MI_CHECK(call) do { if ((call) != AOTI_TORCH_SUCCESS) \
    throw std::runtime_error("miniinductor cpp_wrapper: " #call " failed"); } while (0)

// a data pointer that converts to the pointer type of the kernel parameter it is passed to
struct MiPtr { void* p; template <class T> operator T*() const { return static_cast<T*>(p); } };
static MiPtr mi_ptr(AtenTensorHandle t) { void* p; MI_CHECK(aoti_torch_get_data_ptr(t, &p)); return {p}; }

// an optional scalar argument: a pointer to a temporary that lives until the call returns
template <class T> static T* mi_opt(T&& v) { return &v; }

// the graph's device: a GPU graph's source defines these (and USE_CUDA) before this prelude
#ifndef MI_DEVICE_TYPE
#define MI_DEVICE_TYPE aoti_torch_device_type_cpu()
#define MI_DEVICE_INDEX 0
#endif

static AtenTensorHandle mi_empty(MiShape size, MiShape stride, int32_t dtype) {
    AtenTensorHandle t;
    MI_CHECK(aoti_torch_empty_strided(size.size(), size.begin(), stride.begin(), dtype,
                                      MI_DEVICE_TYPE, MI_DEVICE_INDEX, &t));
    return t;
}

// t's memory seen with another size and stride; offset counts from t's first element
// (the shim's `storage_offset` is added to t's own: torch::inductor::_reinterpret_tensor)
static AtenTensorHandle mi_reinterpret(AtenTensorHandle t, MiShape size, MiShape stride, int64_t offset) {
    AtenTensorHandle view;
    MI_CHECK(aoti_torch__reinterpret_tensor(t, size.size(), size.begin(), stride.begin(), offset, &view));
    return view;
}

static AtenTensorHandle mi_new_handle(AtenTensorHandle t) {   // another reference to t's tensor
    AtenTensorHandle copy;
    MI_CHECK(aoti_torch_new_tensor_handle(t, &copy));
    return copy;
}

static void mi_del(AtenTensorHandle& t) {   // Python's `del t`: drop this reference
    if (t) aoti_torch_delete_tensor_object(t);
    t = nullptr;
}

// as runtime/helpers.py's check_layout: kernels index an extern op's output with the strides
// its meta function promised; other strides (where a dim is longer than 1) → a copy
static AtenTensorHandle mi_check_layout(AtenTensorHandle t, MiShape size, MiShape stride) {
    int64_t ndim, *sizes, *strides;
    MI_CHECK(aoti_torch_get_dim(t, &ndim));
    MI_CHECK(aoti_torch_get_sizes(t, &sizes));
    MI_CHECK(aoti_torch_get_strides(t, &strides));
    bool same = true;
    if (ndim != (int64_t)size.size()) throw std::runtime_error("extern kernel returned a tensor of another rank");
    for (int64_t i = 0; i < ndim; ++i) {
        if (sizes[i] != size.begin()[i]) throw std::runtime_error("extern kernel returned another shape");
        same = same && (sizes[i] <= 1 || strides[i] == stride.begin()[i]);
    }
    if (same) return t;
    int32_t dtype;
    MI_CHECK(aoti_torch_get_dtype(t, &dtype));
    AtenTensorHandle out = mi_empty(size, stride, dtype);
    MI_CHECK(aoti_torch_copy_(out, t, 0));
    mi_del(t);
    return out;
}

// the handle in capsule i of the list `call` is given (torch._C._aoti made them)
static AtenTensorHandle mi_arg(PyObject* handles, Py_ssize_t i) {
    return static_cast<AtenTensorHandle>(PyCapsule_GetPointer(PyList_GET_ITEM(handles, i), nullptr));
}
