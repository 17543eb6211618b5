"""Planted bugs: context managers that break the compiler on purpose, in known places.

Used by `tests/tools/test_accuracy.py` and tutorial 11 to show that `debug_accuracy` finds and
names each kind of bug; never used by the compiler itself. No Inductor twin (its tests
plant bugs with `torch._inductor.config` knobs made for the purpose, e.g.
`cpp.inject_relu_bug_TESTING_ONLY`). Each one patches a single function or table entry
and restores it on exit; kernels built meanwhile are cached under their (buggy) source,
so they never leak into a correct compile, and no wrapper of capture or compile_graph (passes.CAPTURE_WRAPPERS,
GRAPH_COMPILERS: the compiled-graph cache) takes part meanwhile (a hit would hide the bug, a stored entry would keep it). The
decomposition bugs patch the table that capture/aot.py asks for (`aot.decomposition_table`),
not the cached tables themselves.
"""
from __future__ import annotations

import contextlib
import functools
from unittest import mock

import sympy
import torch
from torch._decomp import core_aten_decompositions
from torch._decomp import decomposition_table as all_decompositions

from ... import compile_fx, passes
from ...capture import aot
from ...codegen.cpp import CppKernel, CppOverrides
from ...ir.nodes import ComputedBuffer, ExternKernel
from ...lowering import registry
from ...lowering.pointwise import make_pointwise
from ...virtualized import V


def _planted(bug):
    """`bug` (a generator) as a context manager under which capture and compile_graph run
    unwrapped (no compiled-graph cache at either level: tools may not import an extension, so
    the tables are emptied instead)."""
    planted = contextlib.contextmanager(bug)

    @contextlib.contextmanager
    @functools.wraps(bug)
    def uncached(*args, **kwargs):
        tables = (passes.GRAPH_COMPILERS, passes.CAPTURE_WRAPPERS)
        saved = [list(t) for t in tables]
        for table in tables:
            table.clear()
        try:
            with planted(*args, **kwargs):
                yield
        finally:
            for table, entries in zip(tables, saved):
                table[:] = entries
    return uncached


@_planted
def bool_and_promotes():
    """The embedding-backward bug of commit 3ed88c9, put back: C++ `bool & bool` is an
    int, so `~(a & b)` is -2 (true) and a mask meant to be false never is."""
    with mock.patch.object(CppOverrides, "bitwise_and", staticmethod(lambda a, b: f"{a} & {b}")):
        yield


@_planted
def wrong_lowering(op, delta=1.0):
    """A lowering that adds `delta` to its result (a lowering bug: the IR itself is wrong)."""
    packet = getattr(op, "overloadpacket", op)
    real = registry.lowerings[packet]

    def buggy(*args, **kwargs):
        value = real(*args, **kwargs)
        dtype = value.get_dtype()
        return make_pointwise(lambda v: V.ops.add(v, V.ops.constant(delta, dtype)), (value,), dtype)
    with mock.patch.dict(registry.lowerings, {packet: buggy}):
        yield


@_planted
def reversed_row_reads(graph: str | None = None):
    """A wrong index in fused kernels only: in the loops over the row that follow the
    kernel's first (softmax's division, layer norm's scaling), a C++ kernel reads its rows
    back to front. graph: only in graphs of this name ("forward", "backward", ...)."""
    real = CppKernel.load

    def load(self, name, index):
        here = graph is None or V.graph.name == graph
        in_memory = name not in self.removed   # a buffer kept in registers has no other row to read
        if here and in_memory and self.block is not None and self.reduction_vars and self.block is not self.blocks[0]:
            r, n = self.reduction_vars[-1], self.reduction_ranges[-1]
            index = sympy.sympify(index).subs(r, n - 1 - r)
        return real(self, name, index)
    with mock.patch.object(CppKernel, "load", load):
        yield


@_planted
def unsafe_inplace():
    """A write-after-read race: a kernel may write its output over an input it reads at
    *another* index (the rule that the read be at the written index is dropped), so a
    later iteration reads an element an earlier one already overwrote."""
    real = compile_fx.inplace_buffers

    def inplace(group, scheduler, graph, removed):
        pairs = real(group, scheduler, graph, removed)
        for node in group.nodes:
            for out in (d.name for d in node.writes if d.name not in pairs and d.name not in removed):
                for src in (d.name for d in node.reads):
                    buf, lay = graph.get_buffer(src), graph.get_buffer(out).layout
                    if (isinstance(buf, (ComputedBuffer, ExternKernel)) and buf.layout is not None and src not in pairs.values()
                            and src not in scheduler.output_names and scheduler.readers(src) == [group]
                            and (buf.layout.size, buf.layout.stride, buf.layout.dtype) == (lay.size, lay.stride, lay.dtype)):
                        pairs[out] = src
                        break
        return pairs
    with mock.patch.object(compile_fx, "inplace_buffers", inplace):
        yield


@contextlib.contextmanager
def _table_entries(entries: dict):
    """Capture's decomposition table with `entries` ({op overload: decomposition}) on top."""
    real = aot.decomposition_table

    def table(**kwargs):
        return {**real(**kwargs), **entries}
    with mock.patch.object(aot, "decomposition_table", table):
        yield


@_planted
def wrong_decomposition(op: torch._ops.OpOverload, delta=1.0):
    """A decomposition that adds `delta` to the op's (first) result: every buffer matches
    its reference, computed from the decomposed graph; only eager shows the error. `op` is
    decomposed by PyTorch's own decomposition of it, plus `delta` (in training and inference)."""
    real = all_decompositions[op]

    def buggy(*args, **kwargs):
        out = real(*args, **kwargs)
        return (out[0] + delta, *out[1:]) if isinstance(out, (tuple, list)) else out + delta
    with _table_entries({op: buggy}):
        yield


@_planted
def sdpa_decomposed():
    """The bug of issue 34, put back: core ATen's decomposition of the CPU flash attention
    kernel (`aten._scaled_dot_product_flash_attention_for_cpu`, what F.scaled_dot_product_attention
    calls on the CPU) back in the table (capture/decompositions.py's NOT_DECOMPOSED leaves it
    out). Its output is right, but in the place of the kernel's logsumexp it returns the
    attention weights, and the backward kernel that autograd leaves in the graph
    (`..._for_cpu_backward`) reads them as the logsumexp: the gradients are wrong, while
    every compiled buffer matches the decomposed graph."""
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    with _table_entries({op: core_aten_decompositions()[op]}):
        yield


@_planted
def wrong_graph_pass(op: torch._ops.OpOverload, replacement: torch._ops.OpOverload):
    """A pass over the ATen graph before lowering (the `aten_graph` stage of passes.py, where
    the extensions' graph rewrites run) that rewrites every `op` node into `replacement`: the
    buffers match the rewritten graph and the decomposed graph is right, so only the results
    show it."""
    def rewrite(gm, ctx):
        for node in gm.graph.find_nodes(op="call_function", target=op):
            node.target = replacement
        gm.recompile()
    with passes.registered(passes.Pass("aten_graph", "planted_wrong_rewrite", rewrite)):
        yield
