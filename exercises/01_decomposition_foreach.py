"""Decomposition: turn a `_foreach_*` op (one call over a list of tensors) into per-tensor ops.

Phase: capture. Mirrors `torch/_inductor/decomposition.py` (a table of Python functions
that AOTAutograd runs instead of an ATen op, recording the simpler ops they call).

Optimizers with `foreach=True` and `clip_grad_norm_` call ops such as
`torch._foreach_mul(xs, ys)` or `torch._foreach_add(xs, 2.0)`: one ATen call that handles a
whole list of tensors. miniinductor has no lowering for them. Instead the combo extension
adds to its decomposition table (`miniinductor/ext/combo/decompositions.py`,
`foreach_decompositions`) every overload of `_foreach_<name>`, as `_foreach_decomposition(per_element)`, where
`per_element` is the ATen op for one tensor (`aten.mul`, `aten.add`, ...). The result
is a list of ordinary `mul`/`add` calls, which then lower and fuse like any pointwise op.
(Real Inductor lowers foreach ops itself, to horizontally fused "combo kernels".)

Your job: `_foreach_decomposition(per_element)` returns a function `decompose(*args, **kwargs)`
with the foreach op's signature. Some positional arguments are lists (all of the same
length n), the others are plain values (a scalar, an `alpha`) used for every element.
It returns a list of n results: result i = per_element(args with each list replaced by its
i-th item, **kwargs).

Worked example: `_foreach_add([a, b], [c, d], alpha=2)` →
    decompose([a, b], [c, d], alpha=2) == [aten.add(a, c, alpha=2), aten.add(b, d, alpha=2)]
and `_foreach_mul([a, b], 3.0)` → `[aten.mul(a, 3.0), aten.mul(b, 3.0)]`.

Hints: find n from the first argument that is a list or tuple; build each call's arguments
with a list comprehension; keyword arguments are passed through unchanged.
Run: python -m miniinductor exercise run 1
"""
TARGET = "miniinductor.ext.combo.decompositions._foreach_decomposition"


def _foreach_decomposition(per_element):
    def decompose(*args, **kwargs):
        raise NotImplementedError("write decompose: one per_element call per list item")
    return decompose
