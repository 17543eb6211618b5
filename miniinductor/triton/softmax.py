"""Online softmax (Triton): softmax, log_softmax and logsumexp decomposed around one op,
`prepare_softmax_online`, and its lowering.

Mirrors `prims.prepare_softmax_online`, the `_softmax` / `_log_softmax` decompositions of
`torch/_inductor/decomposition.py` and the op's lowering in `torch/_inductor/lowering.py`
(Inductor's op is an `inductor_prims` prim; ours is a `torch.library` custom op,
`torch.ops.miniinductor.prepare_softmax_online`).

Every one of them needs the same two numbers per row of `x` along `dim`: the max `m`, and the
sum of `exp(x - m)`. PyTorch's own decompositions compute them as two reductions, `amax`
and then `sum(exp(x - amax))`, which a row too long for one block must read twice. Here the
pair is one op, so its lowering (`lower_prepare_softmax_online`) can choose: the two
reductions where a row fits one block, or one *online* reduction that reads the row once.

    m, s = prepare_softmax_online(x, dim)       # keepdim: [..., 1, ...] each
    softmax     = exp(x - m) / s
    log_softmax = (x - m) - log(s)
    logsumexp   = m + log(s)                     # m itself where m is +-inf, as eager

An all -inf row has m = -inf and s = 0 (`exp(x - m)` is taken with m replaced by 0 there, as
torch's logsumexp masks its max; two plain reductions would give NaN for s). Softmax and
log_softmax of such a row are NaN either way, as in eager; logsumexp is -inf.

Where a row fits one block (Triton's persistent reductions: the whole row is in registers
already), it becomes the two reductions PyTorch's decomposition would give:

    buf0 = reduction('max', x)
    buf1 = reduction('sum', exp(x - (buf0 == -inf ? 0 : buf0)))

Where the row is longer (`online_softmax`), it becomes one *online* reduction
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

The Triton backend registers all three: the decompositions for its graphs
(`passes.DECOMPOSITIONS`, read by capture/decompositions.py), the op on the partitioner's
lists (`passes.PARTITIONER_OPS`) and the lowering (lowering/registry.py). The C++ kernels
keep PyTorch's two-reduction softmax (they compute an online pair too where a test's policy
asks: codegen/cpp.py).
"""
from __future__ import annotations

import functools
import math

import torch
from torch._decomp import core_aten_decompositions
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ..ir.sizevars import is_static
from ..lowering.pointwise import make_pointwise
from ..lowering.reductions import _dims, make_reduction
from ..lowering.registry import register_lowering
from ..passes import DECOMPOSITIONS, PARTITIONER_OPS
from ..virtualized import V, ops
from .policy import reduction_splits

aten = torch.ops.aten


def online_softmax_sum_shift(m):
    """What `exp(x - .)` subtracts: the max, or 0 where it is -inf (no exp(-inf - -inf) NaN)."""
    return torch.where(m == float("-inf"), 0.0, m)


