# %% [markdown]
# # Tutorial 15: Reading a compile: provenance, tlparse, the cache log, the pass viewer
#
# In this tutorial you will learn:
#
# * how to answer "**which line of my code became this kernel?**": every kernel maps to the
#   loop-IR buffers it computes, the ATen nodes they were lowered from, the Dynamo nodes
#   those came from, and the user's source lines (`explain(...)` + `provenance_lines`, and
#   `python -m miniinductor explain MODEL --provenance` on the command line);
# * how to read a miniinductor compile with **tlparse**, the tool `torch.compile` users
#   already run: `TORCH_TRACE=dir` records our post-grad graph, our generated code and the
#   provenance mappings beside Dynamo's graphs, under the artifact names Inductor uses;
# * why "**the first step is slow**" only once: the compiled-graph cache, what its key holds,
#   and what the `cache` log says on a hit, a miss (and why) and a corrupted entry;
# * how to **step through the passes** of one compile: each pass's graph or IR before and
#   after, and what it changed, as the HTML report's pass viewer shows it.
#
# Files: `miniinductor/tools/debug/provenance.py`, `miniinductor/tools/debug/structured_trace.py`,
# `miniinductor/ext/fx_graph_cache/`, `miniinductor/tools/debug/pass_viewer.py`,
# `miniinductor/passes.py` (`run_stage`, the `pass_snapshots` option).

# %%
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

import miniinductor
from miniinductor.tools.debug.provenance import GraphProvenance, provenance_lines

torch.manual_seed(0)
out_dir = Path(tempfile.mkdtemp(prefix="miniinductor_tutorial15_"))
ROOT = Path(miniinductor.__file__).resolve().parents[1]

# %% [markdown]
# ## 1. Which line became this kernel?
#
# A small MLP with a layer norm, written here so that the source lines point into this file.
# `explain` compiles it and keeps every artifact; `GraphProvenance` walks back from each
# kernel: its `origins` (the ATen nodes lowered into it, inlined producers too), each ATen
# node's `stack_trace` (AOTAutograd copies Dynamo's onto the ATen nodes, and onto the
# backward's), and the innermost frame of that trace, the user's line.

# %%


def mlp(x, w1, b1, w2, gamma, beta):
    h = F.gelu(x @ w1 + b1)                              # [N, 4C]
    y = x + h @ w2                                       # [N, C]
    return F.layer_norm(y, (y.shape[-1],), gamma, beta)  # [N, C]


N, C = 32, 16
args = [torch.randn(N, C), torch.randn(C, 4 * C) / C**0.5, torch.randn(4 * C),
        torch.randn(4 * C, C) / (2 * C**0.5), torch.randn(C), torch.randn(C)]
result = miniinductor.explain(mlp, *args)
torch.testing.assert_close(result.outputs, mlp(*args), rtol=1e-4, atol=1e-5)
print("\n".join(provenance_lines(result.graphs)))

# %% [markdown]
# Each kernel lists the lines of `mlp` it came from: the bias + GELU kernel points at the
# first line, the residual add and the layer norm at the last two. A kernel's line is where
# the op was *called*: code inside torch (a `nn.LayerNorm`'s own forward) has no frame of
# the user's, so its kernels point at the line that called the module.

# %%
prov = GraphProvenance(result.graphs[0])
this_file = Path(__file__).name if "__file__" in globals() else "15_reading_a_compile.py"
for k in prov.kernels:
    print(f"{k.kind:6s} {k.name:45s} ATen {k.post_grad} <- Dynamo {k.pre_grad}")
kernels = [k for k in prov.kernels if k.kind == "kernel"]
assert kernels and all(k.source_lines for k in kernels), "every kernel names a user line"
assert all(s.file.endswith(this_file) for k in kernels for s in k.source_lines)
gelu = next(k for k in kernels if any("gelu" in n for n in k.post_grad))
assert any("F.gelu" in s.code for s in gelu.source_lines)

# %% [markdown]
# ## 2. The same compile in tlparse
#
# `TORCH_TRACE=dir` makes PyTorch write a structured log of every compile: Dynamo's graphs,
# AOTAutograd's, and whatever the backend logs through `torch._logging.trace_structured`.
# Under miniinductor that is, per graph, the artifacts Inductor logs, with the same names and
# payloads, so that tlparse's pages work unchanged:
#
# * `before_pre_grad_graph` (Dynamo's graph) and `inductor_post_grad_graph` (the ATen graph we lower);
# * `inductor_output_code`: our generated wrapper with its kernels;
# * `inductor_provenance_tracking_node_mappings`: kernels ↔ post-grad nodes ↔ pre-grad nodes,
#   which tlparse's `--inductor-provenance` turns into its three linked panels;
#
# and three of our own: `miniinductor_provenance` (every level, with the source lines),
# `miniinductor_fusion_decisions` and `miniinductor_memory_plan`. The variable is read when
# torch starts, so the compile runs in a process of its own.

