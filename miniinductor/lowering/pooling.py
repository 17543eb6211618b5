"""Lowerings of 2-d pooling, forward: max (with indices), average, adaptive average.

Lowering phase (ATen op → loop IR). Mirrors the pooling lowerings in
`torch/_inductor/lowering.py` (`_max_pool_with_offsets`, `avg_pool2d`, `_adaptive_avg_pool2d`).
All index arithmetic is SymPy on the output position, so pooling is loads at computed
positions plus arithmetic, and fuses like any other op, in eager's order (docs/design_notes.md);
the backwards are the pool_grad extension's (ext/pool_grad/), helpers from here.
Simplified: 2-d only; like Inductor, a max-pooling window of more than MAX_UNROLL positions
falls back to ATen, as do integer inputs; adaptive pooling compiles once per shape.
"""
from __future__ import annotations

import math

import sympy
import torch

from ..ir.indexing import ClampIndex, FloorDiv, index_vars
from ..ir.nodes import Pointwise, Reduction, StorageBox, contiguous_strides, strided_view_of
from ..ir.sizevars import SymbolicUnsupported, is_static
from ..ops_handler import RecordingHandler
from ..virtualized import V, ops
from .graph import _expensive, _record
from .registry import aten, register_lowering
from .strides import channels_last_strides, same_strides

#: largest unrolled window (Inductor's threshold): more positions fall back to ATen
MAX_UNROLL = 25


def _pair(v, default=None):
    """An int or 1- or 2-list as [h, w]; None or an empty list (ATen's unset stride): default."""
    if isinstance(v, int):
        return [v, v]
    return list(v) * (2 if len(v) == 1 else 1) if v else default


def _params(kernel_size, stride, padding, dilation=1):
    kernel = _pair(kernel_size)
    return kernel, _pair(stride, kernel), _pair(padding), _pair(dilation)


def _out_hw():
    meta = V.graph.current_fx_node().meta["val"]
    return list((meta[0] if isinstance(meta, (list, tuple)) else meta).shape[-2:])


def _float_only(x):
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError("pooling of an integer tensor")


def _int(expr, dtype=torch.int64):
    """An integer value: a constant, or an expression of the loop variables and sizes."""
    return ops.constant(int(expr), dtype) if is_static(expr) else ops.index_expr(expr, dtype)


def _inside(expr, size):
    """0 <= expr < size, as a bool value; compared in int32 where the size allows (as wide
    as float32 lanes in C++, and a GPU's int64 arithmetic takes two instructions)."""
    dtype = _size_dtype(size, size)
    return ops.logical_and(ops.ge(_int(expr, dtype), _int(0, dtype)), ops.lt(_int(expr, dtype), _int(size, dtype)))


def _clamp(expr, size):
    """`expr` moved into [0, size): an index that is always in bounds."""
    if is_static(size) and int(size) < 2**31:
        return ClampIndex(expr, size - 1)
    return sympy.Max(0, sympy.Min(expr, size - 1))


def _all(conds):
    conds = [c for c in conds if c is not None]
    out = conds[0] if conds else None
    for c in conds[1:]:
        out = ops.logical_and(out, c)
    return out


def _masked(mask, body, other):
    return body() if mask is None else ops.masked(mask, body, other)


def _box(x, dtype, inner_fn, size):
    return StorageBox(Pointwise(x.get_device(), dtype, inner_fn, size))


def _realize_input(x):
    """Every output reads a window of `x`: compute it once (Inductor's `realize_hint`) unless
    it is cheap to recompute per window (`_expensive`: a GPU convolution's bias add), in
    the memory order of what it reads where that is channels-last (a BatchNorm + ReLU after
    a convolution of a CPU inference graph, ext/layout): the pooling then reads
    along the channels too (`_stored_like`)."""
    if isinstance(x, StorageBox) and not x.is_realized() and (not isinstance(x.data, Pointwise)
                                                              or _expensive(V.graph, _record(x.data))):
        x.realize(channels_last_strides(x.get_size()) if _reads_channels_last(x) else None)
    return x


