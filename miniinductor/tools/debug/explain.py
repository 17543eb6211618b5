"""`miniinductor.explain(fn, *inputs)`: compile, run once, and return everything decided.

Mirrors nothing one-to-one in Inductor (whose closest tools are `TORCH_LOGS` and
`torch._dynamo.explain`): it gathers, for every graph compiled during the call, the
kernels (with the ATen ops each came from, the buffers it computes, its C++ or Triton source and
the bytes it moves), every fusion decision with its reason and score, and the memory plan.
The graphs are always compiled afresh (Dynamo's cache is reset first), so a cached compile
can never hide a decision. `kernel_lines` and `decision_lines` print its summary (the CLI's
explain, the demo and the tour).
"""
from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

import torch

from ...codegen.common import GeneratedKernel
from ...compile_fx import CompiledGraph, collect_compiled
from ...compile_fx import compile as mi_compile
from ...logs import plural
from .census import census
from .fusion_graph import build_fusion_graph, human_bytes
from .memory import eager_peak
from .report import render_report, write_report
from .sizes import describe_sizes
from .trace import write_trace


@dataclasses.dataclass
class ExplainResult:
    graphs: list[CompiledGraph]
    outputs: object

    @property
    def kernels(self) -> list[GeneratedKernel]:
        """Every graph's kernels, in order (each knows its graph, buffers, origins, source, bytes)."""
        return [k for cg in self.graphs for k in cg.kernels.values()]

    @property
    def fallbacks(self):
        """{op: CensusEntry (count, reasons, graphs)}: the ATen calls made because the op had no
        lowering or its lowering declined, merged over every graph (census.py; per graph:
        `census([cg])`)."""
        return census(self.graphs)

    @property
    def externs(self):
        """{op: CensusEntry}: the ATen calls that are the plan (convolutions, GEMMs, SDPA, rand...)."""
        return census(self.graphs, externs=True)

    @property
    def decisions(self):
        return [d for cg in self.graphs for d in cg.scheduler.decisions]

    @property
    def passes(self):
        """{graph name: [PassRecord]}: every pass, whether it ran on that graph and what it changed."""
        return {cg.graph.name: list(cg.passes or ()) for cg in self.graphs}

    @property
    def memory_plans(self):
        return [cg.plan for cg in self.graphs]

    def __str__(self):
        lines = []
        for cg in self.graphs:
            lines.append(f"== graph {cg.graph.name}: {plural(len(cg.kernels), 'kernel')}, "
                         f"{plural(len(cg.scheduler.nodes), 'node')} before fusion, wrapper {cg.path}")
            lines += [f"  {k}" for k in cg.kernels.values()]
            lines.append(f"  memory: planned peak {cg.plan.peak_bytes} bytes vs eager estimate {eager_peak(cg)}")
            lines += [f"  pass {r}" for r in cg.passes or () if r.ran]
        lines.append("== fusion decisions")
        lines += [f"  {d}" for d in self.decisions]
        return "\n".join(lines)

    # ------------------------------------------------------------------ pictures and files
    def _repr_html_(self) -> str:
        """Jupyter shows the result as the (compact) HTML report, fusion graph included."""
        return render_report(self.graphs, title="miniinductor.explain", compact=True, full_page=False)

    def write_report(self, path, **kwargs):
        """One self-contained HTML file for all graphs; kwargs go to `report.render_report`."""
        return write_report(self.graphs, path, **kwargs)

    def write_trace(self, folder):
        """The trace folder of each graph under `folder` (`0_forward/`, ...); returns their paths."""
        return [write_trace(cg, Path(folder) / f"{i}_{cg.graph.name}") for i, cg in enumerate(self.graphs)]

    def fusion_graph(self, index: int = 0):
        """The networkx fusion graph of graph `index` (see debug/fusion_graph.py)."""
        return build_fusion_graph(self.graphs[index])


def explain(fn, *example_inputs, **options) -> ExplainResult:
    """Compile `fn` afresh with `**options` and run it once. Each pass's before and after is
    kept for the report's pass viewer (`pass_snapshots=True`, unless `pass_snapshots=False`)."""
    options.setdefault("pass_snapshots", True)
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        outputs = mi_compile(fn, **options)(*example_inputs)
    return ExplainResult(graphs, outputs)


def kernel_lines(result) -> list[str]:
    """Per graph: nodes → kernels + extern calls, bytes, memory; then each kernel with the
    buffers it computes and the ATen ops they came from (the CLI's explain, demo and tour)."""
    lines = []
    for cg in result.graphs:
        n_ext = len(cg.scheduler.schedule) - len(cg.kernels)
        moved = human_bytes(sum(k.bytes_moved for k in cg.kernels.values()))
        peak = human_bytes(cg.plan.peak_bytes if cg.plan else 0)
        lines.append(f"graph {cg.graph.name}: {plural(len(cg.scheduler.nodes), 'node')} before fusion -> "
                     f"{plural(len(cg.kernels), 'kernel')} + {plural(n_ext, 'extern call')}; kernels move {moved}; "
                     f"planned peak {peak} vs eager {human_bytes(eager_peak(cg))}")
        if cg.graph.sizevars.symbolic:   # sizes (and so bytes) are at the traced values
            lines += [f"  {line}" for line in describe_sizes(cg.graph.sizevars)]
        for k in cg.kernels.values():
            origins = ", ".join(k.origins) or "?"
            lines.append(f"  {k.name}: {k.computes()} <- {origins} ({human_bytes(k.bytes_moved)})")
    return lines


def decision_lines(decisions, limit: int = 16) -> list[str]:
    """The fusion count, then every decision on its own line; past `limit` decisions, a
    count per kind of reason instead (`FusionDecision.kind`: "7 vertical, 1 horizontal, 1 combo";
    the HTML report lists them all)."""
    fused = sum(d.fused for d in decisions)
    lines = [f"fusion: {plural(fused, 'pair')} fused, {len(decisions) - fused} not fused"]
    if len(decisions) <= limit:
        return lines + [f"  {d}" for d in decisions]
    for verdict in (True, False):
        kinds = collections.Counter(d.kind for d in decisions if d.fused == verdict)
        if kinds:
            lines.append(f"  {'fused' if verdict else 'not fused'}: "
                         + ", ".join(f"{n} {kind}" for kind, n in kinds.most_common()))
    return lines + [f"  ({len(decisions)} decisions: each is listed in the HTML report)"]