# %%
TRACED = """
import torch, torch.nn.functional as F, miniinductor

def mlp(x, w1, b1, w2, gamma, beta):
    h = F.gelu(x @ w1 + b1)
    y = x + h @ w2
    return F.layer_norm(y, (y.shape[-1],), gamma, beta)

torch.manual_seed(0)
N, C = 32, 16
args = [torch.randn(N, C), torch.randn(C, 4 * C), torch.randn(4 * C), torch.randn(4 * C, C), torch.randn(C), torch.randn(C)]
torch.testing.assert_close(miniinductor.compile(mlp)(*args), mlp(*args), rtol=1e-4, atol=1e-4)
"""
script = out_dir / "traced.py"
script.write_text(TRACED)
env = {**os.environ, "TORCH_TRACE": str(out_dir / "trace"),
       "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
subprocess.run([sys.executable, str(script)], env=env, check=True, cwd=out_dir)
(log,) = (out_dir / "trace").glob("*.log")


def entries(log: Path) -> list[tuple[dict, str]]:
    """The log's records: each a glog-style line whose JSON header follows "] ", then its
    payload on the tab-indented lines below it."""
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("\t") and out:
            out[-1][1].append(line[1:])
        elif "] {" in line:
            out.append((json.loads(line.split("] ", 1)[1]), []))
    return [(header, "\n".join(payload)) for header, payload in out]


records = entries(log)
names = [h["artifact"]["name"] if "artifact" in h else next(iter(h)) for h, _ in records]
ours = [n for n in names if n.startswith(("inductor", "before_pre_grad", "miniinductor"))]
print(f"{log.name}: {len(records)} records; the compiler's: {ours}")
for name in ("before_pre_grad_graph", "inductor_post_grad_graph", "inductor_output_code",
             "inductor_provenance_tracking_node_mappings", "miniinductor_fusion_decisions"):
    assert name in names, name
mappings = json.loads(next(p for h, p in records
                           if h.get("artifact", {}).get("name") == "inductor_provenance_tracking_node_mappings"))
code = next(p for h, p in records if "inductor_output_code" in h)
for kernel, nodes in mappings["cppCodeToPost"].items():
    print(f"{kernel:45s} <- {nodes}")
    assert kernel.strip() in code   # each mapped kernel is in the logged output code

# %% [markdown]
# tlparse (`pip install tlparse`, in our dev extra) turns the log into HTML: an index per
# compile id listing every artifact above, the output code highlighted, and with
# `--inductor-provenance` a page with the pre-grad graph, the post-grad graph and the
# generated code side by side, where clicking a kernel's line lights up its ATen and Dynamo
# nodes. tlparse 0.4 takes the log file itself, not the folder.

# %%
tlparse = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")
if Path(tlparse).exists():
    subprocess.run([tlparse, str(log), "-o", str(out_dir / "tlparse"), "--overwrite", "--no-browser",
                    "--inductor-provenance"], check=True, capture_output=True)
    index = (out_dir / "tlparse" / "index.html").read_text()
    assert "inductor_output_code" in index and "provenance_tracking" in index
    print("tlparse wrote", out_dir / "tlparse" / "index.html")
else:
    print("tlparse is not installed (pip install tlparse): the log above is what it would read")

# %% [markdown]
# ## 3. Why is the first step slow, and only the first?
#
# The first call of a compiled model runs Dynamo (tracing the Python), AOTAutograd (the ATen
# graphs), then our compile: lowering, scheduling, code generation, and the C++ compiler (or
# Triton's). The extension `fx_graph_cache` keeps each compiled graph on disk, keyed by
# everything that could change the code: the ATen graph, every input's size, stride, dtype
# and device, every option, and the versions of miniinductor (a hash of its source), torch,
# triton and the C++ compiler. A second process that compiles the same graph loads the
# generated wrapper instead: no lowering, no scheduling, no code generation, and the kernels'
# shared library is already built. A second level, keyed by Dynamo's graph (its code, its
# inputs, grad mode, ...), skips AOTAutograd too, as Inductor's AOTAutogradCache does: for an
# inference graph whose AOTAutograd wrapper does nothing (no input mutated, no output aliasing
# an input...), it records which entry the inference graph has, so that a hit loads it
# without tracing Dynamo's graph into ATen at all. Only Dynamo is left.
#
# `MINIINDUCTOR_LOGS=cache` says what happened at each level: `capture` for Dynamo's graph,
# `inference` (or `forward`, `backward`) for an ATen graph: `miss` (and what differs from
# the nearest entry of the same graph), `stored`, `hit`, `bypass` and why (a tool that wants
# the compile's artifacts, such as `explain`, always compiles; training bypasses the capture
# level), `rebuilt` (an entry that fails its checksum is never run). The option
# `fx_graph_cache=False` or `MINIINDUCTOR_FX_GRAPH_CACHE=0` turns both off.

# %%
CACHED = """
import sys, time, torch, miniinductor
from miniinductor.tools.models import GPT2Block
torch.manual_seed(0)
block, x = GPT2Block(64, 4, max_seq=32).eval(), torch.randn(2, 32, 64)
start = time.perf_counter()
with torch.no_grad():
    out = miniinductor.compile(block, fusion=sys.argv[1] == "fused")(x)
    torch.testing.assert_close(out, block(x), rtol=1e-4, atol=1e-5)
print(f"first call {time.perf_counter() - start:.2f} s")
torch.save(out, sys.argv[2])
"""
(out_dir / "cached.py").write_text(CACHED)
cache_env = {**env, "MINIINDUCTOR_CACHE_DIR": str(out_dir / "cache"), "MINIINDUCTOR_FX_GRAPH_CACHE": "1",
             "MINIINDUCTOR_LOGS": "cache"}
cache_env.pop("TORCH_TRACE")


def run_cached(fusion: str, name: str) -> tuple[str, torch.Tensor]:
    """One fresh process: its first-call time and cache log, and its output."""
    run = subprocess.run([sys.executable, str(out_dir / "cached.py"), fusion, str(out_dir / name)],
                         env=cache_env, cwd=out_dir, capture_output=True, text=True, check=True)
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "first call" in ln or "cache]" in ln]
    print(f"--- {name} ({fusion})\n" + "\n".join(ln[:150] for ln in lines))
    return "\n".join(lines), torch.load(out_dir / name)


