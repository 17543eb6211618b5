"""The combo_kernels pass: independent pointwise groups of one graph share a launch.

Mirrors `Scheduler.create_combo_kernel_nodes` (`torch/_inductor/scheduler.py`, behind
`combo_kernels=True`) and the partitioning of `codegen/triton_combo_kernel.py`. After
fusion, an optimizer step over N parameters is still N kernels (one per parameter: each
reads a buffer no other reads, so nothing fuses them) plus N tiny ones for the step
counters. Those kernels do not depend on each other; one kernel can run them all, one
part after another (C++: each part's loops in one OpenMP region) or side by side (Triton:
the program ids split into one range per part). The code is generated in kernel.py.

Which groups combine: fused groups in one *generation* of the dependency graph (the
longest path from the graph's inputs to them has the same length; an edge always goes to
a later generation, so no path joins two groups of one generation, and contracting groups
within generations never makes a cycle), pointwise (no reduction loop), not mix-order,
not transposed where the policy tiles those (Triton: a 2-D grid, `tile_split`; a C++
part is a loop nest like any other: the GPT-2 block's q/v copies and its k transpose share
one OpenMP region), smaller than
COMBO_MAX_NUMEL elements (a launch costs nothing next to a bigger one), in program order, at
most COMBO_MAX_PARTS per combo and COMBO_MAX_ARGS buffers (Inductor's cap on a Triton
kernel's arguments).

Simplified: Inductor also combines reductions and templates, sorts the parts by size and
can autotune a combo; here a combo holds pointwise parts only, in program order.
"""
from __future__ import annotations

import dataclasses
import math

import networkx as nx

from ...codegen.policy import BackendPolicy
from ...ir.sizevars import is_static
from ...scheduler.fusion import FusionDecision
from ...scheduler.scheduler import FusedGroup
from ...triton.tiling import tile_split

#: parts per combo kernel, and buffers (kernel arguments) per combo kernel
COMBO_MAX_PARTS, COMBO_MAX_ARGS = 32, 250
#: a group of this many elements or more keeps its own kernel
COMBO_MAX_NUMEL = 2**22


class ComboGroup(FusedGroup):
    """Independent fused groups generated as one kernel; `nodes` holds all their nodes."""

    def __init__(self, parts: list[FusedGroup]):
        super().__init__([n for p in parts for n in p.nodes], R=[], Q=[])
        self.parts = parts

    def __str__(self):
        parts = "; ".join(f"{', '.join(p.get_names())} over {p.R}" for p in self.parts)
        return f"{self.kernel_name}: combo of {len(self.parts)} parts: {parts}"


@dataclasses.dataclass
class ComboDecision(FusionDecision):
    def __str__(self):
        return f"{self.node1} + {self.node2}: combined into one combo kernel ({self.reason})"

    @property
    def kind(self) -> str:
        return "combo"   # its reason starts with a count ("2 independent pointwise kernels, ...")


def _buffers(group) -> set[str]:
    return {d.name for n in group.nodes for d in n.reads + n.writes}


def combinable(group, policy: BackendPolicy) -> str | None:
    """Why `group` keeps its own kernel, or None."""
    if not isinstance(group, FusedGroup) or isinstance(group, ComboGroup):
        return "not a generated kernel"
    if group.is_reduction or group.Q:   # (a mix-order group is a reduction too)
        return "a reduction"
    if any(getattr(n, "is_template", False) for n in group.nodes):
        return "a GEMM template (its kernel is a tile loop of its own)"
    if (own := next((n.keeps_own_kernel for n in group.nodes if getattr(n, "keeps_own_kernel", "")), "")):
        return own   # (an extension's node that needs a kernel of its own: ext/scatter's, ext/scan's)
    if not all(map(is_static, group.R)):
        return "symbolic sizes (a combo's program ranges are fixed at compile time)"
    if math.prod(group.R) >= COMBO_MAX_NUMEL:
        return f"{math.prod(group.R)} elements (at least COMBO_MAX_NUMEL={COMBO_MAX_NUMEL})"
    if policy.tiled_transposes and tile_split(group) is not None:
        return "transposed accesses (a tiled Triton kernel)"
    return None


def combine_kernels(scheduler, policy: BackendPolicy) -> list[ComboGroup]:
    """Replace runs of combinable groups of one generation by ComboGroups (the module
    docstring says which); record a decision for each."""
    graph = scheduler.dependency_graph()   # its nodes are the groups
    position = {id(g): k for k, g in enumerate(scheduler.groups)}
    batches = []
    for generation in nx.topological_generations(graph):
        batch, args = [], 0
        for group in sorted(generation, key=lambda g: position[id(g)]):
            if combinable(group, policy) is not None:
                continue
            n = len(_buffers(group))
            if batch and (len(batch) == COMBO_MAX_PARTS or args + n > COMBO_MAX_ARGS):
                batches.append(batch)
                batch, args = [], 0
            batch.append(group)
            args += n
        batches.append(batch)
    combos = [_combine(scheduler, batch) for batch in batches if len(batch) > 1]
    scheduler._deps = scheduler._rank = None   # the groups changed: rebuild on demand
    return combos


def _combine(scheduler, parts) -> ComboGroup:
    combo = ComboGroup(parts)
    groups = scheduler.groups
    groups[groups.index(parts[0])] = combo
    for part in parts[1:]:
        groups.remove(part)
    scheduler.original_order[id(combo)] = min(scheduler.original_order[id(p)] for p in parts)
    numel = sum(math.prod(p.R) for p in parts)
    scheduler.decisions.append(ComboDecision(
        parts[0].get_name(), "+".join(p.get_name() for p in parts[1:]), True,
        f"{len(parts)} independent pointwise kernels, {numel} elements in all: one launch instead of {len(parts)}"))
    return combo
