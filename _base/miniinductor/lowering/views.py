"""Lowerings that move data around without arithmetic: views, cat, pad, gather/index.

Mirrors the view lowerings in `torch/_inductor/lowering.py` and `View`/`ReinterpretView`
in `torch/_inductor/ir.py`. A view is a `View(data, size, reindex)`: element `index` of the
result is element `reindex(index)` of the input. No copy happens; the SymPy index printed
in the final kernel is the composition of all the reindex functions, simplified against
the loop ranges (`ir/indexing.py`).

Indirect indexing (gather, index, embedding): the index *value* is loaded, turned into a
symbol with `ops.indirect_indexing(value, size)` (which also wraps negatives) and used
inside the next load's SymPy index.
"""
from __future__ import annotations

import sympy
import torch

from ..ir.indexing import FloorDiv, ModularIndexing
from ..ir.nodes import Layout, Pointwise, ReinterpretView, StorageBox, View, strided_view_of
from ..ir.sizevars import SymbolicUnsupported, is_static
from ..virtualized import V, ops
from .pointwise import broadcast_shapes, expand_to, is_ir, make_pointwise
from .registry import aten, prims, register_lowering


def _out_size():
    return V.graph.current_size()


def reshape(x, new_size):
    """Row-major reshape: new index → flat offset → digits of the old shape."""
    old = x.get_size()
    if list(old) == list(new_size):
        return x
    if 0 in old or 0 in new_size:  # nothing is ever loaded from an empty tensor
        return View(x, new_size, lambda index: [sympy.Integer(0)] * len(old))
    new_strides = [1] * len(new_size)
    for k in range(len(new_size) - 2, -1, -1):
        new_strides[k] = new_strides[k + 1] * new_size[k + 1]

    def reindex(index):
        flat = sum((i * s for i, s, n in zip(index, new_strides, new_size) if n != 1), sympy.Integer(0))
        out, div = [], 1
        for n in reversed(old):
            out.append(sympy.Integer(0) if n == 1 else ModularIndexing(flat, div, n))
            div *= n
        if old and old[0] != 1:
            out[-1] = FloorDiv(flat, div // old[0])  # outermost digit needs no modulus
        return list(reversed(out))
    return View(x, new_size, reindex)


@register_lowering(aten.view, aten.reshape, aten._unsafe_view, aten.squeeze, aten.unsqueeze,
                   prims.reshape, aten.flatten, aten.view_copy, aten.expand_copy)
def view(x, *args, **kwargs):
    if V.graph.current_target() is aten.view.dtype:
        raise NotImplementedError("view as another dtype")
    return reshape(x, _out_size())


@register_lowering(aten.permute, prims.transpose)
def permute(x, dims):
    dims = [d % len(x.get_size()) for d in dims]
    size = [x.get_size()[d] for d in dims]
    inverse = [dims.index(k) for k in range(len(dims))]
    return View(x, size, lambda index: [index[inverse[k]] for k in range(len(dims))])


@register_lowering(aten.expand, prims.broadcast_in_dim)
def expand(x, *args, **kwargs):
    size = _out_size()
    if V.graph.current_target() is prims.broadcast_in_dim.default:
        shape, bdims = args
        kept = [x.get_size()[k] for k in range(len(bdims))]
        full = [1] * len(shape)
        for k, d in enumerate(bdims):
            full[d] = kept[k]
        x = reshape(x, full)
    return expand_to(x, size)


@register_lowering(aten.slice)
def slice_(x, dim=0, start=None, end=None, step=1):
    return _slice_view(x, dim, start, end, step)


def _slice_view(x, dim, start, end, step, length=None):
    size = x.get_size()
    dim = dim % len(size)
    new = list(size)
    if all(map(is_static, (size[dim], start or 0, end or 0, step))):
        start, end, step = slice(start, end, step).indices(size[dim])
        new[dim] = len(range(start, end, step))
    else:   # symbolic: the length is the meta's (Dynamo's, guarded); the start must be >= 0
        start = 0 if start is None else start + size[dim] if is_static(start) and start < 0 else start
        if not V.graph.sizevars.statically_known_leq(0, start):
            raise SymbolicUnsupported(f"slice from {start}, which may be negative")
        new[dim] = V.graph.current_size()[dim] if length is None else length

    def reindex(index):
        index = list(index)
        index[dim] = start + index[dim] * step
        return index
    return View(x, new, reindex)


@register_lowering(aten.select)
def select(x, dim, idx):
    size = x.get_size()
    dim = dim % len(size)
    idx = idx % size[dim]
    return View(x, size[:dim] + size[dim + 1:], lambda index: list(index[:dim]) + [idx] + list(index[dim:]))


@register_lowering(aten.as_strided)
def as_strided(x, size, stride, storage_offset=None):
    """A strided view of `x`'s buffer, as in eager (overlapping strides included: a copy
    would give the output other strides and storage than eager's). `storage_offset` counts
    from the start of the storage; a Layout's offset from its buffer's first element, which
    for a graph input is its storage_offset() -- known only at run time (Dynamo does not
    guard it), so there ATen's as_strided runs in the wrapper."""
    found = strided_view_of(x)
    if storage_offset is not None and found and found[0].get_name() in V.graph.graph_inputs:
        return V.graph.fallback(aten.as_strided.default, [x, size, stride, storage_offset], {},
                                "storage_offset of a graph input: read at run time")
    if found is None:
        x.realize()
        found = strided_view_of(x)
    if found is None:  # a view we cannot express by strides: copy it out first
        copy = StorageBox(Pointwise(x.get_device(), x.get_dtype(), x.make_loader(), x.get_size()))
        buf = copy.realize()
        base_offset = 0
    else:
        buf, base_offset = found[0], found[1].offset
    offset = base_offset if storage_offset is None else storage_offset
    return ReinterpretView(buf, Layout(buf.get_device(), buf.get_dtype(), list(size), list(stride), offset))


@register_lowering(aten.cat, prims.cat)
def cat(tensors, dim=0):
    """Each output element loads from the input whose range along `dim` holds it. Legacy
    empty 1-d inputs (`torch.cat([x, torch.empty(0)])`) only take part in type promotion."""
    size, dtype = _out_size(), V.graph.current_meta().dtype
    dim = dim % len(size)
    tensors = [t for t in tensors if not (len(t.get_size()) == 1 and t.get_size()[0] == 0)] or tensors[:1]
    if len(tensors) == 1:  # still a new tensor, never the input itself (nor a view of it)
        return make_pointwise(lambda v: v, tensors, dtype, size=size)
    starts = [0]
    for t in tensors:
        starts.append(starts[-1] + t.get_size()[dim])
    loaders = [t.make_loader() for t in tensors]

    def load_part(k, index):
        index = list(index)
        index[dim] = index[dim] - starts[k]
        value = loaders[k](index)
        return value if tensors[k].get_dtype() == dtype else ops.to_dtype(value, dtype)

    def inner_fn(index):
        pos = ops.index_expr(index[dim], torch.int64)
        value = ops.masked(ops.ge(pos, _int(starts[-2])),
                           lambda: load_part(len(tensors) - 1, index), 0)
        for k in range(len(tensors) - 2, -1, -1):
            # both bounds: a load that runs only where its own part is, so its index (which
            # may divide `pos - start`) never sees a negative base (the last part's bound is
            # the end of the output; the first's, zero)
            inside = ops.lt(pos, _int(starts[k + 1]))
            if k > 0:
                inside = ops.logical_and(ops.ge(pos, _int(starts[k])), inside)
            value = ops.where(inside, ops.masked(inside, lambda k=k: load_part(k, index), 0), value)
        return value
    return StorageBox(Pointwise(tensors[0].get_device(), dtype, inner_fn, size))


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(x, pad, value=0.0):
    size = x.get_size()
    out = _out_size()
    pads = [(0, 0)] * (len(size) - len(pad) // 2) + [(pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)][::-1]
    load = x.make_loader()
    dtype = x.get_dtype()

    def inner_fn(index):
        shifted = [i - lo for i, (lo, _) in zip(index, pads)]
        mask = None
        for d, (lo, hi) in enumerate(pads):
            if lo == 0 and hi <= 0:
                continue
            pos = ops.index_expr(shifted[d], torch.int64)
            inside = ops.logical_and(ops.ge(pos, ops.constant(0, torch.int64)),
                                     ops.lt(pos, _int(size[d])))
            mask = inside if mask is None else ops.logical_and(mask, inside)
        if mask is None:
            return load(shifted)
        return ops.masked(mask, lambda: load(shifted), value)
    return StorageBox(Pointwise(x.get_device(), dtype, inner_fn, out))


def _int(n):
    """An int64 value in a loop body: a constant, or a size symbol's value (`s0`)."""
    return ops.constant(n, torch.int64) if is_static(n) else ops.index_expr(n, torch.int64)


def _indirect(index_node, size, index):
    """Load an index tensor at `index` and return it as a SymPy symbol in [0, size)."""
    return ops.indirect_indexing(index_node.make_loader()(index), size)


@register_lowering(aten.gather)
def gather(x, dim, index, sparse_grad=False):
    size = x.get_size()
    dim = dim % max(len(size), 1)
    out = index.get_size()
    load = x.make_loader()

    def inner_fn(idx):
        idx = list(idx)
        if not size:
            return load([])
        idx[dim] = _indirect(index, size[dim], idx)
        return load(idx)
    return StorageBox(Pointwise(x.get_device(), x.get_dtype(), inner_fn, out))


@register_lowering(aten.index_select)
def index_select(x, dim, index):
    size = x.get_size()
    if not size:
        raise NotImplementedError("index_select on a 0-d tensor")
    dim = dim % max(len(size), 1)
    load = x.make_loader()

    def inner_fn(idx):
        idx = list(idx)
        idx[dim] = _indirect(index, size[dim], [idx[dim]] if index.get_size() else [])
        return load(idx)
    return StorageBox(Pointwise(x.get_device(), x.get_dtype(), inner_fn, _out_size()))


@register_lowering(aten.embedding)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    load = weight.make_loader()
    nidx = len(indices.get_size())

    def inner_fn(idx):
        return load([_indirect(indices, weight.get_size()[0], list(idx[:nidx])), idx[nidx]])
    return StorageBox(Pointwise(weight.get_device(), weight.get_dtype(), inner_fn, _out_size()))


@register_lowering(aten.index, aten._unsafe_index)
def index(x, indices):
    size = x.get_size()
    indices = list(indices) + [None] * (len(size) - len(indices))
    if any(t is not None and t.get_dtype() in (torch.bool, torch.uint8) for t in indices):
        raise NotImplementedError("boolean mask index (data-dependent shape)")
    positions = [k for k, t in enumerate(indices) if t is not None]
    bshape = broadcast_shapes(*[indices[k].get_size() for k in positions])
    loaders = {k: expand_to(indices[k], bshape) for k in positions}
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    rest = [k for k in range(len(size)) if k not in positions]
    load = x.make_loader()
    nb = len(bshape)

    def inner_fn(idx):
        idx = list(idx)
        if adjacent:
            b = idx[positions[0]:positions[0] + nb]
            plain = idx[:positions[0]] + idx[positions[0] + nb:]
        else:
            b, plain = idx[:nb], idx[nb:]
        full = [None] * len(size)
        for k, i in zip(rest, plain):
            full[k] = i
        for k in positions:
            full[k] = _indirect(loaders[k], size[k], b)
        return load(full)
    return StorageBox(Pointwise(x.get_device(), x.get_dtype(), inner_fn, _out_size()))


@register_lowering(aten.slice_scatter)
def slice_scatter(base, src, dim=0, start=None, end=None, step=1):
    size = base.get_size()
    dim = dim % len(size)
    start, end, step = slice(start, end, step).indices(size[dim])
    load_base, load_src = base.make_loader(), src.make_loader()
    dtype = base.get_dtype()

    def inner_fn(index):
        pos = ops.index_expr(index[dim], torch.int64)
        inside = ops.logical_and(ops.ge(pos, ops.constant(start, torch.int64)),
                                 ops.lt(pos, ops.constant(end, torch.int64)))
        if step != 1:
            rem = ops.index_expr(ModularIndexing(index[dim] + (step - start % step), 1, step), torch.int64)
            inside = ops.logical_and(inside, ops.eq(rem, ops.constant(0, torch.int64)))
        src_index = list(index)
        src_index[dim] = FloorDiv(index[dim] - start, step) if step != 1 else index[dim] - start
        return ops.where(inside, ops.masked(inside, lambda: load_src(src_index), 0), load_base(index))
    return StorageBox(Pointwise(base.get_device(), dtype, inner_fn, list(size)))


@register_lowering(aten.select_scatter)
def select_scatter(base, src, dim, idx):
    size = base.get_size()
    dim = dim % len(size)
    idx = idx % size[dim]
    load_base, load_src = base.make_loader(), src.make_loader()

    def inner_fn(index):
        hit = ops.eq(ops.index_expr(index[dim], torch.int64), ops.constant(idx, torch.int64))
        return ops.where(hit, load_src(list(index[:dim]) + list(index[dim + 1:])), load_base(index))
    return StorageBox(Pointwise(base.get_device(), base.get_dtype(), inner_fn, list(size)))



@register_lowering(aten.scatter)
def scatter(x, dim, index, src, reduce=None):
    """`x` with `src` written at `index` along `dim`, when `index` holds one position per
    line along `dim` (size 1 there, `x`'s sizes elsewhere; nll_loss's backward scatters
    so): then each element is a where, hit iff its coordinate is its line's index. Other
    shapes are a store through an index: ATen runs them."""
    size, isize = x.get_size(), index.get_size()
    dim = dim % max(len(size), 1)
    if reduce is not None or not size or len(isize) != len(size) or isize[dim] != 1 \
            or any(a != b for k, (a, b) in enumerate(zip(isize, size)) if k != dim):
        raise NotImplementedError("scatter with more than one index per line, or a reduce")
    dtype = x.get_dtype()
    load_x, load_index = x.make_loader(), index.make_loader()
    load_src = src.make_loader() if is_ir(src) else (lambda line: ops.constant(src, dtype))

    def inner_fn(idx):
        line = list(idx)
        line[dim] = 0                                        # the line's one index (and src value)
        hit = ops.eq(ops.index_expr(idx[dim], torch.int64), load_index(line))
        value = load_src(line)
        if is_ir(src) and src.get_dtype() != dtype:
            value = ops.to_dtype(value, dtype)
        return ops.where(hit, value, load_x(idx))
    return StorageBox(Pointwise(x.get_device(), dtype, inner_fn, list(size)))

@register_lowering(aten.split_with_sizes, aten.split)
def split(x, sizes, dim=0):
    """Each piece is a slice view of `x` (getitem picks them)."""
    size = x.get_size()
    dim = dim % len(size)
    if isinstance(sizes, int):
        sizes = [min(sizes, size[dim] - s) for s in range(0, size[dim], sizes)] or [0]
    pieces, start = [], 0
    for n in sizes:
        pieces.append(_slice_view(x, dim, start, start + n, 1, length=n))
        start += n
    return tuple(pieces)
