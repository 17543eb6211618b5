"""Extension `cpu_fast`: the C++ kernels' fast forms: loops reordered and tiled, explicit
vectors, lane and column-tiled reductions, Welford variance (kernel.py: CppFastKernel, the
kernel kind `cpp_fast`, ahead of the core's plain CppKernel), and single-row matmuls as
reduction kernels (lowering/matmul.vector_matrix, up to VECTOR_MATRIX_MAX)."""
from ...config import declare_extension
from ...passes import POLICY_PATCHES, kernel_kind
from .kernel import fast_kernel
from .reduction import LANES

#: C++: the largest K * N whose single-row product `[1, K] @ [K, N]` is our reduction kernel
VECTOR_MATRIX_MAX = 1 << 20

declare_extension("cpu_fast", "C++: explicit vector loops, Welford variance, vector-matrix kernels")
POLICY_PATCHES.append(("cpu_fast", lambda policy, config, device: {
    "welford_min": 2 * LANES, "explicit_vectors": True, "vector_matrix_max": VECTOR_MATRIX_MAX}
    if policy.name == "cpp" else {}))
kernel_kind("cpp", "cpp_fast", lambda group, ctx: fast_kernel(group, ctx.config), "cpu_fast", first=True)
