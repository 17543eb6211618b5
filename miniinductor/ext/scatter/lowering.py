"""Lowerings of index_put (accumulate or not), scatter_add, scatter (src and value forms) and
scatter_reduce("sum", include_self=True): a copy of `self`, then a Scatter into it (ir.py).

Mirrors `index_put_`, `index_put_impl_`, `scatter_`, `scatter_add`, `scatter_reduce_` and
`_unsafe_index_put` in `torch/_inductor/lowering.py`. index_add and embedding's backward
reach index_put(accumulate=True) through the core's decomposition table
(capture/decompositions.py), so they are lowered here too. Indices are as eager's: negative
ones count from the end (`ops.indirect_indexing` wraps them), index tensors broadcast, and
the indexed dims' values land where `x[indices]` would put them (adjacent indexed dims in
place, separated ones in front). Registered with `extension="scatter"`: with the extension off
the ops run as ATen calls.

Declined (NotImplementedError: the op runs as an ATen call, Inductor's `fallback_...`):
boolean-mask indices (a data-dependent count), bool targets of an add, scatter_reduce other
than a sum including `self`, empty sources, and on the Triton backend an atomic add while
`torch.are_deterministic_algorithms_enabled()` (GPU atomics add in any order; ATen has a
deterministic kernel) or of a dtype whose atomic add the device lacks (float16/bfloat16 need
sm90). The C++ kernel is a serial loop, deterministic anyway (kernels.py).

Simplified: no bounds checks on the indices (out-of-range ones are undefined, as with
`_unsafe_index_put`); with duplicate indices and no accumulation the value kept is undefined
(eager's is too; the serial C++ loop keeps the last).
"""
from __future__ import annotations

import torch

from ...ir.nodes import Layout, Pointwise, StorageBox
from ...lowering.pointwise import broadcast_shapes, expand_to
from ...lowering.registry import aten, register_lowering
from ...virtualized import V, ops
from .ir import Scatter, ScatterBuffer

#: dtypes whose atomic add Triton has on every GPU we target (and under its interpreter)
TRITON_ATOMIC_DTYPES = {torch.float32, torch.float64, torch.int32}


def check_atomic(dtype):
    """Raise NotImplementedError where this graph's kernels cannot add `dtype` atomically."""
    if dtype == torch.bool:
        raise NotImplementedError("an accumulating scatter into a bool tensor")
    if V.graph.kernel_backend() != "triton":
        return
    if torch.are_deterministic_algorithms_enabled():
        raise NotImplementedError("deterministic algorithms are on: Triton's atomic adds run in any order")
    device = V.graph.current_device()
    ok = set(TRITON_ATOMIC_DTYPES)
    if device.type == "cuda" and torch.cuda.get_device_capability(device) >= (9, 0):
        ok |= {torch.float16, torch.bfloat16}
    if dtype not in ok:
        raise NotImplementedError(f"no Triton atomic add of {dtype} on {device}")


def scatter_into(x, ranges, output_indexer, value_fn, mode):
    """A copy of `x` (an ordinary kernel), then a Scatter over `ranges` into it: the IR node
    of the result."""
    dtype, device = x.get_dtype(), x.get_device()
    if mode == "atomic_add":
        check_atomic(dtype)
    if any(n == 0 for n in ranges):
        raise NotImplementedError("an empty scatter source")
    target = StorageBox(Pointwise(device, dtype, x.make_loader(), x.get_size())).realize()
    lay = target.layout

    def inner_fn(index):
        return ops.to_dtype(value_fn(index), dtype)
    data = Scatter(device, dtype, inner_fn, list(ranges), output_indexer=output_indexer, scatter_mode=mode)
    layout = Layout(lay.device, lay.dtype, list(lay.size), list(lay.stride), lay.offset)
    return StorageBox(V.graph.register_buffer(ScatterBuffer(None, layout, data, target.get_name())))


def _indirect(node, size, index):
    return ops.indirect_indexing(node.make_loader()(index), size)


@register_lowering(aten.index_put, aten._unsafe_index_put, extension="scatter")
def index_put(x, indices, values, accumulate=False):
    """x[indices] = values (or += with `accumulate`), as advanced indexing places them."""
    size = x.get_size()
    indices = list(indices) + [None] * (len(size) - len(indices))
    if any(t is not None and t.get_dtype() in (torch.bool, torch.uint8) for t in indices):
        raise NotImplementedError("boolean mask index (data-dependent count)")
    positions = [k for k, t in enumerate(indices) if t is not None]
    if not positions:
        raise NotImplementedError("index_put without an index tensor")
    bshape = broadcast_shapes(*[indices[k].get_size() for k in positions])
    loaders = {k: expand_to(indices[k], bshape) for k in positions}
    rest = [k for k in range(len(size)) if k not in positions]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    nb, p0 = len(bshape), positions[0]
    if adjacent:   # x[:, i, j, :]: the indexed dims' result sits where they were
        ranges = list(size[:p0]) + list(bshape) + list(size[positions[-1] + 1:])
    else:          # x[i, :, j]: in front
        ranges = list(bshape) + [size[k] for k in rest]
    load_values = expand_to(values, ranges).make_loader()

    def output_indexer(idx):
        idx = list(idx)
        b, plain = (idx[p0:p0 + nb], idx[:p0] + idx[p0 + nb:]) if adjacent else (idx[:nb], idx[nb:])
        full = [None] * len(size)
        for k, i in zip(rest, plain):
            full[k] = i
        for k in positions:
            full[k] = _indirect(loaders[k], size[k], b)
        return full
    return scatter_into(x, ranges, output_indexer, load_values, "atomic_add" if accumulate else None)


def _along(x, dim, index, value_fn, mode):
    """scatter's form: element idx of `index` goes to x at idx with dim `dim` replaced by its value."""
    size = x.get_size()
    if not size:
        raise NotImplementedError("a scatter into a 0-d tensor")
    dim = dim % len(size)

    def output_indexer(idx):
        out = list(idx)
        out[dim] = _indirect(index, size[dim], list(idx))
        return out
    return scatter_into(x, index.get_size(), output_indexer, value_fn, mode)


def _source(src, dtype):
    if isinstance(src, (int, float, bool)):
        return lambda idx: ops.constant(src, dtype)
    return src.make_loader()


@register_lowering(aten.scatter_add, extension="scatter")
def scatter_add(x, dim, index, src):
    return _along(x, dim, index, _source(src, x.get_dtype()), "atomic_add")


@register_lowering(aten.scatter, extension="scatter")
def scatter(x, dim, index, src, reduce=None):
    """scatter.src / scatter.value; the `reduce="add"` forms add."""
    if reduce not in (None, "add"):
        raise NotImplementedError(f"scatter with reduce={reduce!r}")
    return _along(x, dim, index, _source(src, x.get_dtype()), None if reduce is None else "atomic_add")


@register_lowering(aten.scatter_reduce.two, extension="scatter")
def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    if reduce != "sum" or not include_self:
        raise NotImplementedError(f"scatter_reduce {reduce!r} (include_self={include_self})")
    return scatter_add(x, dim, index, src)
