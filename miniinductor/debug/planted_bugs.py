"""Planted bugs: context managers that break the compiler on purpose, in known places.

Used by `tests/test_accuracy.py` and tutorial 11 to show that `debug_accuracy` finds and
names each kind of bug; never used by the compiler itself. No Inductor twin (its tests
plant bugs with `torch._inductor.config` knobs made for the purpose, e.g.
`cpp.inject_relu_bug_TESTING_ONLY`). Each one patches a single function or table entry
and restores it on exit; kernels built meanwhile are cached under their (buggy) source,
so they never leak into a correct compile.
"""
from __future__ import annotations

import contextlib
from unittest import mock

import sympy

from .. import compile_fx
from ..codegen.cpp import CppKernel, CppOverrides
from ..ir.nodes import ComputedBuffer, ExternKernel
from ..lowering import registry
from ..lowering.pointwise import make_pointwise
from ..virtualized import V


@contextlib.contextmanager
def bool_and_promotes():
    """The embedding-backward bug of commit 3ed88c9, put back: C++ `bool & bool` is an
    int, so `~(a & b)` is -2 (true) and a mask meant to be false never is."""
    with mock.patch.object(CppOverrides, "bitwise_and", staticmethod(lambda a, b: f"{a} & {b}")):
        yield


@contextlib.contextmanager
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


@contextlib.contextmanager
def reversed_row_reads(graph: str | None = None):
    """A wrong index in fused kernels only: in the loops over the row that follow the
    kernel's first (softmax's division, layer norm's scaling), a C++ kernel reads its rows
    back to front. graph: only in graphs of this name ("forward", "backward", ...)."""
    real = CppKernel.load

    def load(self, name, index):
        here = graph is None or V.graph.name == graph
        if here and self.block is not None and self.reduction_vars and self.block is not self.blocks[0]:
            r, n = self.reduction_vars[-1], self.reduction_ranges[-1]
            index = sympy.sympify(index).subs(r, n - 1 - r)
        return real(self, name, index)
    with mock.patch.object(CppKernel, "load", load):
        yield


@contextlib.contextmanager
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