cold_log, cold = run_cached("fused", "cold.pt")
warm_log, warm = run_cached("fused", "warm.pt")
assert "miss capture" in cold_log and "miss inference" in cold_log
assert "hit capture" in warm_log and "hit inference" in warm_log   # AOTAutograd skipped, the entry loaded
assert torch.equal(cold, warm)           # the same kernels: the same bits
other_log, _ = run_cached("unfused", "unfused.pt")
assert "miss capture: option fusion differs" in other_log and "miss inference: option fusion differs" in other_log

stored = Path(re.search(r"stored inference at (\S+)", cold_log).group(1))
(entry,) = stored.parent.glob(stored.name + "*")   # the cold run's entry
entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])   # a crash mid-write, say
rebuilt_log, rebuilt = run_cached("fused", "rebuilt.pt")
# the capture-level entry names a broken entry: both levels rebuild theirs
assert "rebuilt capture" in rebuilt_log and "rebuilt inference" in rebuilt_log and torch.equal(rebuilt, cold)

# %% [markdown]
# `benchmarks/compile_cache.py` measures the same on the demo's block, median of several
# runs, with where the warm time goes (docs/benchmarks.md has the figures).

# %% [markdown]
# ## 4. Step through the passes
#
# A compile is a list of passes (`python -m miniinductor passes`), each `run(obj, ctx)` on its
# stage's object: the ATen graph, the loop IR, the scheduler, the kernels, the wrapper. With
# the option `pass_snapshots` (on in `explain` and the report, off elsewhere: printing every
# object twice per pass costs compile time), `run_stage` prints the stage's object before and
# after each pass into its `PassRecord`. A pass that changed something has a non-empty diff.
# The report's pass viewer shows the same records: the pass list on the left, the diff
# (or the whole before/after) on the right; `j`/`k` step, `n`/`p` jump between passes that
# changed something, `d`/`b`/`a` switch between diff, before and after.

# %%
from miniinductor.tools.debug.pass_viewer import diff_lines, pass_records, state_of  # noqa: E402

cg = result.graphs[0]   # explain() compiled with pass_snapshots on
for record in pass_records(cg):
    print(f"{record.stage:11s} {record.name:28s} {state_of(record):9s} {record.change}")
changed = [r for r in pass_records(cg) if state_of(r) == "changed"]
assert {"lower", "fuse", "generate_kernels"} <= {r.name for r in changed}

fuse = next(r for r in changed if r.name == "fuse")
print("\nwhat `fuse` changed in the scheduler:")
for kind, line in diff_lines(fuse.before, fuse.after):
    print(("+ " if kind == "add" else "- " if kind == "del" else "  ") + line[1:] if kind != "hunk" else line)
assert any(kind == "add" for kind, _ in diff_lines(fuse.before, fuse.after))

report = result.write_report(out_dir / "report.html")
assert "pv-diff" in report.read_text()
print("the report, with its pass viewer:", report)
print("tutorial 15 done")
