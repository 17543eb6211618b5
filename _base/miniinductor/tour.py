"""``python -m miniinductor tour``: one small model through every phase, each artifact explained.

A pre-norm MLP block (LayerNorm → Linear → tanh-GELU → Linear, plus the residual) is
compiled once with ``miniinductor.compare`` (eager and miniinductor, Inductor with
``--inductor``), its trace folder is written with ``ExplainResult.write_trace``, and each
phase's artifact is printed from that folder with one paragraph on what the phase did:
the FX graph, the ATen graph, the loop IR, the fused groups, the kernels, the wrapper,
the memory plan and the timings. The files stay in the folder for a closer look.

Inductor has no tour; its nearest is ``TORCH_COMPILE_DEBUG=1``, which writes the same kind
of artifacts to ``torch_compile_debug/`` without explaining them. The tour reads only the
public surface (``compare``, ``explain``'s result, the trace folder's files), so it shows
what a user can see; it leaves out the backward graph (it runs under ``torch.no_grad()``)
and Triton (see ``tutorials/09_triton_codegen.py``).
"""
from __future__ import annotations

import argparse
import inspect
import re
import textwrap
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from miniinductor.debug.compare import compare
from miniinductor.debug.explain import decision_lines


class TourBlock(nn.Module):
    """A pre-norm MLP block, the second half of a transformer layer."""

    def __init__(self, width: int = 32, hidden: int = 64):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):                       # x: [rows, width]
        h = self.fc1(self.ln(x))                # [rows, hidden]
        h = F.gelu(h, approximate="tanh")       # [rows, hidden]
        return x + self.fc2(h)                  # [rows, width]


def _between(text: str, start: str | None = None, stop: str | None = None) -> str:
    """The part of `text` from the line holding `start` up to the line holding `stop`
    (the whole text where a marker is missing)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if start and start in line), 0)
    last = next((i for i, line in enumerate(lines) if i > first and stop and stop in line), len(lines))
    return "\n".join(lines[first:last]).rstrip()


def _wrapper_without_kernels(source: str) -> str:
    """The wrapper with its embedded C++ (shown in the kernels section) cut out."""
    return re.sub(r"(CPP_SOURCE = r''')\n.*?\n(''')", r"\1 ... the C++ of the kernels section ... \2",
                  source, flags=re.S)


SECTIONS = [   # (title, trace file, paragraph)
    ("1. FX graph (Dynamo)", "fx_graph.py",
     "Dynamo ran forward() as Python bytecode and recorded every torch call on a tensor into an FX "
     "graph: one node per call, each with the source line it came from. Parameters became graph inputs "
     "(L_s_..._weight_), modules became calls of torch.nn.functional. This is the graph a torch.compile "
     "backend receives (miniinductor/__init__.py backend(); tutorial 01)."),
    ("2. ATen graph (AOTAutograd + decompositions)", "aten_graph.txt",
     "AOTAutograd traced the FX graph down to ATen and prims ops with fake tensors, and the "
     "decomposition table (capture/decompositions.py) broke layer_norm into var, sum, sub, rsqrt, mul "
     "and add, and linear into permute + addmm. Every node carries its shape and stride; the file lists "
     "the user source line of each node too. Inductor's twin is compile_fx's aot_autograd call (tutorial 02)."),
    ("3. Loop IR (lowering)", "ir_pre_fusion.txt",
     "GraphLowering (lowering/graph.py) ran each ATen node through a lowering that builds loop IR: a "
     "Pointwise or Reduction whose inner_fn computes one element with ops.load / ops.add / ... on SymPy "
     "indices. Views and broadcasts became index arithmetic, not copies; the matmuls stay ExternKernel "
     "calls into ATen. Each buffer says which ATen nodes it came from (tutorials 03-05)."),
    ("4. Fused groups (scheduler)", "schedule.txt",
     "The scheduler read every buffer's dependencies by running its inner_fn under a recording handler, "
     "dropped dead buffers, then fused pairs that share loops and data, the pairs saving most bytes "
     "first. The layer norm's reductions and its normalising pointwise became one loop nest; the matmuls "
     "cut the graph into pieces, since an extern call cannot be fused into (tutorial 07)."),
    ("5. Kernels (codegen)", "kernels.cpp",
     "Each fused group became one C++ function: the loop nest over its ranges, the inner_fn bodies "
     "inlined in turn (tmpN are CSE'd values), reductions as accumulators, intermediate buffers that no "
     "one else reads kept in registers. They are compiled with g++ -O3 -fopenmp and cached by a hash of "
     "their source (codegen/cpp.py, runtime/cpp_builder.py; tutorial 06)."),
    ("6. Wrapper", "output_code.py",
     "The wrapper is the Python module that runs the graph: call(args) allocates each buffer, launches "
     "the kernels and the extern ATen calls in schedule order and frees (del) each buffer after its last "
     "use. It is Inductor's output_code.py, and it is real: this file is what the compiled model called "
     "(codegen/wrapper.py; tutorial 06)."),
    ("7. Memory plan", "memory_plan.txt",
     "The memory plan walks the schedule step by step: the bytes live after each step, where each "
     "buffer is freed and which buffer reuses another's memory (same size and dtype, never growing the "
     "peak); the wrapper's '# in-place' lines are kernels writing their output over an input that dies "
     "there. The peak is compared with an estimate for eager running the ATen graph op by op "
     "(codegen/memory_planning.py; tutorial 08)."),
    ("8. Timings", None,
     "Finally compare() ran each backend on the same input: the first call includes capture, lowering, "
     "fusion, C++ compilation (or a cache hit) and one run; the median is over --repeats timed calls "
     "taken in turn. At this tiny size the Python wrapper and call overhead dominate, so eager may well "
     "win; benchmarks/bench_cpu.py measures sizes where bandwidth matters."),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=8, help="rows of the input x (default 8)")
    parser.add_argument("--width", type=int, default=32, help="model width, the last dim of x (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per backend (default 20)")
    parser.add_argument("--inductor", action="store_true", help="also compile and time the real Inductor")
    parser.add_argument("--trace", type=Path, default=Path("miniinductor_tour"), metavar="DIR",
                        help="where the artifacts are written (default ./miniinductor_tour)")
    parser.add_argument("--lines", type=int, default=60,
                        help="show at most this many lines of each artifact; 0 shows all (default 60)")


def _clip(text: str, limit: int, where: Path | None) -> str:
    lines = text.rstrip().splitlines()
    if limit <= 0 or len(lines) <= limit:
        return "\n".join(lines)
    more = f" (all of it in {where})" if where else ""
    return "\n".join(lines[:limit] + [f"... {len(lines) - limit} more lines{more}"])


def artifacts(result, comparison, folder: Path) -> dict[str, str]:
    """Section title → the artifact's text, read from the trace folder where it has a file."""
    read = {name: (folder / name).read_text() for _, name, _ in SECTIONS if name and name != "kernels.cpp"}
    kernels = "\n\n".join(f"// {k.name}: computes {', '.join(k.buffers)} from {', '.join(k.origins)}\n"
                          f"{k.source.strip()}" for k in result.kernels)
    texts = [_between(read["fx_graph.py"], "class GraphModule", "def example_inputs"),
             _between(read["aten_graph.txt"], None, "# node -> user source line"),
             read["ir_pre_fusion.txt"],
             read["schedule.txt"] + "\n" + "\n".join(decision_lines(result.decisions)),
             kernels,
             _wrapper_without_kernels(read["output_code.py"]),
             read["memory_plan.txt"],
             str(comparison)]
    return {title: text for (title, _, _), text in zip(SECTIONS, texts)}


