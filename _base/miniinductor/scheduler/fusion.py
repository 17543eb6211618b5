"""Fusion: which groups of nodes may share one kernel, and which pairs are worth it.

Mirrors `Scheduler.can_fuse`, `can_fuse_vertical`, `score_fusion` and `fuse_nodes` in
`torch/_inductor/scheduler.py`, plus the "why (not) fused" records that real Inductor only
logs (`fusion` in TORCH_LOGS).

A kernel has one loop nest: outer loops over `R` (the group's non-reduction ranges) and,
inside, a sequence of blocks that each loop over `Q` (the reduction ranges) or run once.
Two groups can share it when:
  * shapes line up: both reduce over the same (R, Q); or a pointwise group iterates R+Q
    (an epilogue or prologue loop over the row) or just R (a per-row value); or two
    pointwise groups iterate the same ranges (sizes of 1 are ignored);
  * every buffer the later group reads from the earlier one is read at exactly the index
    where it was written (so one outer iteration produces what it consumes);
  * no path leads from one to the other through a node outside both (a cycle);
  * a group that stores into a graph input (a mutation) reads the input, and other groups
    read it, only at the element it replaces (`mutation_problem`);
  * the result stays under `max_fusion_size` nodes;
  * a GEMM template (max_autotune) only takes pointwise readers of its output, after it:
    an epilogue fused into its store (`template_problem`).
The score is the bytes the fusion saves: each buffer one group writes and the other
reads, or that both read, is counted once. Ties go to the pair closest in program order.

Mix-order reductions (`mix_order_problem`, Inductor's `MixOrderReduction`, Triton only):
a group that reduces each row of an [M, N] input and one that reduces each *column* of
the same input iterate the same elements in transposed roles, so no (R, Q) fits both.
One kernel can still read the input once: each program takes a band of rows, reduces
every row whole, and folds the band's column partials into an [N] accumulator; the M/band
partial rows are combined after the kernel.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ..codegen.policy import MIX_ORDER_KINDS, MIX_ORDER_MIN_ROWS
from ..ir.indexing import canonical_vars
from ..ir.sizevars import is_static


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
    if any(n.is_template for n in a.nodes + b.nodes):
        return template_problem(a, b) or template_shape(a, b)
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
            written[dep.name] = node.write_index(R) if node.is_template and R is not None else dep.index
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


def template_shape(a, b):
    """(R, []) of a GEMM template's group a and a pointwise group b, or why they do not line
    up. Besides equal ranges, b may iterate a reshape of the product (a Linear on [B, T, C]
    reads its [B*T, N] product as [B, T, N]): the same elements in the same order, as long as
    b's last sizes make up the N columns of a tile and a has no epilogue over other ranges."""
    if a.R == b.R:
        return a.R, []
    template = next((n for n in a.nodes if n.is_template), None)
    columns = template.ranges[-1] if template is not None else None
    if (template is None or b.is_reduction or math.prod(a.R) != math.prod(b.R)
            or not any(math.prod(b.R[k:]) == columns for k in range(len(b.R) + 1))
            or any(not n.is_template and n.outer + n.inner != b.R for n in a.nodes)):
        return f"ranges differ: {a.R} vs {b.R}"
    return b.R, []


def template_problem(a, b) -> str | None:
    """Why a group holding a GEMM template (a TemplateSchedulerNode) and another group
    cannot share a kernel, or None. A template takes epilogues only: pointwise nodes over its
    output's ranges that read what it writes (Inductor's `can_fuse_vertical` with a template
    node; no prologue fusion here)."""
    with_template = [g for g in (a, b) if any(n.is_template for n in g.nodes)]
    if not with_template:
        return None
    if len(with_template) == 2:
        return "two GEMM templates cannot share a kernel"
    template, other = with_template[0], b if with_template[0] is a else a
    if other is a:
        return "a GEMM template takes no prologue: only nodes after it join it"
    if a.is_reduction or b.is_reduction:
        return "a GEMM template's epilogue is pointwise, not a reduction"
    written = {d.name for n in template.nodes for d in n.writes}
    if not any(d.name in written for n in other.nodes for d in n.reads):
        return "a GEMM template only takes epilogues that read its output"
    return None


def shared_bytes(a, b, nbytes) -> int:
    """Memory traffic saved by computing a and b in one kernel."""
    a_touch = {d.name for n in a.nodes for d in n.reads + n.writes}
    b_reads = {d.name for n in b.nodes for d in n.reads}
    return sum(nbytes(name) for name in a_touch & b_reads)


def mix_order_problem(row, col, persistent_max: int, min_numel: int = 0) -> str | None:
    """Why `row` (reducing rows R x Q) and `col` (reducing columns: its R is row's Q) cannot
    share a mix-order kernel, or None."""
    if not (row.is_reduction and col.is_reduction) or (row.R, row.Q) != (col.Q, col.R):
        return "not a row and a column reduction of the same rows"
    if any(not n.is_reduction or n.node.data.reduction_type not in MIX_ORDER_KINDS for n in col.nodes):
        return f"the column group holds more than {'/'.join(MIX_ORDER_KINDS)} reductions"
    if any(n.node.get_dtype() == torch.bool for n in col.nodes):
        return "the column group reduces bools"
    if not all(map(is_static, row.R + row.Q)):
        return "symbolic sizes (its bands and partial rows are sized at compile time)"
    if math.prod(row.Q) > persistent_max:
        return f"rows longer than {persistent_max} do not fit one block"
    if math.prod(row.R) < MIX_ORDER_MIN_ROWS:
        return f"fewer than {MIX_ORDER_MIN_ROWS} rows"
    if math.prod(row.R) * math.prod(row.Q) < min_numel:
        return f"fewer than mix_order_min_numel={min_numel} elements"
    for a, b in ((row, col), (col, row)):
        written = {d.name for n in a.nodes for d in n.writes}
        if any(d.name in written for n in b.nodes for d in n.reads):
            return "one reads what the other writes"
    return None
