"""addmm where kernels are Triton: a plain mm, with the bias add left to its readers.

Mirrors `should_prefer_unfused_addmm` / `unfuse_bias_add_to_pointwise` in
`torch/_inductor/fx_passes/post_grad.py`. `addmm(b, x, w)` asks cuBLAS for its bias
epilogue, whose kernels come in fewer tile shapes: on an H100 the GPT-2 block's QKV and
output projections ran a 64x64-tile kernel (~30 TFLOP/s) where the plain `mm` gets a
128x128 one (~40). When every reader of the result is pointwise (looking through views),
the `+ b` costs nothing more inlined into the kernel that reads the product anyway.

Simplified: Inductor decides on the GPU only; we decide wherever our kernels are Triton
(the GPU, and `cpu_backend="triton"`, so that CI runs the same lowering), and the bias
add rounds the product once more in float16/bfloat16, as Inductor's does.
"""
from __future__ import annotations

import operator

import torch

from ..virtualized import V
from .pointwise import KIND, getattr_op, make_pointwise, promote
from .registry import aten, register_lowering

#: ops that only re-view their input: look through them to the real readers
VIEW_LIKE = {operator.getitem, aten._unsafe_view.default, aten.reshape.default}


def only_pointwise_readers(node: torch.fx.Node) -> bool:
    """Is every (transitive, through views) reader of `node` a pointwise ATen op?"""
    if not node.users:
        return False
    for user in node.users:
        target = user.target
        if target in VIEW_LIKE or getattr(target, "is_view", False):
            if not only_pointwise_readers(user):
                return False
        elif not (isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags):
            return False
    return True


@register_lowering(aten.addmm)
def addmm(bias, mat1, mat2, beta=1, alpha=1):
    graph = V.graph
    if graph.kernel_backend() != "triton":
        raise NotImplementedError("one BLAS call with its bias epilogue (C++ kernels)")
    if beta != 1 or alpha != 1 or not only_pointwise_readers(graph.current_fx_node()):
        raise NotImplementedError("one BLAS call: a reader is not pointwise")
    product = graph.fallback(aten.mm.default, (mat1, mat2), {}, "matmul; its bias is added by its readers")
    compute, out = promote((product, bias), KIND.DEFAULT)
    return make_pointwise(getattr_op("add"), (product, bias), compute, out)
