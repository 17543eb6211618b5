"""Scheduler: decide which buffers are computed by which kernel, in what order.

Mirrors `torch/_inductor/scheduler.py`. Each buffer from lowering becomes a node:
`SchedulerNode` (a `ComputedBuffer`: we generate its loops) or `ExternKernelSchedulerNode`
(an ATen call). Each node knows its `MemoryDep` reads and writes, found by running its
body under a `RecordingHandler` (ops_handler.py) -- the same closure that codegen compiles.

This is the walking-skeleton scheduler: nodes stay in lowering order (already a valid
topological order) and every `SchedulerNode` is its own kernel. Fusion, dead-code
elimination and memory planning build on `FusedGroup` and the recorded dependencies.
"""
from __future__ import annotations

import dataclasses

from ..ir.indexing import index_vars
from ..ir.nodes import Buffer, ComputedBuffer, ExternKernel, MultiOutput
from ..ops_handler import MemoryDep, RecordingHandler
from ..virtualized import V


class BaseSchedulerNode:
    def __init__(self, node: Buffer):
        self.node = node
        self.reads: list[MemoryDep] = []
        self.writes: list[MemoryDep] = []

    def get_name(self) -> str:
        return self.node.get_name()

    def read_names(self) -> set[str]:
        return {dep.name for dep in self.reads}

    def __str__(self):
        reads = ", ".join(sorted(self.read_names()))
        return f"{type(self).__name__}({self.get_name()}) reads [{reads}]"


class SchedulerNode(BaseSchedulerNode):
    """A ComputedBuffer whose loops we generate."""

    def __init__(self, node: ComputedBuffer):
        super().__init__(node)
        self.ranges = node.get_size()
        self.reduction_ranges = node.get_reduction_ranges()
        recorder = RecordingHandler()
        with V.set_ops_handler(recorder):
            node.store_body(index_vars("i", self.ranges), index_vars("r", self.reduction_ranges))
        self.reads, self.writes = recorder.reads, recorder.writes


class ExternKernelSchedulerNode(BaseSchedulerNode):
    """An ATen call (or one item of its tuple result): reads its whole inputs."""

    def __init__(self, node: Buffer):
        super().__init__(node)
        inputs = node.input_nodes() if isinstance(node, ExternKernel) else [node.parent]
        self.reads = [MemoryDep(x.get_name(), 0) for x in inputs]
        self.writes = [MemoryDep(node.get_name(), 0)]


@dataclasses.dataclass
class FusedGroup:
    """The nodes one kernel computes; all share `ranges` and `reduction_ranges`."""
    nodes: list[SchedulerNode]
    kernel_name: str = ""

    @property
    def ranges(self):
        return self.nodes[0].ranges

    @property
    def reduction_ranges(self):
        return self.nodes[0].reduction_ranges

    def get_names(self) -> list[str]:
        return [n.get_name() for n in self.nodes]


class Scheduler:
    def __init__(self, buffers: list[Buffer]):
        self.nodes: list[BaseSchedulerNode] = []
        for buf in buffers:
            if isinstance(buf, ComputedBuffer):
                self.nodes.append(SchedulerNode(buf))
            elif isinstance(buf, (ExternKernel, MultiOutput)):
                self.nodes.append(ExternKernelSchedulerNode(buf))
        self.schedule: list[FusedGroup | ExternKernelSchedulerNode] = []
        for node in self.nodes:
            if isinstance(node, SchedulerNode):
                node_group = FusedGroup([node], kernel_name=f"kernel{self.kernel_count()}")
                self.schedule.append(node_group)
            else:
                self.schedule.append(node)

    def kernel_count(self) -> int:
        return sum(isinstance(item, FusedGroup) for item in self.schedule)

    def __str__(self):
        lines = []
        for item in self.schedule:
            if isinstance(item, FusedGroup):
                lines.append(f"{item.kernel_name}: {', '.join(item.get_names())}")
            else:
                lines.append(f"extern: {item.get_name()}")
        return "\n".join(lines)
