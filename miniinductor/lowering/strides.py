"""Strides of lowered values: the layouts taken from eager (graph.py) and channels-last ones.

Lowering phase. An output's strides (`storable_stride`, size-1 dims: `eager_view`) and the
layout an `as_strided` reads (`read_by_as_strided`), exact as Inductor's
`GraphLowering.run_node` requires; channels-last strides and a value stored with them
(`require_channels_last`, as Inductor's `ExternKernel.require_channels_last` in ir.py).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ..ir.nodes import IRNode, Layout, Pointwise, ReinterpretView, StorageBox, strided_view_of
from ..ir.sizevars import as_exprs, is_static
from ..virtualized import V

aten = torch.ops.aten


def channels_last_strides(size) -> list:
    """[N, C, H, W] → the strides of channels-last memory: [C*H*W, 1, W*C, C] (and so in 1-D, 3-D)."""
    n, c, *spatial = size
    inner = [c * math.prod(spatial[k + 1:]) for k in range(len(spatial))]
    return [c * math.prod(spatial), 1, *inner]


def same_strides(layout: Layout, stride) -> bool:
    """Whether `layout` has the strides `stride` (None: any) on its dims longer than 1."""
    return stride is None or all(a == b for a, b, n in zip(layout.stride, as_exprs(stride), layout.size)
                                 if n != 1)


def require_channels_last(x: IRNode) -> IRNode:
    """`x` stored channels-last: a value not yet stored is stored so, a buffer (or a strided
    view of one) already channels-last is kept, anything else is copied (Inductor's
    `ExternKernel.require_channels_last`)."""
    stride = channels_last_strides(x.get_size())
    if isinstance(x, StorageBox) and not x.is_realized():
        return x.realize(stride)
    x.realize()
    found = strided_view_of(x)
    if found is not None and same_strides(found[1], stride):
        return x
    copy = Pointwise(x.get_device(), x.get_dtype(), x.make_loader(), x.get_size(), origins={V.graph.current_node_name()})
    return StorageBox(copy).realize(stride)


def eager_view(buf, layout: Layout, meta):
    """`buf` read through `layout` (one of its strided views, or its own layout) as a graph
    output: `buf` itself, or a ReinterpretView. Its size-1 dims take eager's strides from
    `meta`: they never move the index, but show in the output's `.stride()` (`x.view(-1, 1,
    2)` is (2, 2, 1) in eager, wherever the kernel's layout put its size-1 dim)."""
    stride = as_exprs(meta.stride()) if isinstance(meta, torch.Tensor) and meta.dim() == len(layout.size) else None
    if stride is not None:
        layout = dataclasses.replace(layout, stride=[e if n == 1 else s for s, e, n in
                                                     zip(layout.stride, stride, layout.size)])
    return buf if layout == buf.layout else ReinterpretView(buf, layout)


#: ops that address their input's memory by strides: it must be laid out as in eager
AS_STRIDED_OPS = (aten.as_strided.default, aten.as_strided_.default, aten.as_strided_scatter.default)


def read_by_as_strided(node: torch.fx.Node) -> bool:
    """Does an `as_strided` read this node's memory, directly or through views of it?"""
    return any(user.target in AS_STRIDED_OPS
               or (getattr(user.target, "is_view", False) and read_by_as_strided(user)) for user in node.users)


def storable_stride(size, stride) -> list[int] | None:
    """Eager's strides for a computed output, if a kernel can store them: every index its own
    element (gaps allowed: `torch.empty_strided((3, 3), (6, 1))` has them). Overlapping ones
    (an expand's 0) give None: contiguous (such outputs are views, found before this)."""
    if len(stride) != len(size):
        return None
    stride = as_exprs(stride)
    if not all(map(is_static, [*stride, *size])):   # symbolic: in the traced order, where provable
        known = V.graph.sizevars
        reach = 1
        for s, n in sorted(((s, n) for s, n in zip(stride, size) if n != 1), key=lambda p: known.size_hint(p[0])):
            if not known.statically_known_leq(reach, s):
                return None
            reach = s * n
        return stride
    reach = 1
    for s, n in sorted((s, n) for s, n in zip(stride, size) if n != 1):
        if s < reach:
            return None
        reach = s * n
    return list(stride)
