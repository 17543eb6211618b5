"""The decomposition table: which ATen ops AOTAutograd rewrites into simpler ones first.

Mirrors `torch/_inductor/decomposition.py`. Decomposing keeps the lowering table small:
softmax becomes amax/sub/exp/sum/div, layer norm becomes var_mean-style sums, GELU
becomes erf or tanh arithmetic, and so on, and every piece is something we lower natively.

Our table = PyTorch's core-ATen decompositions (the ops that define the "core ATen" opset)
+ the composite ops below, each decomposed because its pieces are all pointwise ops and
reductions that fuse into few kernels, where the ATen kernel would be one opaque call:
"""
from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

EXTRA = [
    aten._softmax,               # amax, sub, exp, sum, div
    aten._log_softmax,           # amax, sub, exp, sum, log, sub
    aten.native_layer_norm,      # mean/var as sums, rsqrt, affine
    aten.native_dropout,         # a random mask (the mask is an extern rand call)
    aten.var_mean,               # two reductions
    aten._native_batch_norm_legit_functional,  # training BatchNorm: batch mean/var, running stats
]

#: decompositions we refuse even though core ATen offers them, and why
NOT_DECOMPOSED = [
    aten.addmm,  # one BLAS call with the bias fused is faster than mm followed by an add
]

#: in inference only: GELU stays one op so that `addmm -> gelu` can become one BLAS call
#: (lowering/pointwise.py). In training it is decomposed, so that AOTAutograd's
#: partitioner sees its arithmetic and saves (or recomputes) the cheapest tensors.
INFERENCE_ONLY_NOT_DECOMPOSED = [aten.gelu]


@functools.lru_cache(maxsize=None)
def decomposition_table(training: bool = True) -> dict:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA + ([aten.gelu] if training else [])))
    for op in NOT_DECOMPOSED + ([] if training else INFERENCE_ONLY_NOT_DECOMPOSED):
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    return table
