"""Unfusing addmm, a pass over the ATen graph before lowering (where the policy asks: Triton).

Mirrors `should_prefer_unfused_addmm` / `unfuse_bias_add_to_pointwise` in
`torch/_inductor/fx_passes/post_grad.py`. `addmm(b, x, w)` asks cuBLAS for its bias
epilogue, whose kernels come in fewer tile shapes: on an H100 the GPT-2 block's QKV and
output projections ran a 64x64-tile kernel (~30 TFLOP/s) where the plain `mm` gets a
128x128 one (~40). When every reader of the result is pointwise (looking through views),
`addmm` becomes `mm` + `add`: the `+ b` costs nothing more inlined into the kernel that
reads the product anyway.

Simplified: Inductor decides on the GPU only; we decide wherever our kernels are Triton
(the GPU, and `cpu_backend="triton"`, so that CI runs the same pass), and the bias
add rounds the product once more in float16/bfloat16, as Inductor's does.
"""
from __future__ import annotations

import operator

import torch

from ..codegen.policy import BackendPolicy
from .registry import aten

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


def unfuse_addmm(gm: torch.fx.GraphModule, policy: BackendPolicy) -> int:
    """Rewrite, in place, each `addmm(b, x, w)` (beta = alpha = 1) read only pointwise into
    `mm(x, w) + b`. Returns how many it rewrote."""
    if not policy.unfuse_addmm:
        return 0
    found = [n for n in gm.graph.nodes if n.target is aten.addmm.default and len(n.args) == 3
             and n.kwargs.get("beta", 1) == 1 and n.kwargs.get("alpha", 1) == 1 and only_pointwise_readers(n)]
    for node in found:
        bias, mat1, mat2 = node.args
        with gm.graph.inserting_before(node):
            product = gm.graph.call_function(aten.mm.default, (mat1, mat2))
            total = gm.graph.call_function(aten.add.Tensor, (product, bias))
        product.meta = total.meta = dict(node.meta)   # same size, strides and dtype as the addmm
        node.replace_all_uses_with(total)
        gm.graph.erase_node(node)
    if found:
        gm.recompile()
    return len(found)
