"""The foreach ops, decomposed into one op per list element (the combo extension's entry in
capture/decompositions.py's EXTRA_DECOMPOSITIONS).

Mirrors nothing one to one: Inductor lowers foreach ops itself, to horizontally fused
"combo kernels" (`torch/_inductor/lowering.py`, the `_foreach_*` lowerings). Here
`_foreach_mul(xs, ys)` becomes one `mul` per list element, which decomposes further and
fuses like any pointwise op; the combine_kernels pass (schedule.py) then puts the
resulting independent kernels into a few combo kernels. With the extension off, foreach
ops stay ATen calls (correct, one call per op over the whole list).

Simplified: only the foreach ops optimizers and `clip_grad_norm_` call (FOREACH).
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

#: foreach ops (optimizers' `foreach=True`, `clip_grad_norm_`): name → per-element op;
#: every overload is decomposed but the ones listed in FOREACH_KEPT.
FOREACH = {
    "add": aten.add, "sub": aten.sub, "mul": aten.mul, "div": aten.div, "pow": aten.pow,
    "addcmul": lambda x, a, b, value=1: aten.addcmul(x, a, b, value=value),
    "addcdiv": lambda x, a, b, value=1: aten.addcdiv(x, a, b, value=value),
    "lerp": aten.lerp, "sqrt": aten.sqrt, "reciprocal": aten.reciprocal, "neg": aten.neg,
    "abs": aten.abs, "exp": aten.exp, "sign": aten.sign, "maximum": aten.maximum,
    "clamp_min": aten.clamp_min, "clamp_max": aten.clamp_max,
    "norm": lambda x, ord=2, dtype=None: aten.linalg_vector_norm(x, ord, dtype=dtype),
}
FOREACH_KEPT = {
    "addcmul.Tensor", "addcdiv.Tensor",          # their `scalars` is one tensor of n values
    "maximum.Scalar", "maximum.ScalarList",      # aten.maximum takes no scalar
}


def _foreach_decomposition(per_element):
    def decompose(*args, **kwargs):
        n = len(next(a for a in args if isinstance(a, (list, tuple))))
        return [per_element(*[a[i] if isinstance(a, (list, tuple)) else a for a in args], **kwargs)
                for i in range(n)]
    return decompose


def foreach_decompositions() -> dict:
    table = {}
    for name, per_element in FOREACH.items():
        packet = getattr(aten, f"_foreach_{name}")
        for overload in packet.overloads():
            if f"{name}.{overload}" not in FOREACH_KEPT and not overload.endswith("out"):
                table[getattr(packet, overload)] = _foreach_decomposition(per_element)
    return table