@torch.library.custom_op("miniinductor::prepare_softmax_online", mutates_args=())
def prepare_softmax_online(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(max of x along dim, sum of exp(x - max) along dim), both keepdim; the eager version,
    run where the op falls back to ATen (and by the accuracy debugger)."""
    m = torch.amax(x, dim, keepdim=True)
    return m, torch.sum(torch.exp(x - online_softmax_sum_shift(m)), dim, keepdim=True)


@prepare_softmax_online.register_fake
def _(x, dim):
    m = torch.amax(x, dim, keepdim=True)
    return m, torch.empty_like(m)


def _online_pair(x, dim):
    return torch.ops.miniinductor.prepare_softmax_online(x, dim)


def _computation_dtypes(x):
    return elementwise_dtypes(x, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)


def _softmax(x, dim: int, half_to_float: bool):
    if x.ndim == 0 or x.numel() == 0:
        return NotImplemented
    computation, result = _computation_dtypes(x)
    x = x.contiguous().to(computation)   # eager's softmax returns a contiguous tensor
    m, s = _online_pair(x, dim)
    out = torch.exp(x - m) / s
    return out if half_to_float else out.to(result)


def _log_softmax(x, dim: int, half_to_float: bool):
    if x.ndim == 0 or x.numel() == 0:
        return NotImplemented
    computation, result = _computation_dtypes(x)
    x = x.contiguous().to(computation)
    m, s = _online_pair(x, dim)
    out = (x - m) - torch.log(s)
    return out if half_to_float else out.to(result)


def _logsumexp(x, dim, keepdim: bool = False):
    dims = [dim] if isinstance(dim, int) else list(dim)
    if len(dims) != 1 or x.ndim == 0 or x.numel() == 0 or not x.dtype.is_floating_point:
        return NotImplemented
    computation, _ = _computation_dtypes(x)
    m, s = _online_pair(x.to(computation), dims[0])
    out = torch.where(torch.isinf(m), m, m + torch.log(s)).to(x.dtype)
    return out if keepdim else out.squeeze(dims[0])


def _or_core(ours, op):
    """`ours`, or PyTorch's core decomposition of `op` where ours returns NotImplemented
    (0-d and empty tensors, logsumexp over several dims or of integers)."""
    core = core_aten_decompositions().get(op) or torch._decomp.decomposition_table[op]

    @functools.wraps(ours)
    def decompose(*args, **kwargs):
        out = ours(*args, **kwargs)
        return core(*args, **kwargs) if out is NotImplemented else out
    return decompose


def softmax_decompositions() -> dict:
    """op overload → decomposition through prepare_softmax_online."""
    return {aten._softmax.default: _or_core(_softmax, aten._softmax.default),
            aten._log_softmax.default: _or_core(_log_softmax, aten._log_softmax.default),
            aten.logsumexp.default: _or_core(_logsumexp, aten.logsumexp.default)}

def online_softmax(policy, xnumel, rnumel) -> bool:
    """Compute softmax's row max and sum of exp as one online reduction?
    Triton: where the row is looped (longer than a persistent block: two reductions would
    read it twice) and not split (`reduction_splits`: the online pair is not split in two).
    `rnumel` None: a symbolic row with no upper bound (looped, never split)."""
    if policy.online_softmax_min is None or (rnumel is not None and rnumel < policy.online_softmax_min):
        return False
    static = isinstance(xnumel, int) and rnumel is not None
    return not (policy.split_reductions and static and reduction_splits(xnumel, rnumel, False) > 1)


def _row_length_bound(rnumel):
    """The row length, or a symbolic one's upper bound (None: unbounded)."""
    return int(rnumel) if is_static(rnumel) else V.graph.sizevars.upper_bound(rnumel)


@register_lowering(prepare_softmax_online._opoverload)
def lower_prepare_softmax_online(x, dim):
    size = x.get_size()
    (dim,) = _dims(x, dim)
    innermost = all(n == 1 for n in size[dim + 1:])
    xnumel = math.prod(n for k, n in enumerate(size) if k != dim)
    if innermost and online_softmax(V.graph.policy, int(xnumel) if is_static(xnumel) else None,
                                      _row_length_bound(size[dim])):
        return tuple(make_reduction(x, [dim], True, "online_softmax_reduce", output_index=k) for k in (0, 1))
    dtype = x.get_dtype()
    row_max = make_reduction(x, [dim], True, "max")

    def exp_shifted(v, m):
        shift = ops.where(ops.eq(m, ops.constant(float("-inf"), dtype)), ops.constant(0.0, dtype), m)
        return ops.exp(ops.sub(v, shift))
    return row_max, make_reduction(make_pointwise(exp_shifted, (x, row_max), dtype), [dim], True, "sum")


DECOMPOSITIONS["triton"] = softmax_decompositions
PARTITIONER_OPS.append(torch.ops.miniinductor.prepare_softmax_online)
