"""The Triton backend's passes: split reductions (on the loop IR) and compiling a GPU graph's
kernels together (after the wrapper is loaded). Always on where Triton writes the kernels.

Split reductions (Inductor's `Reduction.create` → `create_multilayer` in
`torch/_inductor/ir.py`): a reduction with few outputs and long rows -- `x.sum()` of a
big tensor is a single row -- would run as a handful of programs on a GPU; a column
reduction with long columns (the bias gradient `grad.sum(0)`: 768 columns of 2048 rows)
would read memory in narrow, wasteful pieces. Either is cut in two: a first reduction
computes `split` partial results per output, each over one chunk of the row, in
parallel; a second, small one combines them. `reduction_splits` (policy.py) decides
how many; `split_reductions` is the pass, run after lowering. The C++ kernels
parallelise their outer loop instead and are not split.

Precompiling mirrors the parallel compile of `torch/_inductor/async_compile.py`.
"""
from __future__ import annotations

import logging
import math

import sympy
import torch

from ..codegen.common import affine_strides, innermost_strides
from ..ir.indexing import FloorDiv, ModularIndexing, index_vars
from ..ir.nodes import ComputedBuffer, Reduction, StorageBox
from ..ir.sizevars import is_static
from ..ops_handler import RecordingHandler
from ..passes import Pass, register
from ..virtualized import V, ops
from .overrides import reduction_identity
from .policy import reduces_columns, reduction_splits
from .runtime import kernel_launchers, precompile_all
from .tiling import stride_order

log = logging.getLogger("miniinductor")


def _unflatten(flat, sizes) -> list:
    """The digits of a flat index in a shape: [flat // (b*c), (flat // c) % b, flat % c]."""
    digits, stride = [], math.prod(sizes)
    for k, n in enumerate(sizes):
        stride //= n
        digits.append(FloorDiv(flat, stride) if k == 0 else ModularIndexing(flat, stride, n))
    return digits


SPLITTABLE = ("sum", "prod", "max", "min", "any")   # combinable again (argmax carries an index)


def _recorded_loads(node: Reduction) -> tuple[set[str], list[tuple]]:
    """Run a reduction's body on symbols: the buffers it loads, and each load's (x stride,
    r stride) at the innermost non-1 dims -- what TritonKernel records for `reduces_columns`."""
    xs, rs = index_vars("i", node.ranges), index_vars("r", node.reduction_ranges)
    recorder = RecordingHandler()
    with V.set_ops_handler(recorder):
        node.inner_fn(xs, rs)
    var_ranges = dict(zip(xs + rs, list(node.ranges) + list(node.reduction_ranges)))
    x_last = next((v for v, n in zip(reversed(xs), reversed(node.ranges)) if n != 1), None)
    r_last = next((v for v, n in zip(reversed(rs), reversed(node.reduction_ranges)) if n != 1), None)
    strides = [innermost_strides(dep.index, var_ranges, x_last, r_last) for dep in recorder.reads]
    return {d.name for d in recorder.reads}, strides


def split_reductions(graph) -> None:
    """Pass over a lowered graph (where the policy splits: Triton kernels): cut each reduction that
    `reduction_splits` (policy.py) says runs as too few programs into partial[s, *x] = reduce(chunk s
    of row x) and out[x] = reduce(partial[:, x]). The output buffer keeps its name; the
    partial one (float32 for float16/bfloat16 sums) is stored just before it.

    A column reduction that the scheduler's mix-order pass may pair with a row reduction
    of the same input (one that another reduction also reads, and big enough) is left whole:
    the mix-order kernel reads that input once for both.

    A reduction with symbolic sizes is left whole: how many pieces pay off, and whether
    they divide the row, depends on the size (Inductor guards on a split; we keep the one
    kernel that is right for every size)."""
    policy = graph.policy
    if not policy.split_reductions:
        return
    reductions = [b for b in graph.buffers if isinstance(b, ComputedBuffer) and isinstance(b.data, Reduction)]
    loads = {b.name: _recorded_loads(b.data) for b in reductions}   # name → (buffers loaded, strides)
    for buf in reductions:
        node = buf.data
        if node.reduction_type not in SPLITTABLE:
            continue
        names, strides = loads[buf.name]
        outer = reduces_columns(strides)
        xnumel, rnumel = math.prod(node.ranges), math.prod(node.reduction_ranges)
        if not (is_static(xnumel) and is_static(rnumel)):
            continue
        shared = any(names & others for other, (others, _) in loads.items() if other != buf.name)
        if outer and shared and policy.mix_order_reduction and xnumel * rnumel >= policy.mix_order_min_numel:
            continue
        split = reduction_splits(xnumel, rnumel, outer)
        if split > 1:
            _split(graph, buf, split)


