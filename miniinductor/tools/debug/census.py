"""The fallback census: every ATen call a compiled graph makes, counted and sorted into two.

A graph's `ExternKernel` buffers are its ATen calls. Those whose op is in
`lowering/graph.py`'s EXTERN_BY_DESIGN (convolutions, GEMMs, attention...)
and random ops are externs: every compiler leaves them to a library. The rest are fallbacks: an op that ran
as an ATen call because it had no lowering, its lowering declined (`NotImplementedError`),
its extension was off, or an option asked for it. `ExplainResult.fallbacks` and `.externs`
(explain.py) read it; `python -m miniinductor fallbacks` (tools/fallbacks.py) prints it.

Mirrors nothing one-to-one in Inductor, whose nearest is the "fallback" lines of
`TORCH_LOGS=+inductor` (one per op as it is lowered, not a count). Simplified: an op is
named by its overload (`aten.hardtanh.default`), and each distinct reason is kept as given.
"""
from __future__ import annotations

import collections
import dataclasses

import torch

from ...ir.nodes import ExternKernel
from ...lowering.graph import EXTERN_BY_DESIGN


@dataclasses.dataclass
class CensusEntry:
    """One op's ATen calls: how many, why (each reason with its count), in which graphs."""
    op: str
    count: int = 0
    reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    graphs: list = dataclasses.field(default_factory=list)

    def __str__(self):
        why = "; ".join(f"{r or '?'}" + (f" (x{n})" if n > 1 else "") for r, n in self.reasons.items())
        return f"{self.op:44s} x{self.count:<3d} {why}"


def op_name(op) -> str:
    """`aten.hardtanh.default` for an OpOverload; the name of any other callable an extension calls."""
    return str(op) if hasattr(op, "overloadpacket") else getattr(op, "__name__", str(op))


def by_design(op) -> bool:
    """Whether calling ATen for `op` is the plan, not a missing lowering: an op of
    EXTERN_BY_DESIGN, or a random one (tagged `nondeterministic_seeded`: rand_like, ...)."""
    packet = getattr(op, "overloadpacket", None)
    return packet is not None and (str(packet).split(".")[-1] in EXTERN_BY_DESIGN
                                   or torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()))


def census(graphs, externs: bool = False) -> dict[str, CensusEntry]:
    """{op: CensusEntry} over `graphs` (CompiledGraphs), merged: the fallbacks, or with
    `externs` the extern-by-design calls; most frequent first."""
    found: dict[str, CensusEntry] = {}
    for cg in graphs:
        for buf in cg.graph.buffers:
            if not isinstance(buf, ExternKernel) or by_design(buf.op) != externs:
                continue
            entry = found.setdefault(op_name(buf.op), CensusEntry(op_name(buf.op)))
            entry.count += 1
            entry.reasons[buf.reason] += 1
            if cg.graph.name not in entry.graphs:
                entry.graphs.append(cg.graph.name)
    return dict(sorted(found.items(), key=lambda kv: (-kv[1].count, kv[0])))


def census_lines(graphs) -> list[str]:
    """Per graph: its fallbacks, then its externs; the lines `fallbacks` prints."""
    lines = []
    for cg in graphs:
        for title, externs in (("fallbacks (no lowering, or it declined)", False), ("externs by design", True)):
            entries = census([cg], externs)
            lines.append(f"graph {cg.graph.name}: {sum(e.count for e in entries.values())} {title}")
            lines += [f"  {e}" for e in entries.values()]
    return lines
