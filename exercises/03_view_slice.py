"""View: the index remapping (reindex function) of `x[..., start:end:step]`.

Phase: lowering (views). Mirrors the `slice_` lowering and `SliceView` in
`torch/_inductor/lowering.py` and `torch/_inductor/ir.py`.

A view copies nothing. It is `View(x, new_size, reindex)`: element `index` of the view is
element `reindex(index)` of `x`. `index` is a list of SymPy expressions (one per dim of the
view), and `reindex` returns one per dim of `x`. Whoever loads from the view calls
reindex, so the final kernel's index is all the views' reindex functions composed and
simplified: `x[:, 2::3]` becomes a load of `x[8*i0 + 3*i1 + 2]` for an [n, 8] input.

Your job: `_slice_view(x, dim, start, end, step)` (called by the `aten.slice` lowering).
  1. normalise the bounds like Python does: `slice(start, end, step).indices(size[dim])`
     (negative or huge values: `x[-3:]` reaches the graph as start=-3, end=2**63-1);
  2. the new size: the same as x's except `new[dim] = len(range(start, end, step))`;
  3. `reindex(index)`: the same index except along `dim`, where element i of the slice is
     element `start + i * step` of x.
Worked example: x [4, 10], `x[:, 2:9:3]` → dim=1, start=2, end=9, step=3; new size [4, 3];
reindex([i0, i1]) = [i0, 2 + 3*i1]  (view column 2 reads x column 8).

The stub below is the naive version: right size, but it reads the slice's elements from
the start of x as if start=0 and step=1.
Hints: copy `index` into a new list before changing it; `dim` may be negative (`dim % rank`).
Run: python -m miniinductor exercise run 3
"""
from miniinductor.ir.nodes import View

TARGET = "miniinductor.lowering.views._slice_view"


def _slice_view(x, dim, start, end, step):
    size = x.get_size()
    dim = dim % len(size)
    start, end, step = slice(start, end, step).indices(size[dim])
    new = list(size)
    new[dim] = len(range(start, end, step))

    def reindex(index):
        return list(index)   # TODO: element i of the slice is element start + i * step of x
    return View(x, new, reindex)
