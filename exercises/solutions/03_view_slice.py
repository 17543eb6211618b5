"""Reference solution of exercise 03 (a slice's reindex function)."""
from miniinductor.ir.nodes import View

TARGET = "miniinductor.lowering.views._slice_view"


def _slice_view(x, dim, start, end, step):
    size = x.get_size()
    dim = dim % len(size)
    start, end, step = slice(start, end, step).indices(size[dim])
    new = list(size)
    new[dim] = len(range(start, end, step))

    def reindex(index):
        index = list(index)
        index[dim] = start + index[dim] * step
        return index
    return View(x, new, reindex)