def _memory_order(node: Reduction) -> list[int] | None:
    """The reduction dims in the order that reads memory contiguously (tiling.py's
    `stride_order` over the loads' strides): a sum of a channels-last buffer is chunked along
    (H, W, C), not (C, H, W), so each chunk reads one contiguous run. None: their own order."""
    xs, rs = index_vars("i", node.ranges), index_vars("r", node.reduction_ranges)
    recorder = RecordingHandler()
    with V.set_ops_handler(recorder):
        node.inner_fn(xs, rs)
    var_ranges = dict(zip(xs + rs, list(node.ranges) + list(node.reduction_ranges)))
    strides = [affine_strides(dep.index, xs + rs, var_ranges) for dep in recorder.reads]
    rows = [[s[v] for v in rs] for s in strides if s is not None and any(s[v] for v in rs)]
    return stride_order(rows, node.reduction_ranges) if all(map(is_static, node.reduction_ranges)) else None


def _split(graph, buf, split):
    """A row of `rnumel` in `split` chunks of `ceil(rnumel / split)`; where they do not divide
    it, the last chunk's elements past the row's end are masked to the reduction's identity."""
    node = buf.data
    rnumel = math.prod(node.reduction_ranges)
    chunk = -(-rnumel // split)
    low_precision = node.dtype in (torch.float16, torch.bfloat16) and node.reduction_type in ("sum", "prod")
    partial_dtype = torch.float32 if low_precision else node.dtype

    order = _memory_order(node) or range(len(node.reduction_ranges))   # the chunks follow memory

    def unflatten(flat):   # the reduction index whose digits, in `order`, spell `flat`
        digits = dict(zip(order, _unflatten(flat, [node.reduction_ranges[k] for k in order])))
        return [digits[k] for k in range(len(order))]

    def first(index, rindex):   # index: [s, *x]; rindex: [r within chunk s]
        flat = index[0] * chunk + rindex[0]
        body = lambda: node.inner_fn(index[1:], unflatten(flat))  # noqa: E731
        if chunk * split == rnumel:
            return body()
        inside = ops.lt(ops.index_expr(flat, torch.int64), ops.index_expr(sympy.Integer(rnumel), torch.int64))
        return ops.masked(inside, body, reduction_identity(node.reduction_type, node.src_dtype))
    partial = StorageBox(Reduction(node.device, partial_dtype, first, [split, *node.ranges], [chunk],
                                   node.reduction_type, node.src_dtype, origins=set(node.origins))).realize()
    graph.buffers.remove(partial)
    graph.buffers.insert(graph.buffers.index(buf), partial)
    load = partial.make_loader()
    buf.data = Reduction(node.device, node.dtype, lambda index, rindex: load([rindex[0], *index]),
                         list(node.ranges), [split], node.reduction_type, partial_dtype, origins=set(node.origins))


def _split_reductions(graph, ctx):
    with V.set_graph_handler(graph):
        split_reductions(graph)


def precompile_kernels(module, ctx):
    """Compile a GPU graph's Triton kernels together, in threads, instead of one by one as
    the first call reaches each (runtime.py, `precompile_all`)."""
    kernels = ctx.kernels
    launchers = [launcher for name in kernels for launcher in kernel_launchers(getattr(module, name).__globals__, name)]
    seconds = precompile_all(launchers, ctx.device)
    log.info("compiled %d Triton kernels (%d variants) in %.2f s", len(kernels), len(launchers), seconds)


register(Pass("loop_ir", "split_reductions", _split_reductions, "triton",
              enabled=lambda ctx: ctx.policy.split_reductions,
              doc="long rows or columns reduced in two kernels (triton/passes.py)"))
register(Pass("load", "precompile_kernels", precompile_kernels, "triton",
              enabled=lambda ctx: ctx.device.type == "cuda",
              doc="a GPU graph's Triton kernels compiled together, in threads"))
