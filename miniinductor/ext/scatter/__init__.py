"""Extension `scatter`: index_put (accumulate or not), scatter_add, scatter, a summing
scatter_reduce -- and through the decompositions index_add and embedding's backward -- as
our kernels (a copy, then a scatter with an atomic read-modify-write store), not ATen calls.

ir.py: the Scatter IR node, its buffer and scheduler node (a mutation of the copy, spelled
as an in-place output); lowering.py: the lowerings; kernels.py: the C++ (serial) and Triton
(`tl.atomic_add`) kernels of a scatter group, a kernel kind ahead of the core's (and of
cpu_fast's: ext/__init__.py imports this package first). Mirrors Inductor's `ir.Scatter` and
`ops.store(..., mode="atomic_add")`. With the extension off, the ops run as ATen calls.
"""
from ...config import declare_extension
from ...passes import FUSION_RULES, NODE_KINDS, kernel_kind
from . import lowering  # noqa: F401  (registers the lowerings, owned by this extension)
from .ir import ScatterBuffer, ScatterNode
from .kernels import ScatterCppKernel, ScatterTritonKernel, make_kernel, scatter_node

declare_extension("scatter", "index_put, scatter_add, index_add and embedding backward as scatter kernels (atomic adds)")


def keep_apart(a, b):
    """The fusion rule: a scatter shares its kernel with nothing. Its adds may land on any
    element of the target, so a reader of the result in the same kernel could see another
    program's adds half done, and the copy into the target must finish before any add."""
    node = scatter_node(a) or scatter_node(b)
    return None if node is None else (f"{node.get_name()} is {ScatterNode.keeps_own_kernel}", "scatter")


NODE_KINDS[ScatterBuffer] = ScatterNode
FUSION_RULES.insert(0, ("scatter", keep_apart))   # before gemm's: never a template's epilogue
kernel_kind("cpp", "scatter", make_kernel(ScatterCppKernel), "scatter", first=True)
kernel_kind("triton", "scatter", make_kernel(ScatterTritonKernel), "scatter", first=True)
