"""3-d average pooling (and adaptive average pooling that is one) as a sum of strided slices.

Mirrors `avg_pool3d` and `_adaptive_avg_pool3d` in `torch/_inductor/lowering.py`, which
load each window position of a padded input in a pointwise kernel; here the same as a
decomposition: the input zero-padded, then one strided slice per kernel offset, summed in
eager's order (depth, then height, then width) and divided once, all of it one pointwise
kernel. Simplified: no ceil_mode that adds a window, no padding left out of the count
(count_include_pad=False with padding), at most MAX_TERMS offsets, and adaptive pooling only
where the windows do not overlap (input sizes multiples of the output's); the rest, and the
backwards, return NotImplemented and run as ATen calls.
"""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

#: the most kernel offsets summed inline
MAX_TERMS = 64


def _triple(value, default=None):
    """An int or a list of 1 or 3 ints as 3 ints; `default` where it is None or empty."""
    if value is None or (not isinstance(value, int) and len(value) == 0):
        value = default
    return [value] * 3 if isinstance(value, int) else list(value) * (3 if len(value) == 1 else 1)


def avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    kernel, pad = _triple(kernel_size), _triple(padding)
    stride = _triple(stride, kernel)
    sizes = x.shape[-3:]
    out = [(n + 2 * p - k) // s + 1 for n, p, k, s in zip(sizes, pad, kernel, stride)]
    ceil_out = [-(-(n + 2 * p - k) // s) + 1 for n, p, k, s in zip(sizes, pad, kernel, stride)]
    if (ceil_mode and ceil_out != out) or (any(pad) and not count_include_pad) or math.prod(kernel) > MAX_TERMS:
        return NotImplemented
    padded = F.pad(x, [pad[2], pad[2], pad[1], pad[1], pad[0], pad[0]]) if any(pad) else x
    total = None
    for a, b, c in itertools.product(*(range(k) for k in kernel)):
        term = padded[..., a:a + stride[0] * (out[0] - 1) + 1:stride[0], b:b + stride[1] * (out[1] - 1) + 1:stride[1],
                      c:c + stride[2] * (out[2] - 1) + 1:stride[2]]
        total = term if total is None else total + term
    return total / (divisor_override or math.prod(kernel))


def adaptive_avg_pool3d(x, output_size):
    sizes, out = x.shape[-3:], _triple(output_size)
    if any(o == 0 or n % o for n, o in zip(sizes, out)):
        return NotImplemented
    kernel = [n // o for n, o in zip(sizes, out)]
    if math.prod(kernel) > MAX_TERMS:
        return x.unflatten(-1, (out[2], kernel[2])).unflatten(-3, (out[1], kernel[1])).unflatten(
            -5, (out[0], kernel[0])).mean((-5, -3, -1)) if x.dim() >= 3 else NotImplemented
    return torch.ops.aten.avg_pool3d.default(x, kernel, kernel)
