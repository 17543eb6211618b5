# %% [markdown]
# # Tutorial 10: Fusion graphs and the report
#
# In this tutorial you will learn:
#
# * how to read a **fusion graph**: `ExplainResult.fusion_graph()` is a networkx graph of
#   buffers and extern calls, one cluster per kernel, and every edge says whether a value
#   stayed inside a kernel or made a round trip through memory;
# * how to **draw** it (`render_fusion_graph`: DOT always, SVG and PNG when graphviz's
#   `dot` is installed) and how the picture changes when fusion is turned off;
# * what the **trace folder** holds (`write_trace`), file by file, and how to read it back
#   from code: the fusion decisions as JSON, the generated wrapper as Python;
# * how to read the **HTML report** (`write_report`): the phases side by side, the kernels,
#   the fusion graph, the why-(not)-fused table, the memory timeline, the timings;
# * how `compare()` puts miniinductor beside eager and the real Inductor, and how its table
#   becomes the report's timings.
#
# Files: `miniinductor/tools/debug/fusion_graph.py`, `miniinductor/tools/debug/report.py`,
# `miniinductor/tools/debug/trace.py`, `miniinductor/tools/debug/compare.py`,
# `miniinductor/tools/debug/explain.py`.

# %%
import json
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

import miniinductor
from miniinductor.tools.debug.compare import compare
from miniinductor.tools.debug.fusion_graph import dot_available, render_fusion_graph

torch.manual_seed(0)
out_dir = Path(tempfile.mkdtemp(prefix="miniinductor_tutorial10_"))

# %% [markdown]
# ## 1. A small model with something to fuse
#
# A residual block in miniature: a matmul (an extern ATen call: nothing fuses into it),
# then bias + GELU, a residual add and a layer norm. Eager PyTorch runs each op as its own
# kernel and writes every intermediate to memory; miniinductor should need far fewer kernels.

# %%


def block(x, w, b, gamma, beta):
    h = F.gelu(x @ w + b)                       # [N, C]
    return F.layer_norm(x + h, (x.shape[-1],), gamma, beta)


N, C = 64, 32
args = [torch.randn(N, C), torch.randn(C, C) / C**0.5, torch.randn(C), torch.randn(C), torch.randn(C)]
result = miniinductor.explain(block, *args)
torch.testing.assert_close(result.outputs, block(*args), rtol=1e-4, atol=1e-5)
for kernel in result.kernels:
    print(kernel)

# %% [markdown]
# ## 2. The fusion graph as data
#
# `result.fusion_graph()` builds a `networkx.DiGraph` of the first compiled graph (pass an
# index for others). Nodes are graph **inputs**, computed **buffers** and **extern** calls;
# each buffer knows the kernel that computes it (`kernel`), its ATen `origins`, its layout
# and size, and whether it is kept in registers (`removed`) or returned (`output`).
#
# Edges carry the story of fusion:
#
# * `fused`: producer and consumer are in the same kernel, the value never leaves it;
# * `memory`: written by one kernel (or extern call), read back by another;
# * `input`: a load of a graph input, which no schedule can avoid.

# %%
G = result.fusion_graph()
print("kernels:", G.graph["kernels"])
for name, data in G.nodes(data=True):
    print(f"  {name:8s} {data['kind']:7s} kernel={data['kernel']} {data['layout']} "
          f"removed={data['removed']} output={data['output']}")
edge_kinds = {}
for a, b, data in G.edges(data=True):
    edge_kinds.setdefault(data["kind"], []).append(f"{a}->{b}")
print(edge_kinds)

# Every kernel the compiler generated is one cluster of the graph.
assert set(G.graph["kernels"]) == {k.name for k in result.kernels}
assert edge_kinds.get("fused"), "the layer norm's buffers should share a kernel"

# %% [markdown]
# A fused edge saves a round trip through memory. What still crosses memory are the
# `memory` edges, the dashed red ones of the picture: here only the matmul's result,
# which an extern call must write before any kernel can read it.

# %%
for a, b, d in G.edges(data=True):
    if d["kind"] == "memory":
        print(f"  {a} -> {b}: {d['nbytes']} bytes through memory ({G.nodes[a]['kind']} -> {G.nodes[b]['kind']})")

# %% [markdown]
# ## 3. Drawing it
#
# `render_fusion_graph(graph_or_compiled_graph, folder)` writes `fusion_graph.dot` always
# and `.svg` / `.png` when graphviz's `dot` program is installed. Without it, the returned
# object's `message` says how to install graphviz, and the DOT source can be pasted into
# any graphviz viewer.
#
# Compile the same function with `fusion=False` and draw both: without fusion every
# buffer is its own cluster and every edge between buffers is a red memory round trip.

# %%
unfused = miniinductor.explain(block, *args, fusion=False)
torch.testing.assert_close(unfused.outputs, block(*args), rtol=1e-4, atol=1e-5)
G_unfused = unfused.fusion_graph()
assert not any(d["kind"] == "fused" for _, _, d in G_unfused.edges(data=True))
print(f"kernels: fused {len(result.kernels)}, unfused {len(unfused.kernels)}")
assert len(unfused.kernels) > len(result.kernels)