def main(args: argparse.Namespace) -> int:
    torch.manual_seed(args.seed)
    model = TourBlock(args.width, 2 * args.width).eval()
    x = torch.randn(args.rows, args.width)
    print("miniinductor tour: one model through every phase of the compiler\n")
    print(f"The model, TourBlock(width={args.width}, hidden={2 * args.width}), on x of shape "
          f"[{args.rows}, {args.width}]:\n")
    print(inspect.getsource(TourBlock.forward).rstrip() + "\n")
    comparison = compare(model, x, repeats=args.repeats, inductor=args.inductor)
    mini = comparison["miniinductor"]
    if mini.error:
        print(f"miniinductor failed: {mini.error}")
        return 1
    result = comparison.explain
    folder = result.write_trace(args.trace)[0]
    for (title, name, paragraph), text in zip(SECTIONS, artifacts(result, comparison, folder).values()):
        print(f"== {title} " + "=" * max(0, 70 - len(title)))
        print(textwrap.fill(paragraph, 100) + "\n")
        print(_clip(text, args.lines, folder / name if name else None) + "\n")
    print(textwrap.fill(f"Every artifact is in {folder.resolve()}/ (the kernels with their prelude in "
                        "kernels.cpp, the fusion decisions in fusion_decisions.json); open report.html there "
                        "to see the phases side by side with the fusion graph. `python -m miniinductor "
                        "explain gpt2_block` does the same for a whole transformer block.", 100))
    try:
        torch.testing.assert_close(mini.output, comparison["eager"].output, rtol=1e-4, atol=1e-5)
        ok = True
    except AssertionError:
        ok = False
    print(f"max abs error vs eager: {mini.max_abs_error:.3e} ({'PASS' if ok else 'FAIL'})")
    return 0 if ok else 1
