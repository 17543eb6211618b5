"""Extension `cpu_fast`: the C++ kernels' fast forms: explicit vectors, Welford variance,
single-row matmuls as reduction kernels."""
from .reduction import LANES
from ...codegen.policy import VECTOR_MATRIX_MAX
from ...config import declare_extension
from ...passes import POLICY_PATCHES

declare_extension("cpu_fast", "C++: explicit vector loops, Welford variance, vector-matrix kernels")
POLICY_PATCHES.append(("cpu_fast", lambda policy, config, device: {
    "welford_min": 2 * LANES, "explicit_vectors": True, "vector_matrix_max": VECTOR_MATRIX_MAX}
    if policy.name == "cpp" else {}))