def _is_channels_last(node) -> bool:
    found = strided_view_of(node) if len(node.get_size()) == 4 else None
    return found is not None and same_strides(found[1], channels_last_strides(node.get_size())) \
        and not same_strides(found[1], contiguous_strides(node.get_size()))


def _reads_channels_last(box) -> bool:
    """Does this 4-D value read a channels-last buffer of its own size?"""
    if len(box.get_size()) != 4 or not isinstance(box.data, Pointwise):
        return False
    handler = RecordingHandler()
    with V.set_ops_handler(handler):
        box.data.inner_fn(index_vars("i", box.get_size()))
    buffers = [V.graph.get_buffer(dep.name) for dep in handler.reads]
    return any(list(b.get_size()) == list(box.get_size()) and _is_channels_last(b) for b in buffers)


# ----------------------------------------------------------------------------- max pooling
def _may_leave(pad, n_out, stride, kernel, dilation, n_in) -> bool:
    """May a window leave the input along this dim (its reads then checked)? Only padded, or
    (ceil_mode) hanging over the end: the last window's last position at n_in or beyond. With
    symbolic sizes, unless the ShapeEnv proves it inside for every size."""
    return pad > 0 or not V.graph.sizevars.statically_known_lt((n_out - 1) * stride + (kernel - 1) * dilation, n_in)


@register_lowering(aten.max_pool2d_with_indices)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    _float_only(x)
    kernel, stride, padding, dilation = _params(kernel_size, stride, padding, dilation)
    if math.prod(kernel) > MAX_UNROLL:
        raise NotImplementedError(f"a max-pooling window over {MAX_UNROLL} positions")
    *batch, H, W = x.get_size()
    OH, OW = _out_hw()
    checked = [_may_leave(*args) for args in zip(padding, (OH, OW), stride, kernel, dilation, (H, W))]
    load, dtype = _realize_input(x).make_loader(), x.get_dtype()
    # the index is computed in int32 where it fits (as wide as the float32 values), widened at the end
    index_dtype = torch.int32 if is_static(H * W) and int(H * W) < 2**31 else torch.int64
    clamped = V.graph.policy.clamped_window_reads

    def window(prefix, oh, ow):
        """(valid, value, position) of each window position in row-major order. C++: each read
        at the nearest position inside (`valid` then discards it), a load without a mask,
        contiguous along the channels of a channels-last input. Triton: a masked load, -inf
        outside (it never replaces the best value; `valid` still picks the index)."""
        for kh in range(kernel[0]):
            for kw in range(kernel[1]):
                ih = oh * stride[0] - padding[0] + kh * dilation[0]
                iw = ow * stride[1] - padding[1] + kw * dilation[1]
                valid = _all([_inside(ih, H) if checked[0] else None, _inside(iw, W) if checked[1] else None])
                if clamped:
                    value = load([*prefix, _clamp(ih, H) if checked[0] else ih, _clamp(iw, W) if checked[1] else iw])
                else:
                    value = _masked(valid, lambda ih=ih, iw=iw: load([*prefix, ih, iw]), float("-inf"))
                yield valid, value, ih * W + iw

    def scan(index, want_index):
        """eager's loop: best = -inf; each valid position in row-major order replaces it if
        larger or NaN. Its index, found from the best value: the last NaN if it is NaN, else
        the first position holding it (-inf everywhere: the first valid position). Tracking
        the index through the scan instead kept g++ from vectorising the kernel."""
        *prefix, oh, ow = index
        positions = list(window(prefix, oh, ow))
        best = ops.constant(float("-inf"), dtype)
        for valid, value, _ in positions:
            if valid is None or not clamped:    # value > best or NaN: torch.maximum's NaN rule
                best = ops.maximum(value, best)
            else:
                take = ops.logical_or(ops.gt(value, best), ops.ne(value, value))
                best = ops.where(ops.logical_and(valid, take), value, best)
        if not want_index:
            return best
        first, last_nan = ops.constant(-1, index_dtype), ops.constant(-1, index_dtype)
        for valid, value, position in reversed(positions):
            hit = ops.eq(value, best)
            first = ops.where(hit if valid is None else ops.logical_and(valid, hit), _int(position, index_dtype), first)
        for valid, value, position in positions:
            nan = ops.ne(value, value)
            last_nan = ops.where(nan if valid is None else ops.logical_and(valid, nan), _int(position, index_dtype), last_nan)
        arg = ops.where(ops.ne(best, best), last_nan, first)
        return arg if index_dtype == torch.int64 else ops.to_dtype(arg, torch.int64)

    size = [*batch, OH, OW]
    return (_stored_like(x, _box(x, dtype, lambda index: scan(index, False), size)),
            _stored_like(x, _box(x, torch.int64, lambda index: scan(index, True), size)))


