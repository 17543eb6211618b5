"""The lowerings of matmuls, and `left_to_aten`, which the passes over the ATen graph ask.

Lowering phase. The lowerings of `mm`, `bmm` and `addmm` (Inductor's `kernel/mm.py`
`tuned_mm`, `tuned_bmm`, `tuned_addmm`): an ATen call, unless `vector_matrix` (a single row
times a Linear's weight on the CPU: a reduction kernel of ours) computes it, or the first
choice an extension registered in `passes.MATMUL_CHOICES` answers (the gemm extension's
GEMM template). addmm is then that product plus `alpha * product + beta * bias`, a
pointwise node. Simplified: no templates of its own. More: docs/design_notes.md.
"""
from __future__ import annotations

import torch

from ..config import Config
from ..ir.nodes import SUPPORTED_DTYPES
from ..passes import MATMUL_CHOICES
from ..virtualized import V, ops
from .pointwise import KIND, make_pointwise, promote
from .reductions import make_reduction
from .registry import aten, register_lowering
from .views import permute


def left_to_aten(node: torch.fx.Node, config: Config) -> bool:
    """Would lowering run `node` as an ATen call whatever its lowering (the fallback options,
    or a dtype our kernels lack; GraphLowering._unsupported_reason)? Then no pass touches it."""
    values = [node.meta.get("val")] + [n.meta.get("val") for n in node.all_input_nodes]
    return (config.fallback_all or str(node.target) in config.fallback_ops
            or any(isinstance(v, torch.Tensor) and v.dtype not in SUPPORTED_DTYPES for v in values))


def extension_choice(a, b) -> tuple:
    """(the buffer computing a @ b, "") from the first choice of an extension in use that
    answers (passes.MATMUL_CHOICES), else (None, why ATen computes it)."""
    reason = "no lowering"
    for extension, choose in MATMUL_CHOICES:
        if V.graph.config.uses(extension):
            product, reason = choose(a, b)
            if product is not None:
                return product, ""
    return None, reason


def vector_matrix(a, b):
    """`a @ b` for a single row `a` [1, K] as a reduction of our own (`sum_k a[0, k] * b[k, n]`),
    where the policy says so (`BackendPolicy.vector_matrix`: C++ kernels, b read along k), else
    None. Inductor's CPU `addmm` decomposition does this for K, N <= 16; see the policy for why
    ours goes further."""
    graph = V.graph
    a_val, b_val = (getattr(graph.current_input_node(k), "meta", {}).get("val") for k in (-2, -1))
    if not (isinstance(a_val, torch.Tensor) and isinstance(b_val, torch.Tensor) and a_val.dim() == 2
            and a_val.dtype == b_val.dtype and graph.policy.vector_matrix(a_val, b_val)
            and [list(x.get_size()) for x in (a, b)] == [list(a_val.shape), list(b_val.shape)]):
        return None
    column = permute(a, [1, 0])                                                  # [K, 1]
    products = make_pointwise(lambda x, w: ops.mul(x, w), (column, b), a_val.dtype)   # [K, N]
    return make_reduction(products, [0], True, "sum")                            # [1, N]


@register_lowering(aten.mm, aten.bmm)
def tuned_mm(a, b):
    if (product := vector_matrix(a, b)) is not None:
        return product
    product, reason = extension_choice(a, b)
    return product if product is not None else V.graph.fallback(V.graph.current_target(), [a, b], {}, reason)


@register_lowering(aten.addmm)
def tuned_addmm(bias, a, b, *, beta=1, alpha=1):
    product, reason = vector_matrix(a, b), ""
    if product is None:
        product, reason = extension_choice(a, b)
    if product is None:
        kwargs = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v != 1}
        return V.graph.fallback(V.graph.current_target(), [bias, a, b], kwargs, reason)
    compute, out = promote((bias, product), KIND.DEFAULT)
    if beta == 0:   # eager ignores the bias then, NaNs included
        return make_pointwise(lambda p, s: ops.mul(p, s), (product, alpha), compute, out)
    if alpha == 1 and beta == 1:
        return make_pointwise(lambda p, c: ops.add(p, c), (product, bias), compute, out)
    return make_pointwise(lambda p, c, s, t: ops.add(ops.mul(p, s), ops.mul(c, t)), (product, bias, alpha, beta),
                          compute, out)
