"""The fuse_mix_order pass: a row and a column reduction of one input share a group.

Mirrors the mix-order reduction of newer Inductor (`MixOrderReduction` in
`torch/_inductor/scheduler.py`, behind `config.triton.mix_order_reduction`; Triton only).
A group that reduces each row of an [M, N] input and one that reduces each *column* of
the same input iterate the same elements in transposed roles, so no (R, Q) fits both and
the core's fusion rounds (scheduler/fusion.py) leave them apart. One kernel can still read
the input once: each program takes a band of rows, reduces every row whole, and folds the
band's column partials into an [N] accumulator; the M/band partial rows are combined after
the kernel (kernel.py, `MixOrderKernel`). This pass, after the core's `fuse`, pairs such
groups (`mix_order_problem` says which can be) into a `MixOrderGroup`, which names the
nodes that reduce columns.

Simplified: one pairing per group, the pairs taken greedily by bytes shared.
"""
from __future__ import annotations

import math

import torch

from ...ir.sizevars import is_static
from ...scheduler import FusedGroup
from ...scheduler.fusion import FusionDecision, mutation_problem, shared_bytes

#: column reductions a mix-order kernel can finish (its partial rows are combined again)
MIX_ORDER_KINDS = {"sum": "sum", "max": "amax", "min": "amin"}
#: fewer rows than this: two plain kernels are as good
MIX_ORDER_MIN_ROWS = 256


class MixOrderGroup(FusedGroup):
    """A row-reducing group and a column-reducing one over the same input, in one kernel:
    loops over the rows' (R, Q); `transposed` names the nodes that reduce columns (their R
    and Q swapped)."""

    def __init__(self, nodes, R=None, Q=None):
        super().__init__(nodes, R, Q)
        self.transposed: frozenset[str] = frozenset()

    def __str__(self):
        return f"{super().__str__()} (mix-order: {', '.join(sorted(self.transposed))} reduce columns)"


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


def fuse_mix_order(scheduler, ctx):
    """Pair each row-reducing group with a column-reducing group over the same rows that
    shares its reads (the most bytes first): one kernel then reads the input once."""
    policy = ctx.policy
    groups = [g for g in scheduler.groups if isinstance(g, FusedGroup) and g.is_reduction]
    nbytes = lambda name: scheduler.nbytes.get(name, 0)  # noqa: E731
    pairs = [(shared_bytes(a, b, nbytes), a, b)
             for i, a in enumerate(groups) for b in groups[i + 1:] if (a.R, a.Q) == (b.Q, b.R)]
    pairs.sort(key=lambda p: -p[0])   # stable: ties stay in program order
    taken = set()
    for score, a, b in pairs:
        if score == 0 or id(a) in taken or id(b) in taken:
            continue
        # either may be the one reducing columns: try a as the row group, then b
        problems = [mix_order_problem(row, col, policy.persistent_reduction_max, policy.mix_order_min_numel)
                    for row, col in ((a, b), (b, a))]
        row, col = (a, b) if problems[0] is None or problems[1] is not None else (b, a)
        problem = (problems[0] and problems[1]) or mutation_problem(a, b, scheduler.overwritten, scheduler.mutations)
        if problem is None and (via := scheduler.path_between(row, col)):
            problem = f"would create a cycle via {via}"
        scheduler.decisions.append(FusionDecision(row.get_name(), col.get_name(), problem is None,
                                                  problem or f"mix-order, rows {row.R} x {row.Q}", score))
        if problem:
            continue
        scheduler.merge(row, col, row.R, row.Q, MixOrderGroup).transposed = frozenset(col.get_names())
        taken |= {id(row), id(col)}
