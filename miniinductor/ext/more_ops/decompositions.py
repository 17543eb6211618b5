"""Decompositions of ops the core would run as ATen calls, into ops it lowers.

Mirrors the entries of `torch/_inductor/decomposition.py` and `torch/_decomp/decompositions.py`
for these ops (most are taken from torch._decomp as they are, listed in FROM_TORCH), and the
lowerings of `min`/`max` along a dim in `torch/_inductor/lowering.py` (there reductions of
their own; here the value and index reductions side by side, which fuse into one kernel).
Simplified: no op gets a kernel op of its own; each is pointwise arithmetic, `where`,
reductions or gathers the core already lowers.
"""
from __future__ import annotations

import torch
from torch._decomp import get_decompositions

aten = torch.ops.aten

#: torch._decomp's decompositions taken as they are: each becomes ops the core lowers
FROM_TORCH = [
    aten.hardtanh,                # clamp(x, min, max): ReLU6 is hardtanh(0, 6)
    aten.elu,                     # where(x > 0, x * scale, expm1(x * input_scale) * alpha * scale): SELU too
    aten.leaky_relu,              # where(x > 0, x, x * slope)
    aten.native_group_norm,       # per-group mean and rstd (two sums), then the affine
    aten.native_group_norm_backward,   # per-channel and per-group sums, then pointwise
    aten.max_pool3d_with_indices,  # the windows unfolded, then a max and its index
    aten.repeat,                  # an expand and a copy of the view
]


def _min_max(value_op, index_op):
    def dim(x, dim, keepdim=False):
        """(value, index) along `dim`: the first index of the extreme, as eager picks it."""
        return value_op(x, [dim], keepdim), index_op(x, dim, keepdim)
    return dim


def table() -> dict:
    """{op: decomposition}: what this extension adds to the decomposition table."""
    found = get_decompositions(FROM_TORCH)
    found[aten.max.dim] = _min_max(aten.amax.default, aten.argmax.default)
    found[aten.min.dim] = _min_max(aten.amin.default, aten.argmin.default)
    return found
