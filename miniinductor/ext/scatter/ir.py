"""The scatter IR node and its scheduler node: a loop over the *source* elements that stores
each value at an index it computes, into a buffer another kernel filled first.

Mirrors `ir.Scatter` (a Pointwise with an `output_indexer` and a `scatter_mode`) in
`torch/_inductor/ir.py`, and how Inductor's scheduler sees it: a node that mutates the
buffer it scatters into. Here the mutation is spelled with what the core already has:

- the target is a fresh copy of `self` (or zeros), an ordinary ComputedBuffer that only the
  scatter reads;
- the scatter is its own buffer (`ScatterBuffer`, a name of its own), which its kernel writes
  in place over the target (the wrapper binds `buf5 = buf4`, as for any in-place output:
  ext/scatter/kernels.py forces that pairing), so every later reader depends on the scatter's
  name, never on the target's;
- its scheduler node (`ScatterNode`) reads the target (one more MemoryDep), so the copy runs
  first; a fusion rule (ext/scatter/__init__.py) keeps it in a kernel of its own, since a
  value read or written in the same kernel could meet another program's half-done adds.

Simplified: one scatter per target (Inductor may chain several mutations of one buffer);
the destination index of every element is recorded against one MemoryDep of the target.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import sympy

from ...ir.indexing import canonical_vars, index_vars, simplify_with_ranges
from ...ir.nodes import ComputedBuffer, Pointwise
from ...ops_handler import MemoryDep, RecordingHandler
from ...scheduler.scheduler import BaseSchedulerNode, SchedulerNode, canonical, expand_index
from ...virtualized import V, ops


@dataclasses.dataclass
class Scatter(Pointwise):
    """`ranges` are the source's: element `index` stores `inner_fn(index)` at the target's
    logical index `output_indexer(index)`, plainly (`scatter_mode` None) or added to what is
    there ("atomic_add")."""
    output_indexer: Callable = None
    scatter_mode: str | None = None

    def _print_body(self, handler):
        index = index_vars("i", self.ranges)
        mode = "" if self.scatter_mode is None else f", mode={self.scatter_mode!r}"
        handler.lines.append(f"store at {self.output_indexer(index)}: {self.inner_fn(index)}{mode}")

    def store_output(self, name, indexer, index, rindex=None):
        return ops.store(name, indexer(self.output_indexer(index)), self.inner_fn(index), mode=self.scatter_mode)


class ScatterBuffer(ComputedBuffer):
    """The result of a scatter: the target's layout; computed in place over `target`."""

    def __init__(self, name, layout, data: Scatter, target: str):
        super().__init__(name, layout, data)
        self.target = target

    def __str__(self):
        return super().__str__().replace("ComputedBuffer", f"ScatterBuffer over {self.target}", 1)


class ScatterNode(SchedulerNode):
    """A ScatterBuffer's node: loops over the source's ranges (not the buffer's size); reads
    the target (so that the copy into it comes first) besides what its body loads."""
    keeps_own_kernel = "a scatter (its stores may land anywhere in the target)"

    def __init__(self, node: ScatterBuffer):
        BaseSchedulerNode.__init__(self, node)
        self.ranges, self.reduction_ranges, self.is_reduction = list(node.data.ranges), [], False
        self.outer, self.inner = canonical(self.ranges), []
        cvars = canonical_vars(len(self.outer))
        recorder = RecordingHandler()
        with V.set_ops_handler(recorder):
            node.store_body(expand_index(self.ranges, cvars), [])
        var_ranges = dict(zip(cvars, self.outer))
        ranges = tuple(var_ranges.items())

        def dep(name, index):
            return MemoryDep(name, simplify_with_ranges(sympy.expand(index), var_ranges), ranges)
        self.writes = [dep(d.name, d.index) for d in recorder.writes]
        self.reads = [dep(d.name, d.index) for d in recorder.reads] + [dep(node.target, self.writes[0].index)]
