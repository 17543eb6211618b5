"""Softmax, log_softmax and logsumexp decomposed around one op: `prepare_softmax_online`.

Mirrors `prims.prepare_softmax_online` and the `_softmax` / `_log_softmax` decompositions
of `torch/_inductor/decomposition.py` (Inductor's op is an `inductor_prims` prim; ours is a
`torch.library` custom op, `torch.ops.miniinductor.prepare_softmax_online`).

Every one of them needs the same two numbers per row of `x` along `dim`: the max `m`, and the
sum of `exp(x - m)`. PyTorch's own decompositions compute them as two reductions, `amax`
and then `sum(exp(x - amax))`, which a row too long for one block must read twice. Here the
pair is one op, so lowering (lowering/softmax.py) can choose: the two reductions where a
row fits one block, or one *online* reduction that reads the row once.

    m, s = prepare_softmax_online(x, dim)       # keepdim: [..., 1, ...] each
    softmax     = exp(x - m) / s
    log_softmax = (x - m) - log(s)
    logsumexp   = m + log(s)                     # m itself where m is +-inf, as eager

An all -inf row has m = -inf and s = 0 (`exp(x - m)` is taken with m replaced by 0 there, as
torch's logsumexp masks its max; two plain reductions would give NaN for s). Softmax and
log_softmax of such a row are NaN either way, as in eager; logsumexp is -inf.
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

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