def _stored_like(x, out):
    """`out` stored channels-last where the (realized) input `x` is, as eager's output is: the
    kernel's loops then follow the store (ext/cpu_fast/loops.py), channels innermost, and
    every load of a window is contiguous along them. Stored NCHW, each load would stride by
    C*stride across the input."""
    if _is_channels_last(x):
        out.realize(channels_last_strides(out.get_size()))
    return out


# ----------------------------------------------------------------------------- average pooling
def _acc(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _avg_divisor(o, n, k, s, p, count_include_pad, dtype=torch.int64):
    """ATen's divisor along one dim for output position `o`: the window's length, clipped
    to the padded input (count_include_pad) or to the input itself. An integer of `dtype`."""
    start = _int(o * s - p, dtype)
    end = ops.minimum(ops.add(start, _int(k, dtype)), _int(n + p, dtype))
    if count_include_pad:
        return ops.sub(end, start)
    return ops.sub(ops.minimum(end, _int(n, dtype)), ops.maximum(start, _int(0, dtype)))


def _divide(total, divisors, dtype):
    """total / each of `divisors(index)` (int64 values) in turn, as eager divides: in the
    accumulation type, then cast to `dtype`."""
    acc = total.get_dtype()
    load = total.make_loader()

    def inner_fn(index):
        value = load(index)
        for divisor in divisors(index):
            value = ops.truediv(value, ops.to_dtype(divisor, acc))
        return value if acc == dtype else ops.to_dtype(value, dtype)
    return _box(total, dtype, inner_fn, total.get_size())


def _window_sum(x, size, window, position):
    """A sum Reduction over `window` ([kh, kw]); `position(index, r)` gives the input (ih,
    iw) and the mask (None: always inside) of window element r of output `index`."""
    load, acc = _realize_input(x).make_loader(), _acc(x.get_dtype())

    def inner_fn(index, rindex):
        (ih, iw), valid = position(index, rindex)
        value = _masked(valid, lambda: load([*index[:-2], ih, iw]), 0.0)
        return value if acc == x.get_dtype() else ops.to_dtype(value, acc)
    box = StorageBox(Reduction(x.get_device(), acc, inner_fn, size, list(window), "sum", acc))
    box.realize()
    return box


@register_lowering(aten.avg_pool2d)
def avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _float_only(x)
    kernel, stride, padding, _ = _params(kernel_size, stride, padding)
    *batch, H, W = x.get_size()
    OH, OW = _out_hw()
    checked = [padding[d] > 0 or ceil_mode for d in range(2)]   # windows may leave the input
    int_dtype = _size_dtype(H, W)

    def divisors(index):
        return [_avg_divisor_2d(index[-2:], (H, W), kernel, stride, padding, count_include_pad,
                                divisor_override, int_dtype)]

    def position(index, r):
        ih, iw = (index[-2 + d] * stride[d] - padding[d] + r[d] for d in range(2))
        return (ih, iw), _all([_inside(ih, H) if checked[0] else None, _inside(iw, W) if checked[1] else None])
    if math.prod(kernel) > MAX_UNROLL:
        total = _window_sum(x, [*batch, OH, OW], kernel, position)
        return _divide(total, divisors, x.get_dtype())
    # a small window: its positions unrolled and added up in eager's order (row-major), in one
    # pointwise kernel, as Inductor does; a 3x3 window as a reduction wasted 7 of a Triton
    # block's 16 lanes
    load, dtype, acc = _realize_input(x).make_loader(), x.get_dtype(), _acc(x.get_dtype())
    clamped = V.graph.policy.clamped_window_reads

    def window_sum(index):
        total = ops.constant(0.0, acc)
        for kh in range(kernel[0]):
            for kw in range(kernel[1]):
                (ih, iw), valid = position(index, (kh, kw))
                if valid is None:
                    value = load([*index[:-2], ih, iw])
                elif clamped:        # read at the nearest position inside, discarded (see max pooling)
                    value = ops.where(valid, load([*index[:-2], _clamp(ih, H), _clamp(iw, W)]), ops.constant(0.0, dtype))
                else:
                    value = ops.masked(valid, lambda ih=ih, iw=iw: load([*index[:-2], ih, iw]), 0.0)
                total = ops.add(total, value if acc == dtype else ops.to_dtype(value, acc))
        return total
    return _stored_like(x, _divide(_box(x, acc, window_sum, [*batch, OH, OW]), divisors, dtype))


def _size_dtype(H, W):
    """int32 for window arithmetic on sizes that allow it (a GPU's int64 takes two instructions)."""
    return torch.int32 if is_static(H) and is_static(W) and max(int(H), int(W)) < 2**30 else torch.int64


def _avg_divisor_2d(o, n, kernel, stride, padding, count_include_pad, divisor_override, dtype=torch.int64):
    if divisor_override:
        return ops.constant(divisor_override, dtype)
    return ops.mul(*[_avg_divisor(o[d], n[d], kernel[d], stride[d], padding[d], count_include_pad, dtype)
                     for d in range(2)])


# ----------------------------------------------------------------------------- adaptive average pooling
def _floordiv(a, b):
    return a // b if isinstance(a, int) else FloorDiv(a, b)


def _start(o, n_out, n_in):
    return _floordiv(o * n_in, n_out)


def _end(o, n_out, n_in):
    return _floordiv((o + 1) * n_in + n_out - 1, n_out)


def _adaptive_divisor(index, n_in, n_out):
    """eager divides by each window's height, then by its width."""
    return [ops.sub(_int(_end(o, m, n)), _int(_start(o, m, n))) for o, n, m in zip(index[-2:], n_in, n_out)]


def _static_windows(*sizes):
    """Adaptive windows are laid out from the sizes as ints (each one's length, how many
    may hold a position): symbolic sizes compile once per shape (capture/specialize.py)."""
    if not all(map(is_static, sizes)):
        raise SymbolicUnsupported("adaptive average pooling of symbolic sizes: its window lengths are needed as ints")
    return [int(n) for n in sizes]


def _zeros(x, size):
    """A value of zeros: pooling's result where there is no window (an output size of 0,
    whose result is empty) and its gradient there."""
    return _box(x, x.get_dtype(), lambda index: ops.constant(0.0, x.get_dtype()), size)


@register_lowering(aten._adaptive_avg_pool2d)
def adaptive_avg_pool2d(x, output_size):
    _float_only(x)
    *batch, H, W = x.get_size()
    H, W, *out = _static_windows(H, W, *_pair(output_size))
    if 0 in out:   # no windows: an empty output (`max` below would have nothing to take)
        return _zeros(x, [*batch, *out])
    window = [max(_end(o, m, n) - _start(o, m, n) for o in range(m)) for n, m in zip((H, W), out)]

    def position(index, r):
        starts = [_start(index[-2 + d], out[d], (H, W)[d]) for d in range(2)]
        ih, iw = starts[0] + r[0], starts[1] + r[1]
        ragged = [(H, W)[d] % out[d] != 0 for d in range(2)]   # windows of unequal length
        return (ih, iw), _all([ops.lt(_int(ih), _int(_end(index[-2], out[0], H))) if ragged[0] else None,
                               ops.lt(_int(iw), _int(_end(index[-1], out[1], W))) if ragged[1] else None])
    total = _window_sum(x, [*batch, *out], window, position)
    return _divide(total, lambda index: _adaptive_divisor(index, (H, W), out), x.get_dtype())


