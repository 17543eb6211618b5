"""Lowerings of reductions: sum, prod, mean, amax/amin, argmax/argmin, any.

Mirrors `make_reduction` in `torch/_inductor/lowering.py`. A reduction over `dims` of
a tensor of shape `size` becomes `Reduction(ranges=<kept dims>,
reduction_ranges=<reduced dims>, inner_fn(index, rindex))`; it is realized at once into a
`ComputedBuffer` (its consumers then load it like any buffer). Softmax, layer norm, var,
logsumexp and friends arrive here already decomposed into these by `capture/`.

Simplified: no split reductions (Inductor splits a huge full reduction into two kernels
for parallelism); the C++ kernel parallelises the outer loop instead.
"""
from __future__ import annotations

import torch

from ..ir.nodes import Reduction, StorageBox
from ..virtualized import V, ops
from .pointwise import make_pointwise
from .registry import aten, prims, register_lowering


def _dims(x, dims) -> list[int]:
    rank = len(x.get_size())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(rank, 1) for d in dims}) if rank else []


def make_reduction(x, dims, keepdim, reduction_type, dtype=None, src_dtype=None) -> StorageBox:
    """Reduce `x` over `dims` with `reduction_type` (see ops_handler.REDUCTION_TYPES)."""
    size = x.get_size()
    dims = _dims(x, dims)
    kept = [d for d in range(len(size)) if d not in dims]
    ranges = [1 if d in dims else size[d] for d in range(len(size))] if keepdim else [size[d] for d in kept]
    reduction_ranges = [size[d] for d in dims]
    src_dtype = src_dtype or x.get_dtype()
    dtype = dtype or src_dtype
    load = x.make_loader()

    def inner_fn(index, rindex):
        full = [None] * len(size)
        outer = [index[d] for d in kept] if keepdim else list(index)
        for d, i in zip(kept, outer):
            full[d] = i
        for d, r in zip(dims, rindex):
            full[d] = r
        value = load(full)
        return value if x.get_dtype() == src_dtype else ops.to_dtype(value, src_dtype)

    node = Reduction(x.get_device(), dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype)
    box = StorageBox(node)
    box.realize()
    return box


def _acc_dtype(dtype):
    """sum/prod of integers and bools accumulate (and return) int64, as in eager."""
    return torch.int64 if not dtype.is_floating_point and not dtype.is_complex else dtype


def _cast(x, dtype):
    if dtype is None or dtype == x.get_dtype():
        return x
    return make_pointwise(lambda v: v, (x,), dtype, size=x.get_size())


@register_lowering(aten.sum, prims.sum)
def sum_(x, dims=None, keepdim=False, dtype=None, **kwargs):
    if V.graph.current_target() is prims.sum.default:
        dims, keepdim, dtype = dims, False, kwargs.get("output_dtype")
    x = _cast(x, dtype)
    out = _acc_dtype(x.get_dtype())
    return _maybe_downcast(make_reduction(_cast(x, out), dims, keepdim, "sum"), dtype)


def _maybe_downcast(x, dtype):
    return x if dtype is None else _cast(x, dtype)


@register_lowering(aten.prod)
def prod(x, dims=None, keepdim=False, dtype=None):
    x = _cast(x, dtype)
    return make_reduction(_cast(x, _acc_dtype(x.get_dtype())), dims, keepdim, "prod")


@register_lowering(aten.mean)
def mean(x, dims=None, keepdim=False, dtype=None):
    x = _cast(x, dtype)
    out = x.get_dtype()
    acc = torch.float32 if out in (torch.float16, torch.bfloat16) else out
    total = make_reduction(_cast(x, acc), dims, keepdim, "sum")
    count = 1
    for d in _dims(x, dims):
        count *= x.get_size()[d]
    return make_pointwise(lambda v, n: ops.truediv(v, n), (total, float(count)), acc, out)


@register_lowering(aten.amax, aten.amin)
def amax_amin(x, dims=(), keepdim=False):
    kind = "max" if V.graph.current_target().overloadpacket is aten.amax else "min"
    return make_reduction(x, dims, keepdim, kind)


@register_lowering(aten.argmax, aten.argmin)
def argmax_argmin(x, dim=None, keepdim=False):
    kind = "argmax" if V.graph.current_target().overloadpacket is aten.argmax else "argmin"
    if dim is None and keepdim:
        raise NotImplementedError("argmax(dim=None, keepdim=True)")
    return make_reduction(x, dim, keepdim, kind, dtype=torch.int64)


@register_lowering(aten.any)
def any_(x, dims=None, keepdim=False):
    return make_reduction(x, dims, keepdim, "any", dtype=torch.bool, src_dtype=torch.bool)


@register_lowering(aten.var, prims.var)
def var(x, dims=None, correction=None, keepdim=False, output_dtype=None, **kwargs):
    """Two passes: the mean, then the sum of squared deviations / (N - correction)."""
    if V.graph.current_target() is prims.var.default:
        keepdim = False
    if isinstance(correction, bool) or correction is None:  # var.dim's `unbiased` flag or default
        correction = 1 if correction in (None, True) else 0
    acc = torch.float32 if x.get_dtype() in (torch.float16, torch.bfloat16) else x.get_dtype()
    x32 = _cast(x, acc)
    count = 1
    for d in _dims(x, dims):
        count *= x.get_size()[d]
    mean_ = make_pointwise(lambda v, n: ops.truediv(v, n), (make_reduction(x32, dims, True, "sum"), float(count)), acc)
    deviation = make_pointwise(lambda v, m: ops.mul(ops.sub(v, m), ops.sub(v, m)), (x32, mean_), acc)
    total = make_reduction(deviation, dims, keepdim, "sum")
    return make_pointwise(lambda v, n: ops.truediv(v, n), (total, float(max(count - correction, 0))), acc, x.get_dtype())
