"""Decompositions of ops the core would run as ATen calls, into ops it lowers.

Mirrors the entries of `torch/_inductor/decomposition.py` and `torch/_decomp/decompositions.py`
for these ops (most are taken from torch._decomp as they are, listed in FROM_TORCH), and the
lowerings of `min`/`max` along a dim in `torch/_inductor/lowering.py` (there reductions of
their own; here the value and index reductions side by side, which fuse into one kernel).
Simplified: no op gets a kernel op of its own; each is pointwise arithmetic, `where`,
reductions or gathers the core already lowers. So erfinv is ATen's formula written in
tensor ops (Inductor calls libdevice's or ATen's `calc_erfinv` as one kernel op), and the
special functions (digamma, i0, Bessel, ...) are not here: they still run as ATen calls.
"""
from __future__ import annotations

import torch
from torch._decomp import get_decompositions

from . import pooling

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
    aten.ldexp,                   # x * 2**e
    aten.adaptive_max_pool2d,     # global or evenly divided windows: amax/argmax or max pooling
]


def _min_max(value_op, index_op):
    def dim(x, dim, keepdim=False):
        """(value, index) along `dim`: the first index of the extreme, as eager picks it."""
        return value_op(x, [dim], keepdim), index_op(x, dim, keepdim)
    return dim


def fmax(a, b):
    """The larger, or the one that is not NaN (NaN where both are), as `fmax` / `fmin` pick."""
    return torch.where(a.isnan(), b, torch.where(b.isnan(), a, torch.maximum(a, b)))


def fmin(a, b):
    return torch.where(a.isnan(), b, torch.where(b.isnan(), a, torch.minimum(a, b)))


def round_decimals(x, decimals=0):
    """As ATen's kernel: round(x * 10**d) / 10**d, or round(x / 10**-d) * 10**-d for d < 0."""
    if decimals >= 0:
        return torch.round(x * 10.0 ** decimals) / 10.0 ** decimals
    return torch.round(x / 10.0 ** -decimals) * 10.0 ** -decimals


#: ATen's calc_erfinv (aten/src/ATen/native/Math.h): a rational first guess, central or tail
ERFINV_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
ERFINV_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
ERFINV_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
ERFINV_D = (3.543889200, 1.637067800)


def _horner(z, coefficients):
    """c0 + c1 z + c2 z^2 + ... by Horner's rule, the highest power first, as ATen writes it."""
    total = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        total = total * z + c
    return total


def erfinv(y):
    """ATen's erfinv: the rational guess, then two Newton steps on erf(x) = y; NaN past
    |y| > 1, +-inf at +-1. float16/bfloat16 are computed in float32."""
    dtype = y.dtype if y.is_floating_point() else torch.get_default_dtype()
    y = y.to(torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype)
    a = y.abs()
    z = y * y
    central = y * _horner(z, ERFINV_A) / (_horner(z, ERFINV_B) * z + 1)
    w = torch.sqrt(-torch.log((1 - a) / 2))
    tail = torch.copysign(_horner(w, ERFINV_C), y) / ((ERFINV_D[1] * w + ERFINV_D[0]) * w + 1)
    x = torch.where(a <= 0.7, central, tail)
    for _ in range(2):
        x = x - (torch.erf(x) - y) / (1.1283791670955126 * torch.exp(-x * x))
    x = torch.where(a == 1, torch.copysign(torch.full_like(x, float("inf")), y), x)
    x = torch.where(a > 1, torch.full_like(x, float("nan")), x)
    return x.to(dtype)


def rrelu_eval(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """RReLU out of training: leaky ReLU with the mean slope, the noise left as it was
    (training draws random slopes: an ATen call, NotImplemented here)."""
    if training:
        return NotImplemented
    return torch.where(x >= 0, x, x * ((lower + upper) / 2)), noise.clone()


def table() -> dict:
    """{op: decomposition}: what this extension adds to the decomposition table."""
    found = get_decompositions(FROM_TORCH)
    found[aten.max.dim] = _min_max(aten.amax.default, aten.argmax.default)
    found[aten.min.dim] = _min_max(aten.amin.default, aten.argmin.default)
    found.update({aten.fmax.default: fmax, aten.fmin.default: fmin, aten.round.decimals: round_decimals,
                  aten.erfinv.default: erfinv, aten.rrelu_with_noise_functional.default: rrelu_eval,
                  aten.avg_pool3d.default: pooling.avg_pool3d, aten._adaptive_avg_pool3d.default: pooling.adaptive_avg_pool3d})
    return found
