"""Lowerings of the backwards of 2-d pooling: max (from the saved indices), average, adaptive average.

Mirrors `max_pool2d_with_indices_backward`, `avg_pool2d_backward` and
`_adaptive_avg_pool2d_backward` in `torch/_inductor/lowering.py`. Each backward is a gather,
not a scatter: an input position loops over the few output windows that can contain it, in
the order eager's scatter visits them (so sums round alike), and adds their gradients -- for
max pooling only where the saved index says that window picked this position; windows
outside the output are read clamped too. The helpers shared with the forwards are
lowering/pooling.py's. Registered with `extension="pool_grad"`: with the extension off,
`find_lowering` skips them and the ops run as ATen calls.

Simplified: 2-d only; a set of candidate windows of more than MAX_UNROLL positions falls back
to ATen, as do integer inputs.
"""
from __future__ import annotations

import math

from ...ir.indexing import FloorDiv
from ...lowering.pooling import (
    MAX_UNROLL,
    _acc,
    _adaptive_divisor,
    _all,
    _avg_divisor_2d,
    _box,
    _clamp,
    _end,
    _float_only,
    _inside,
    _int,
    _params,
    _size_dtype,
    _start,
    _static_windows,
    _zeros,
)
from ...lowering.registry import aten, register_lowering
from ...virtualized import ops


def _candidates(stride, span):
    """How many windows of length `span`, `stride` apart, may contain one position: those
    starting at FloorDiv(i + pad, stride) - j for j in range(this many)."""
    return -(-span // stride)


@register_lowering(aten.max_pool2d_with_indices_backward, extension="pool_grad")
def max_pool2d_with_indices_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """grad_input[h, w] = the sum of grad[ph, pw] over the windows whose saved index is h*W + w."""
    _float_only(x)
    kernel, stride, padding, dilation = _params(kernel_size, stride, padding, dilation)
    counts = [_candidates(s, (k - 1) * d + 1) for k, s, d in zip(kernel, stride, dilation)]
    W = x.get_size()[-1]
    load_index, acc = indices.make_loader(), _acc(grad.get_dtype())
    OH, OW = grad.get_size()[-2:]

    def term(prefix, h, w, ph, pw, inside, grad_at):
        saved = load_index([*prefix, _clamp(ph, OH), _clamp(pw, OW)])   # (an edge's, where not inside)
        picked = ops.logical_and(inside, ops.eq(saved, _int(h * W + w)))
        return ops.where(picked, grad_at(inside), ops.constant(0.0, acc))
    return _gather_windows(x, grad, counts, _last_windows(stride, padding), term)


def _last_windows(stride, padding):
    """The last window (along each dim) that may hold input position i: FloorDiv(i + pad, stride)."""
    return [lambda i, d=d: FloorDiv(i + padding[d], stride[d]) for d in range(2)]


def _gather_windows(x, grad, counts, last, term):
    """grad_input as a gather: input position (h, w) sums `term(prefix, h, w, ph, pw, inside,
    grad_at)` over the candidate windows ph in last[0](h) - counts[0] + 1 ... last[0](h) (pw
    alike), in ascending order: the order eager's backward adds them in. `inside` is whether
    (ph, pw) is an output position, `grad_at(mask)` loads grad there, where `mask` holds.
    float16/bfloat16 gradients are summed in float32."""
    if math.prod(counts) > MAX_UNROLL:
        raise NotImplementedError(f"more than {MAX_UNROLL} windows may hold one position")
    OH, OW = grad.get_size()[-2:]
    dtype, acc = grad.get_dtype(), _acc(grad.get_dtype())
    load = grad.make_loader()

    def inner_fn(index):
        *prefix, h, w = index
        total = ops.constant(0.0, acc)
        for jh in reversed(range(counts[0])):
            for jw in reversed(range(counts[1])):
                ph, pw = last[0](h) - jh, last[1](w) - jw

                def grad_at(mask, ph=ph, pw=pw):   # read at the nearest window, discarded where `mask` fails
                    value = ops.where(mask, load([*prefix, _clamp(ph, OH), _clamp(pw, OW)]), ops.constant(0.0, dtype))
                    return value if acc == dtype else ops.to_dtype(value, acc)
                total = ops.add(total, term(prefix, h, w, ph, pw, _all([_inside(ph, OH), _inside(pw, OW)]), grad_at))
        return total if acc == dtype else ops.to_dtype(total, dtype)
    return _box(x, dtype, inner_fn, x.get_size())


@register_lowering(aten.avg_pool2d_backward, extension="pool_grad")
def avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """grad_input[h, w] = the sum of grad[ph, pw] / divisor(ph, pw) over the windows holding (h, w)."""
    _float_only(x)
    kernel, stride, padding, _ = _params(kernel_size, stride, padding)
    H, W = x.get_size()[-2:]
    acc, int_dtype = _acc(grad.get_dtype()), _size_dtype(H, W)

    def term(prefix, h, w, ph, pw, inside, grad_at):
        # a candidate holds (h, w) if its window reaches it: ph*s - p + k > h
        holds = _all([inside, ops.gt(_int(ph * stride[0] - padding[0] + kernel[0]), _int(h)),
                      ops.gt(_int(pw * stride[1] - padding[1] + kernel[1]), _int(w))])
        divisor = _avg_divisor_2d((ph, pw), (H, W), kernel, stride, padding, count_include_pad, divisor_override, int_dtype)
        divisor = ops.maximum(divisor, ops.constant(1, int_dtype))   # (0 only where `holds` is false)
        return ops.where(holds, ops.truediv(grad_at(holds), ops.to_dtype(divisor, acc)), ops.constant(0.0, acc))
    return _gather_windows(x, grad, [_candidates(s, k) for s, k in zip(stride, kernel)],
                           _last_windows(stride, padding), term)


@register_lowering(aten._adaptive_avg_pool2d_backward, extension="pool_grad")
def adaptive_avg_pool2d_backward(grad, x):
    """grad_input[h, w] = the sum of grad[oh, ow] / kh / kw over the windows holding (h, w):
    those from oh = floor(h*OH/H) on whose window starts at or before h."""
    _float_only(x)
    H, W, OH, OW = _static_windows(*x.get_size()[-2:], *grad.get_size()[-2:])
    if OH == 0 or OW == 0:   # no window holds any position
        return _zeros(x, x.get_size())
    counts = [max(sum(1 for o in range(m) if _start(o, m, n) <= i < _end(o, m, n)) for i in range(n))
              for n, m in ((H, OH), (W, OW))]
    last = [lambda h: FloorDiv(h * OH, H) + counts[0] - 1, lambda w: FloorDiv(w * OW, W) + counts[1] - 1]
    acc = _acc(grad.get_dtype())

    def term(prefix, h, w, oh, ow, inside, grad_at):
        holds = _all([inside, ops.le(_int(_start(oh, OH, H)), _int(h)), ops.le(_int(_start(ow, OW, W)), _int(w))])
        kh, kw = _adaptive_divisor([oh, ow], (H, W), (OH, OW))
        share = ops.truediv(ops.truediv(grad_at(holds), ops.to_dtype(kh, acc)), ops.to_dtype(kw, acc))
        return ops.where(holds, share, ops.constant(0.0, acc))
    return _gather_windows(x, grad, counts, last, term)
