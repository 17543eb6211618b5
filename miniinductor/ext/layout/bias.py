"""A GPU convolution's bias as an add of ours, so that it fuses with what follows.

cuDNN's convolution with a bias adds it in a separate elementwise kernel (ATen's
`cudnn_convolution` then `add_`): a full read and write of the output, which the next kernel
reads again. Inductor peels the bias off on the GPU (`convolution` in
`torch/_inductor/kernel/conv.py`: "cudnn is slower with it") and adds it back as a lowered
add, which fuses into the pointwise kernel that reads the convolution's output (its
activation, pooling, normalisation). This pass does the same on the ATen graph, before
lowering: `convolution(x, w, b)` → `convolution(x, w, None) + b.view(C, 1, ...)`.

Simplified: GPU graphs only (the C++ path has its own: ext/cpu_conv folds a bias or an
affine into oneDNN's call); the convolution's backward is untouched (a training graph's
backward graph is compiled on its own and computes the bias gradient as before).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten


def peel_conv_bias(gm: torch.fx.GraphModule) -> int:
    """Rewrite every floating-point GPU convolution with a bias; returns how many."""
    count = 0
    for node in list(gm.graph.nodes):
        out = node.meta.get("val")
        if not (node.target is aten.convolution.default and isinstance(node.args[2], torch.fx.Node)
                and isinstance(out, torch.Tensor) and out.is_cuda and out.dtype.is_floating_point):
            continue
        bias = node.args[2]
        shape = [-1] + [1] * (out.dim() - 2)   # [C] → [C, 1, 1]: broadcast over the spatial dims
        with gm.graph.inserting_after(node):
            view = gm.graph.call_function(aten.view.default, (bias, shape))
        with gm.graph.inserting_after(view):
            add = gm.graph.call_function(aten.add.Tensor, (node, view))
        node.replace_all_uses_with(add, delete_user_cb=lambda user: user is not add)
        node.args = (*node.args[:2], None, *node.args[3:])
        view.meta["val"] = bias.meta["val"].view(shape)
        add.meta["val"] = out + view.meta["val"]
        for new in (view, add):
            new.meta["stack_trace"] = node.meta.get("stack_trace")
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count
