"""`miniinductor.explain(fn, *inputs)`: compile, run once, and return everything decided.

Mirrors nothing one-to-one in Inductor (whose closest tools are `TORCH_LOGS` and
`torch._dynamo.explain`): it gathers, for every graph compiled during the call, the
kernels (with the ATen ops each came from, the buffers it computes, its C++ or Triton source and
the bytes it moves), every fusion decision with its reason and score, and the memory plan.
The graphs are always compiled afresh (Dynamo's cache is reset first), so a cached compile
can never hide a decision.
"""
from __future__ import annotations

import dataclasses

import torch

from ..compile_fx import CompiledGraph, collect_compiled


@dataclasses.dataclass
class KernelInfo:
    graph: str
    name: str
    buffers: list[str]
    origins: list[str]           # the ATen FX nodes the kernel's buffers were lowered from
    source: str
    bytes_moved: int

    def __str__(self):
        return (f"{self.graph}.{self.name}: computes {', '.join(self.buffers)} from "
                f"{', '.join(self.origins)}; moves {self.bytes_moved} bytes")


@dataclasses.dataclass
class ExplainResult:
    graphs: list[CompiledGraph]
    outputs: object

    @property
    def kernels(self) -> list[KernelInfo]:
        infos = []
        for cg in self.graphs:
            for group in cg.fused_groups():
                k = cg.kernels[group.kernel_name]
                infos.append(KernelInfo(cg.graph.name, k.name, group.get_names(), k.origins, k.source, k.bytes_moved))
        return infos

    @property
    def decisions(self):
        return [d for cg in self.graphs for d in cg.scheduler.decisions]

    @property
    def memory_plans(self):
        return [cg.plan for cg in self.graphs]

    def __str__(self):
        lines = []
        for cg in self.graphs:
            lines.append(f"== graph {cg.graph.name}: {len(cg.kernels)} kernels, "
                         f"{len(cg.scheduler.nodes)} nodes before fusion, wrapper {cg.path}")
            lines += [f"  {k}" for k in self.kernels if k.graph == cg.graph.name]
            lines.append(f"  memory: planned peak {cg.plan.peak_bytes} bytes vs eager estimate {cg.eager_peak}")
        lines.append("== fusion decisions")
        lines += [f"  {d}" for d in self.decisions]
        return "\n".join(lines)

    # ------------------------------------------------------------------ pictures and files
    def _repr_html_(self) -> str:
        """Jupyter shows the result as the (compact) HTML report, fusion graph included."""
        from .report import render_report
        return render_report(self.graphs, title="miniinductor.explain", compact=True, full_page=False)

    def write_report(self, path, **kwargs):
        """One self-contained HTML file for all graphs; kwargs go to `report.render_report`."""
        from .report import write_report
        return write_report(self.graphs, path, **kwargs)

    def write_trace(self, folder):
        """The trace folder of each graph under `folder` (`0_forward/`, ...); returns their paths."""
        import pathlib

        from .trace import write_trace
        return [write_trace(cg, pathlib.Path(folder) / f"{i}_{cg.graph.name}") for i, cg in enumerate(self.graphs)]

    def fusion_graph(self, index: int = 0):
        """The networkx fusion graph of graph `index` (see debug/fusion_graph.py)."""
        from .fusion_graph import build_fusion_graph
        return build_fusion_graph(self.graphs[index])


def explain(fn, *example_inputs, **options) -> ExplainResult:
    from ..compile_fx import compile as mi_compile

    torch._dynamo.reset()
    with collect_compiled() as graphs:
        outputs = mi_compile(fn, **options)(*example_inputs)
    return ExplainResult(graphs, outputs)