for label, graph in (("fused", G), ("unfused", G_unfused)):
    drawn = render_fusion_graph(graph, out_dir / "pictures", name=label, quiet=True)
    print(label, "->", drawn.svg or drawn.dot, "" if drawn.ok else f"({drawn.message})")
    assert drawn.dot.read_text().startswith("digraph")
    if dot_available():
        svg = drawn.svg.read_text()
        assert all(k in svg for k in graph.graph["kernels"]), "every kernel is named in the SVG"

# %% [markdown]
# ## 4. The trace folder
#
# `result.write_trace(folder)` writes one subfolder per compiled graph: `0_inference/`
# here, since no input requires a gradient (`0_forward/` and `1_backward/` when
# AOTAutograd also builds a backward graph). It is what `MINIINDUCTOR_TRACE=<folder>`
# writes for every compile, in the spirit of Inductor's `TORCH_COMPILE_DEBUG=1`. Each
# file is one artifact, readable on its own: `fx_graph.py` and `aten_graph.py` run as
# scripts, `fusion_decisions.json` and `memory_plan.json` are data, `output_code.py` is
# the generated wrapper.

# %%
folders = result.write_trace(out_dir / "trace")
trace = folders[0]
for path in sorted(trace.iterdir()):
    print(f"  {path.name:24s} {path.stat().st_size:7d} bytes")

decisions = json.loads((trace / "fusion_decisions.json").read_text())["decisions"]
for d in decisions:
    print(f"  {d['node1']} + {d['node2']}: {'fused' if d['fused'] else 'not fused'} ({d['reason']})")
assert len(decisions) == len(result.decisions)
compile((trace / "output_code.py").read_text(), "output_code.py", "exec")   # valid Python

# %% [markdown]
# ## 5. The HTML report
#
# `result.write_report(path)` writes one self-contained page (open it in any browser, no
# network needed). From top to bottom:
#
# 1. **Summary**: per graph, nodes before fusion, kernels, extern calls, bytes moved, the
#    planned memory peak and eager's.
# 2. **Phases, side by side**: FX graph → ATen graph → loop IR → fused kernels → generated
#    code. Hover a kernel, or any line, and its source ops, IR buffers and code light up in
#    every column; click to pin it.
# 3. **Kernels**: each kernel, the buffers it computes, the ATen ops they came from, the
#    bytes it moves.
# 4. **Fusion graph**: the picture of section 3, its nodes linking to the IR.
# 5. **Why (not) fused**: every pair the scheduler considered, with the reason and score.
# 6. **Memory timeline**: live bytes after each step of the wrapper against eager's peak.
# 7. **Timings**: whatever you pass as `timings=`, e.g. `compare()`'s table (section 6).
#
# In Jupyter, `result` alone shows the compact version of the same page (`_repr_html_`).

# %%
report = result.write_report(out_dir / "report.html", title="tutorial 10: block")
page = report.read_text()
for section in ("summary", "g0-phases", "g0-kernels", "g0-fusion-graph", "g0-decisions", "g0-memory",
                "timings"):
    assert f'id="{section}"' in page, section
assert "<svg" in page or "DOT source" in page   # the fusion graph, drawn or as DOT text
assert "<div" in result._repr_html_()
print(f"report: {report} ({len(page) // 1024} KiB)")

# %% [markdown]
# ## 6. Side by side with the real Inductor
#
# `compare(fn, *inputs)` runs eager, miniinductor and `torch.compile(backend="inductor")`
# and returns one row per backend: the max abs error against eager, the kernels generated,
# the bytes those kernels move (extern calls excluded on both sides), the first call
# (compile + run) and the median time of a call. If Inductor fails here, its row says why
# and the tutorial goes on. On a tiny input, times mostly measure per-call overhead.

# %%
comparison = compare(block, *args, repeats=10)
print(comparison)
mini = comparison["miniinductor"]
assert mini.max_abs_error < 1e-4 and mini.kernels == len(result.kernels)
torch.testing.assert_close(mini.output, block(*args), rtol=1e-4, atol=1e-5)

# The table goes into the report's timings section:
report = comparison.write_report(out_dir / "report_with_timings.html", title="tutorial 10: compare")
assert "median ms" in report.read_text()
print("report with timings:", report)

# %% [markdown]
# ## Where next
#
# * From the shell: `python -m miniinductor explain path/file.py:function` does all of this
#   for a function of yours (its inputs from an `example_inputs()` function in the same
#   file, or `--shape 8,64`), writing `./miniinductor_trace/` and
#   `./miniinductor_explain.html`; `--compare` adds the table.
# * `MINIINDUCTOR_TRACE=folder python train.py` writes a trace for every graph compiled.

# %%
print("tutorial 10 done")
