"""The decomposition table: which ATen ops AOTAutograd rewrites into simpler ones first.

Mirrors `torch/_inductor/decomposition.py`. Decomposing keeps the lowering table small:
softmax becomes sub, exp, sum and div (`prepare_softmax_online` on Triton, triton/softmax.py),
layer norm var_mean-style sums, GELU erf or tanh arithmetic: pieces we lower natively.
Our table = PyTorch's core-ATen decompositions + the composite ops in EXTRA (their pieces
fuse into few kernels where the ATen kernel is one opaque call) - NOT_DECOMPOSED (one of
them unsafe for any compiler: read its comment).

How it differs from Inductor's table, every difference with its reason:
  - core ATen decompositions Inductor drops and we keep: KEPT_THOUGH_INDUCTOR_EXCLUDES;
  - the ones we drop: NOT_DECOMPOSED (Inductor drops the SDPA one too);
  - ours only: EXTRA (Inductor has most of them in its own list), the foreach ops while
    ext/combo is on (EXTRA_DECOMPOSITIONS; Inductor lowers foreach ops to combo kernels
    instead), softmax through prepare_softmax_online (Triton);
  - Inductor's own rewrites (`mm`/`bmm`/`addmm` of tiny or vector shapes as pointwise
    arithmetic, `cat` of one tensor, quantized ops, `_to_copy`, `full`, ...): we lower those
    ops as they are or call ATen, so a reader meets them once, in lowering/.
tests/core/test_decompositions.py recomputes the differences against the installed torch.
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from ..passes import DECOMPOSITIONS

aten = torch.ops.aten

EXTRA = [
    aten.native_layer_norm,      # mean/var as sums, rsqrt, affine
    aten.native_dropout,         # a random mask (the mask is an extern rand call)
    aten.var_mean,               # two reductions
    aten.linalg_vector_norm,     # abs/pow, a sum, a root (clip_grad_norm_'s _foreach_norm)
    # batch norm, in every form AOTAutograd may meet it (training with its running-statistics
    # update, eval, and the backward): per-channel sums and pointwise arithmetic
    aten.native_batch_norm, aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training, aten._batch_norm_with_update,
    aten._batch_norm_with_update_functional, aten._batch_norm_no_update, aten.batch_norm_backward,
    aten.new_empty_strided,      # empty_strided (in backward graphs that build a gradient's storage)
]
# Pooling is not decomposed: lowering/pooling.py lowers max_pool2d_with_indices, avg_pool2d,
# _adaptive_avg_pool2d and their backwards directly (PyTorch's decompositions of max pooling
# gather every window into a tensor, and of its backward scatter_add: a gather is cheaper).

#: decompositions we refuse even though core ATen offers them, and why
NOT_DECOMPOSED = [
    aten.addmm,  # one BLAS call with the bias fused is faster than mm followed by an add
    # UNSAFE for a compiler (torch/_decomp/decompositions.py says Inductor must exclude it):
    # it rewrites the CPU flash kernel as math attention whose second output is the
    # attention probabilities, where `_scaled_dot_product_flash_attention_for_cpu_backward`
    # (never decomposed) expects the logsumexp. Every F.scaled_dot_product_attention on the
    # CPU then trained with wrong gradients. Forward and backward stay ATen calls instead.
    aten._scaled_dot_product_flash_attention_for_cpu,
]

#: Inductor removes these from core ATen's table (`decomps_to_exclude` in
#: torch/_inductor/decomposition.py); we keep them decomposed. None is there for correctness:
#: Inductor lowers them directly (or keeps them for a pass we do not have), and each
#: decomposition gives eager's values. tests/core/test_decompositions.py checks this list
#: against the installed torch, so a new exclusion upstream is read before it is inherited.
KEPT_THOUGH_INDUCTOR_EXCLUDES = {
    "_unsafe_index": "becomes aten.index, which we lower (Inductor skips its bounds checks instead)",
    "_unsafe_masked_index": "becomes where(mask, index(...), fill); both lowered",
    "_unsafe_masked_index_put_accumulate": "becomes index_put(accumulate=True): ext/scatter's kernels, or ATen",
    "_softmax_backward_data": "pointwise ops and one sum, which fuse (Inductor lowers it whole)",
    "clamp_max": "becomes clamp, one lowering for the three",
    "clamp_min": "becomes clamp, one lowering for the three",
    "embedding_dense_backward": "index_put with accumulate: ext/scatter (Inductor excludes it for XPU only)",
    "index_add": "index_put with accumulate (Inductor picks per call)",
    "glu": "split + sigmoid + mul, all lowered",
    "select_scatter": "we have no re-inplacing pass that needs it whole",
    "silu": "x * sigmoid(x); Inductor's exact-eager form differs in the last bit",
    "split": "views (Inductor lowers split directly to the same views)",
    "squeeze": "a view",
    "sum": "core's form is a sum with dtype; the same reduction",
    "unbind": "select views",
    "baddbmm": "bmm + pointwise (Inductor avoids the fp32 upcast of fp16 inputs for speed)",
    "addcmul": "mul + add: eager CUDA fuses them with FMA, so GPU results may differ in the last bit",
    "addcmul_": "as addcmul",
    "addcdiv": "div + add: as addcmul",
    "addcdiv_": "as addcdiv",
    "lerp": "sub + mul + add: as addcmul",
    "lerp_": "as lerp",
}

#: in inference only: GELU stays one op so that `addmm -> gelu` can become one BLAS call
#: (lowering/pointwise.py). In training it is decomposed, so that AOTAutograd's
#: partitioner sees its arithmetic and saves (or recomputes) the cheapest tensors.
INFERENCE_ONLY_NOT_DECOMPOSED = [aten.gelu]


#: [(extension, make() -> {op: decomposition})]: what extensions add to the table, each taken
#: while its extension is on (ext/combo: the foreach ops)
EXTRA_DECOMPOSITIONS: list = []


@functools.lru_cache(maxsize=None)
def decomposition_table(training: bool = True, backend: str = "triton", extensions: tuple | None = None) -> dict:
    """`extensions`: whose EXTRA_DECOMPOSITIONS to take (None: every one's; `Config.extensions`).
    `backend`'s own decompositions (`passes.DECOMPOSITIONS`) where it has some: the Triton
    backend's softmax and friends through `prepare_softmax_online` (triton/softmax.py). The
    C++ kernels keep PyTorch's decomposition (amax, then the sum of `exp(x - amax)`), whose
    `exp` the output reads again from memory: computing it twice costs a CPU more than
    storing it (softmax went from ahead of eager to behind it, one thread)."""
    table = dict(core_aten_decompositions())
    for extension, make in EXTRA_DECOMPOSITIONS:
        if extensions is None or extension in extensions:
            table.update(make())
    own = DECOMPOSITIONS.get(backend)
    table.update(own() if own is not None   # _softmax, _log_softmax, logsumexp
                 else get_decompositions([aten._softmax, aten._log_softmax]))
    table.update(get_decompositions(EXTRA + ([aten.gelu] if training else [])))
    for op in NOT_DECOMPOSED + ([] if training else INFERENCE_ONLY_NOT_DECOMPOSED):
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    return table
