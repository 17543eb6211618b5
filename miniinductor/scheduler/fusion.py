"""Fusion: which groups of nodes may share one kernel, and which pairs are worth it.

Mirrors `Scheduler.can_fuse`, `can_fuse_vertical`, `score_fusion` and `fuse_nodes` in
`torch/_inductor/scheduler.py`, plus the "why (not) fused" records that real Inductor only
logs (`fusion` in TORCH_LOGS). Schedule phase (scheduler nodes → fused groups).

A kernel has one loop nest: outer loops
over the non-reduction ranges R, inside them blocks over the reduction ranges Q or run
once. Two groups share it when their loops line up, each buffer passed between them is
read where it was written, no path through a third node joins them and the result stays
under `max_fusion_size`; the score is the bytes saved (the rules: docs/design_notes.md).
"""
from __future__ import annotations

import dataclasses

from ..ir.indexing import canonical_vars


@dataclasses.dataclass
class FusionDecision:
    node1: str          # the earlier group (names of its buffers joined with '+')
    node2: str
    fused: bool
    reason: str
    score: int = 0

    def __str__(self):
        verdict = "fused" if self.fused else "not fused"
        return f"{self.node1} + {self.node2}: {verdict} ({self.reason}; saves {self.score} bytes)"

    @property
    def kind(self) -> str:
        """The reason without its details ("vertical", "ranges differ", "would create a
        cycle"): explain's summary counts the decisions per kind."""
        return self.reason.split(",")[0].split(";")[0].split(":")[0].split(" via ")[0]


def fused_shape(a, b):
    """(R, Q) of the group a+b, or a string saying why the loops do not line up."""
    if a.is_reduction and b.is_reduction:
        if (a.R, a.Q) == (b.R, b.Q):
            return a.R, a.Q
        return f"reduction ranges differ: {a.R}x{a.Q} vs {b.R}x{b.Q}"
    if a.is_reduction or b.is_reduction:
        red, point = (a, b) if a.is_reduction else (b, a)
        if point.R in (red.R + red.Q, red.R):
            return red.R, red.Q
        return f"ranges differ: {point.R} vs reduction {red.R}x{red.Q}"
    if a.R == b.R:
        return a.R, []
    return f"ranges differ: {a.R} vs {b.R}"


def dependency_problem(a, b, R=None) -> str | None:
    """Why b cannot read a's buffers inside the same loop nest (over R, when given), or None."""
    written = {}
    for node in a.nodes:
        for dep in node.writes:
            written[dep.name] = node.written_index(dep, R) if R is not None else dep.index
    for node in b.nodes:
        for dep in node.reads:
            if dep.name in written and dep.index != written[dep.name]:
                return (f"{node.get_name()} reads {dep.name} at {dep.index}, "
                        f"written at {written[dep.name]}")
    return None


def mutation_problem(a, b, overwritten: dict[str, list[str]], mutations: dict[str, str]) -> str | None:
    """Why a group that computes a buffer into an input (a mutation) cannot share a kernel with
    a group reading the memory it overwrites, or None. The readers come first in the kernel
    (the scheduler's order puts them before the mutation), so a read of the very element the
    mutation replaces sees the old value; any other element may already be overwritten."""
    nodes = a.nodes + b.nodes
    for m in nodes:
        name = m.get_name()
        if name not in mutations:
            continue
        for n in nodes:
            for dep in n.reads:
                if name in overwritten.get(dep.name, ()) and (dep.name != mutations[name] or dep.index != m.writes[0].index):
                    return f"{n.get_name()} reads {dep.name} at {dep.index}, which {name} overwrites in place"
    return None


def _reduction_read_orders(group) -> dict[str, set[str]]:
    """For each buffer a group's reductions read: "rows" where the reduction variable walks
    it contiguously, "columns" where it strides across it."""
    orders: dict[str, set[str]] = {}
    for node in group.nodes:
        if not getattr(node, "is_reduction", False) or not node.inner:
            continue
        r_last = canonical_vars(len(node.outer) + len(node.inner))[-1]
        for dep in node.reads:
            stride = dep.index.expand().coeff(r_last) if hasattr(dep.index, "expand") else 0
            if stride.is_number and stride != 0:
                orders.setdefault(dep.name, set()).add("rows" if stride == 1 else "columns")
    return orders


def read_order_problem(a, b) -> str | None:
    """Why two reductions should not share a loop nest: they read one buffer in transposed
    orders (a row reduction and a column reduction of a square input have the same loop
    sizes), so one of them would stride across memory in the shared loops. Such a pair is a
    mix-order pair instead (Triton), or two kernels that each walk memory in order."""
    if not (a.is_reduction and b.is_reduction):
        return None
    orders_a, orders_b = _reduction_read_orders(a), _reduction_read_orders(b)
    for name in sorted(orders_a.keys() & orders_b.keys()):
        if len(orders_a[name] | orders_b[name]) > 1 and orders_a[name] != orders_b[name]:
            return f"reduces {name} along its rows in one and its columns in the other"
    return None


def shared_bytes(a, b, nbytes) -> int:
    """Memory traffic saved by computing a and b in one kernel."""
    a_touch = {d.name for n in a.nodes for d in n.reads + n.writes}
    b_reads = {d.name for n in b.nodes for d in n.reads}
    return sum(nbytes(name) for name in a_touch & b_reads)
