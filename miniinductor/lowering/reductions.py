"""Lowerings of reductions: sum, prod, mean, var, amax/amin, argmax/argmin, any.

Mirrors `make_reduction` in `torch/_inductor/lowering.py`. A reduction over `dims` of
a tensor of shape `size` becomes `Reduction(ranges=<kept dims>,
reduction_ranges=<reduced dims>, inner_fn(index, rindex))`; it is realized at once into a
`ComputedBuffer` (its consumers then load it like any buffer). Softmax, layer norm, var,
logsumexp and friends arrive here already decomposed into these by `capture/`.

A variance (`var`: also var_mean, std, layer and batch norm) is one Welford reduction
(`welford_reduce`, two outputs: the mean and m2, the sum of squared deviations) where the
backend policy says so (`BackendPolicy.welford`: C++ kernels), reading each row once (a mean
of the same rows stays a sum, computed in the same loop); else two passes, a sum for the mean
and a sum of squared deviations (Triton: a persistent row is in registers for both). Split
reductions (Triton kernels only) are a pass of the Triton backend: triton/passes.py.
"""
from __future__ import annotations

import math

import torch

from ..ir.nodes import Pointwise, Reduction, StorageBox
from ..ir.sizevars import SymbolicUnsupported, is_static
from ..virtualized import V, ops
from .pointwise import make_pointwise
from .registry import aten, prims, register_lowering
from .views import reshape


def _dims(x, dims) -> list[int]:
    rank = len(x.get_size())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(rank, 1) for d in dims}) if rank else []


def make_reduction(x, dims, keepdim, reduction_type, dtype=None, src_dtype=None, output_index=None):
    """Reduce `x` over `dims` with `reduction_type` (see ops_handler.REDUCTION_TYPES; a
    multi-output one gives output `output_index` of its values).

    The same reduction of the same value is computed once per graph: layer norm's
    decomposition sums x for its mean and again inside a two-pass `var`; the second gets the
    first's buffer, reshaped where keepdim differs, and the kernel one pass less over each row."""
    size = x.get_size()
    dims = _dims(x, dims)
    kept = [d for d in range(len(size)) if d not in dims]
    ranges = [1 if d in dims else size[d] for d in range(len(size))] if keepdim else [size[d] for d in kept]
    reduction_ranges = [size[d] for d in dims]
    src_dtype = src_dtype or x.get_dtype()
    dtype = dtype or src_dtype
    key = (id(x), tuple(dims), reduction_type, dtype, src_dtype, output_index)
    if (seen := V.graph.reductions.get(key)) and seen[0] is x:   # the same x: its id is not reused
        return reshape(seen[1], ranges)
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

    node = Reduction(x.get_device(), dtype, inner_fn, ranges, reduction_ranges, reduction_type, src_dtype,
                     output_index=output_index)
    box = StorageBox(node)
    box.realize()
    V.graph.reductions[key] = (x, box)
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
    return make_pointwise(lambda v, n: ops.truediv(v, n), (total, _count(count)), acc, out)


@register_lowering(aten.amax, aten.amin)
def amax_amin(x, dims=(), keepdim=False):
    kind = "max" if V.graph.current_target().overloadpacket is aten.amax else "min"
    return make_reduction(x, dims, keepdim, kind)


@register_lowering(aten.max.default, aten.min.default)
def max_min_all(x):
    """`x.max()`: amax over every dim (max.dim, with indices, stays a fallback)."""
    kind = "max" if V.graph.current_target() is aten.max.default else "min"
    return make_reduction(x, (), False, kind)


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
    """m2 / (N - correction), where m2 is the sum of squared deviations from the mean: one
    Welford reduction where the backend policy says so (`_welford`: C++), else two passes (the
    mean, then the sum of squared deviations; the mean's sum shared with a `mean` of the same x)."""
    if V.graph.current_target() is prims.var.default:
        keepdim = False
    if isinstance(correction, bool) or correction is None:  # var.dim's `unbiased` flag or default
        correction = 1 if correction in (None, True) else 0
    acc = torch.float32 if x.get_dtype() in (torch.float16, torch.bfloat16) else x.get_dtype()
    x32 = _cast(x, acc)
    dims, size = _dims(x, dims), x.get_size()
    count = math.prod(size[d] for d in dims)
    xnumel = math.prod(n for d, n in enumerate(size) if d not in dims)
    if dims and _static(count) != 0 and V.graph.policy.welford(_static(xnumel), _static(size[dims[-1]])):
        total = _welford(x32, dims, keepdim)
    else:
        mean_ = make_pointwise(lambda v, n: ops.truediv(v, n), (make_reduction(x32, dims, True, "sum"), _count(count)), acc)
        deviation = make_pointwise(lambda v, m: ops.mul(ops.sub(v, m), ops.sub(v, m)), (x32, mean_), acc)
        total = make_reduction(deviation, dims, keepdim, "sum")
    if is_static(count):
        count = max(count - correction, 0)
    elif V.graph.sizevars.statically_known_leq(correction, count):
        count = count - correction
    else:
        raise SymbolicUnsupported(f"var of {count} elements with correction {correction}: may be negative")
    return make_pointwise(lambda v, n: ops.truediv(v, n), (total, _count(count)), acc, x.get_dtype())


def _welford(x, dims, keepdim):
    """m2 of `x` over `dims` from one "welford_reduce" (Inductor's WelfordReduction): per
    element, with n the count so far,

        delta = v - mean;  mean += delta / n;  m2 += delta * (v - mean)

    over v = x - x[first], each value minus its row's first element (x at index 0 along the
    reduced dims): Welford in float32 on rows of 1e4 + randn keeps a mean whose rounding
    (ulp 1e-3) enters m2 at every step, a relative error of ~2e-4 (simulated); shifted, the
    mean is O(std) and the kernel's error 1.9e-7 (eager's var, accumulating in float64:
    5e-8; docs/benchmarks.md). A far-off first element costs nothing: Welford does not
    cancel, shifted or not. The Welford mean itself (output 0) is not used: a `mean` or `sum`
    of the same x (layer norm's, var_mean's) stays a sum, computed in the same loop; derived
    from the Welford mean (N * (mean + x[first])) a row sum of 1000 randn was 20x less
    accurate than eager's."""
    size, load = x.get_size(), x.make_loader()

    def shifted(index):
        return ops.sub(load(index), load([0 if d in dims else i for d, i in enumerate(index)]))
    m2 = make_reduction(StorageBox(Pointwise(x.get_device(), x.get_dtype(), shifted, size)), dims, keepdim,
                        "welford_reduce", output_index=1)
    # the sum a mean of x will ask for (make_reduction computes it once), made here so that it
    # comes before the variance's consumers: a kernel then computes it in the Welford's loop
    # (var_mean over columns: one tiled loop, not two loops); dead code where nothing reads it
    make_reduction(x, dims, True, "sum")
    return m2


def _static(n):
    """A size as an int, or None where it is symbolic."""
    return int(n) if is_static(n) else None


def _count(n):
    """A number of elements to divide by: a float, or (symbolic) the size expression."""
    return float(n) if is_static(n) else n
