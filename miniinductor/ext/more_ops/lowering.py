"""Lowerings of ops no decomposition gives well: `flip`, a gather at mirrored indices.

Mirrors `flip` in `torch/_inductor/lowering.py` (a loader reading index n - 1 - i along each
flipped dim), without its view fast path: the result is a pointwise node that fuses into
its readers. Registered with `extension="more_ops"`.
"""
from __future__ import annotations

from ...lowering.pooling import _box
from ...lowering.registry import aten, register_lowering


@register_lowering(aten.flip, extension="more_ops")
def flip(x, dims):
    size = x.get_size()
    flipped = {d % len(size) for d in dims}
    load = x.make_loader()

    def inner_fn(index):
        return load([size[d] - 1 - i if d in flipped else i for d, i in enumerate(index)])
    return _box(x, x.get_dtype(), inner_fn, size)
