"""Lowering of `prepare_softmax_online`: each row's max and sum of exp, in one pass or two.

Mirrors the `prepare_softmax_online` lowering in `torch/_inductor/lowering.py`. Softmax,
log_softmax and logsumexp reach us decomposed around this op (capture/softmax.py):
`m, s = prepare_softmax_online(x, dim)`, the row max and the sum of `exp(x - m)`.

Where a row fits one block (Triton's persistent reductions: the whole row is in registers
already), it becomes the two reductions PyTorch's decomposition would give:

    buf0 = reduction('max', x)
    buf1 = reduction('sum', exp(x - (buf0 == -inf ? 0 : buf0)))

Where the row is longer (`BackendPolicy.online_softmax`), it becomes one *online* reduction
with two outputs, which reads the row once, keeping per lane a running max and a sum that
is rescaled whenever the max grows (Milakov & Gimelshein, "Online normalizer calculation
for softmax", 2018):

    buf0 = reduction('online_softmax_reduce', x)[0]     # the max
    buf1 = reduction('online_softmax_reduce', x)[1]     # the sum of exp(x - max)

    per element:  m' = max(m, x);  s = s * exp(m - m') + exp(x - m');  m = m'
    (exp(. - m') taken with m' = 0 where m' is -inf: a lane that saw only -inf keeps s = 0)

A kernel that computes both buffers runs the reduction once (codegen: TritonKernel and
CppKernel cache it per loop). Simplified: only a reduction over the innermost dim is made
online; the online pair is never split in two (`split_reductions`).
"""
from __future__ import annotations

import math

from ..capture.softmax import prepare_softmax_online as _op
from ..ir.sizevars import is_static
from ..virtualized import V, ops
from .pointwise import make_pointwise
from .reductions import _dims, make_reduction
from .registry import register_lowering


def _row_length_bound(rnumel):
    """The row length, or a symbolic one's upper bound (None: unbounded)."""
    return int(rnumel) if is_static(rnumel) else V.graph.sizevars.upper_bound(rnumel)


@register_lowering(_op._opoverload)
def prepare_softmax_online(x, dim):
    size = x.get_size()
    (dim,) = _dims(x, dim)
    innermost = all(n == 1 for n in size[dim + 1:])
    xnumel = math.prod(n for k, n in enumerate(size) if k != dim)
    if innermost and V.graph.policy.online_softmax(int(xnumel) if is_static(xnumel) else None,
                                                   _row_length_bound(size[dim])):
        return tuple(make_reduction(x, [dim], True, "online_softmax_reduce", output_index=k) for k in (0, 1))
    dtype = x.get_dtype()
    row_max = make_reduction(x, [dim], True, "max")

    def exp_shifted(v, m):
        shift = ops.where(ops.eq(m, ops.constant(float("-inf"), dtype)), ops.constant(0.0, dtype), m)
        return ops.exp(ops.sub(v, shift))
    return row_max, make_reduction(make_pointwise(exp_shifted, (x, row_max), dtype), [dim], True, "sum")
