"""Lowerings of cumsum, cumprod and logcumsumexp to a `Scan` (ir.py).

Mirrors the `cumsum`, `cumprod` and `logcumsumexp` lowerings of `torch/_inductor/lowering.py`
(which build an `ir.Scan`, falling back where it cannot be made). Dtypes as eager's: cumsum
and cumprod of integers and bools give int64 (or the `dtype=` asked for); float16 and
bfloat16 accumulate in float32 in the kernels and round each output; logcumsumexp takes
floating inputs only. The output has eager's strides (the input's, for a dense one).

Autograd writes cumsum's backward as flip(cumsum(flip(grad))): ext/more_ops lowers flip (a
read at index n - 1 - i), which is inlined into the scan that reads it and into the kernel
that reads the scan's result, so the backward is one scan kernel.

Simplified: static sizes only (a symbolic size declines: the op runs as an ATen call); an
empty tensor or a 0-d one is a copy, not a scan.
"""
from __future__ import annotations

import torch

from ...ir.sizevars import is_static
from ...lowering.pointwise import make_pointwise
from ...lowering.registry import aten, register_lowering
from ...lowering.strides import storable_stride
from ...virtualized import V
from .ir import make_scan


def _scan(x, dim, scan_type, dtype):
    size = x.get_size()
    if not all(map(is_static, size)):
        raise NotImplementedError("a scan of symbolic sizes")
    if len(size) == 0 or 0 in size or x.get_dtype().is_complex:
        if x.get_dtype().is_complex:
            raise NotImplementedError("a scan of complex numbers")
        return make_pointwise(lambda v: v, (x,), dtype, size=size)   # one element each (or none): a copy
    dim = dim % len(size)
    meta = V.graph.current_fx_node().meta.get("val") if V.graph.current_fx_node() is not None else None
    stride = storable_stride(size, meta.stride()) if isinstance(meta, torch.Tensor) else None
    return make_scan(x, dim, scan_type, dtype, stride)


def _out_dtype(x, dtype):
    """The dtype= asked for, else int64 for integers and bools, else the input's."""
    if dtype is not None:
        return dtype
    return x.get_dtype() if x.get_dtype().is_floating_point else torch.int64


@register_lowering(aten.cumsum, extension="scan")
def cumsum(x, dim, dtype=None):
    return _scan(x, dim, "sum", _out_dtype(x, dtype))


@register_lowering(aten.cumprod, extension="scan")
def cumprod(x, dim, dtype=None):
    return _scan(x, dim, "prod", _out_dtype(x, dtype))


@register_lowering(aten.logcumsumexp, extension="scan")
def logcumsumexp(x, dim):
    if not x.get_dtype().is_floating_point:
        raise NotImplementedError(f"logcumsumexp of {x.get_dtype()}")
    return _scan(x, dim, "logsumexp", x.get_dtype())
