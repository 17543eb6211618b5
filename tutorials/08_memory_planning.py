# %% [markdown]
# # Tutorial 8: Memory planning
#
# In this tutorial you will learn:
#
# * how the wrapper's **memory plan** is made: the steps of `call` (kernel launches and
#   extern ATen calls), the **lifetime** of every buffer, and frees at last use;
# * how a dead buffer is **reused** by a later allocation of the same size and dtype
#   (`buf7 = reinterpret(buf3, ...); del buf3  # reuse`) and which buffers never are
#   (graph inputs, outputs, inputs of an extern call whose result may alias them);
# * how the plan's **peak** is estimated and compared with an estimate of what eager
#   PyTorch would hold running the same ATen graph op by op;
# * what all this looks like on a real training step: a GPT-2 block's forward and
#   backward graphs.
#
# Files: `miniinductor/codegen/memory_planning.py` (MemoryPlan),
# `miniinductor/codegen/wrapper.py` (the lines it writes), `miniinductor/compile_fx.py`
# (`CompiledGraph.plan`), `miniinductor/tools/debug/memory.py` (`eager_peak`).

# %%
import re

import torch

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.tools.debug.memory import eager_peak
from miniinductor.tools.models import GPT2Block

torch.manual_seed(0)

# %% [markdown]
# ## 1. A graph with buffers to recycle
#
# Three matmuls with a pointwise op before each and one at the end. The matmuls are
# extern calls, so nothing fuses across them: each pointwise op is a kernel that writes a
# 16 x 16 buffer, and each such buffer is dead as soon as the next matmul has read it.

# %%


def mm_chain(x, w):
    a = x.sin() @ w
    b = a.cos() @ w
    c = b.exp() @ w
    return c.tanh()


x, w = torch.randn(16, 16), torch.randn(16, 16)
result = miniinductor.explain(mm_chain, x, w)
torch.testing.assert_close(result.outputs, mm_chain(x, w), rtol=1e-4, atol=1e-4)
(cg,) = result.graphs
plan = cg.plan
print(cg.scheduler)

# %% [markdown]
# ## 2. Steps and lifetimes
#
# The plan sees `call` as a list of **steps**, one per kernel launch or extern call, each
# with the buffers it reads and defines. A buffer's **lifetime** `(first, last)` runs
# from the step that defines it (or the first that reads it, for a graph input) to the
# last step that reads it. `plan.lifetimes` holds them; here as a chart, one column per
# step:

# %%
labels = [s.label for s in plan.steps]
print(" " * 8 + " ".join(f"{k:>2}" for k in range(len(labels))))
for name, (first, last) in sorted(plan.lifetimes.items(), key=lambda kv: (kv[1], kv[0])):
    row = " ".join(" #" if first <= k <= last else " ." for k in range(len(labels)))
    print(f"{name:>7} {row}")
for k, label in enumerate(labels):
    print(f"  step {k}: {label}")

# %% [markdown]
# ## 3. Frees and reuse
#
# Walking the steps in order, the planner keeps a running count of live bytes:
#
# * first it plans as if every buffer were freed right after its last use: that
#   timeline's peak is the budget;
# * then an allocation may take the memory of a dead buffer with the same key -- device,
#   dtype and storage size (the new buffer views that memory with its own sizes and
#   strides) -- but only if keeping the dead buffer alive until then never lifts the
#   timeline above that budget; buffers we allocated ourselves and fresh extern results
#   (`mm`) qualify, graph inputs and results of view-like externs do not;
# * a kernel may even write its output **in place** over an input that dies in it,
#   when it reads that input only at the index it writes (`buf2 = buf1  # in-place`);
# * a dead buffer nobody takes is freed at the step where it died.
#
# `str(plan)` shows the result, step by step: the live bytes after the step, the reuses
# and the frees.

# %%
print(plan)
inplace = {out: src for step in plan.steps for out, src in step.inplace.items()}
print("\nreuse (new buffer <- dead buffer):", plan.reuse)
print("in place (output <- dying input):", inplace)
assert len(plan.reuse) + len(inplace) >= 2

# %% [markdown]
# And this is what the wrapper does with it. A reuse becomes one line: the new name is
# bound to the old memory, viewed with the new size and stride, and the old name is
# dropped (`# reuse`). A free is a `del` right after the buffer's last use, so PyTorch's
# allocator gets the memory back at once:

# %%
call_src = cg.wrapper_source[cg.wrapper_source.index("def call"):]
print(call_src)
reuse_lines = [line.strip() for line in call_src.splitlines() if line.rstrip().endswith("# reuse")]
assert len(reuse_lines) == len(plan.reuse)
for new, old in plan.reuse.items():
    assert any(line.startswith(f"{new} = reinterpret({old},") for line in reuse_lines)
assert re.search(r"^\s*del buf\d+", call_src, re.M)

# %% [markdown]
# The rules that keep reuse safe:
#
# * a buffer is reused only after its last use (so the C++ kernels, whose pointers are
#   `__restrict__`, never see an input and an output sharing memory);
# * graph **inputs** are never pooled: the caller owns them;
# * **outputs** are never pooled: they must outlive `call`;
# * buffers handed to an extern call whose schema says its result may alias an input
#   (a view op that fell back to ATen) are not pooled either: a view of them may still
#   be alive.

# %%
outputs = set(cg.graph.output_names())
inputs = set(cg.graph.graph_input_names)
print("outputs:", sorted(outputs), " inputs:", sorted(inputs))
for new, old in plan.reuse.items():
    assert old not in outputs and old not in inputs and new not in inputs
    assert plan.lifetimes[old][1] < plan.lifetimes[new][0]

# %% [markdown]
# Reused memory is not cleared: a kernel overwrites all of it. Running the compiled
# function again with new inputs checks that no stale value leaks from one call (or one
# buffer) into another:

# %%
compiled_chain = miniinductor.compile(mm_chain)
for _ in range(3):
    x2, w2 = torch.randn(16, 16), torch.randn(16, 16)
    torch.testing.assert_close(compiled_chain(x2, w2), mm_chain(x2, w2), rtol=1e-4, atol=1e-4)
print("three runs with new inputs match eager")

# %% [markdown]
# ## 4. The peak, against eager's
#
# `plan.timeline[k]` is the number of bytes live while step `k` runs: our intermediate
# buffers, and the graph inputs that `call` frees. Parameters, user inputs and incoming
# gradients are the caller's, and not counted; but a backward graph's saved activations
# are handed over to it, live from the start and die at their last use, so they count
# (without them, a dead buffer held for a reuse late in the backward looked free while
# the activations still filled memory). `plan.peak_bytes` is its maximum.
# `eager_peak(compiled)` (tools/debug/memory.py) estimates the same for eager PyTorch: it
# replays the ATen graph op by op, each op allocating its outputs and each tensor freed
# after its last user (a view keeps its base alive).
#
# Fusion helps here as much as reuse does: an intermediate that lives in registers
# inside a fused kernel is never allocated at all.

# %%
print(f"mm chain: planned peak {plan.peak_bytes} bytes, eager estimate {eager_peak(cg)} bytes")
assert plan.peak_bytes <= eager_peak(cg)

# %% [markdown]
# ## 5. A GPT-2 block training step
#
# A training step compiles two graphs (tutorial 2): the forward, which also returns the
# activations saved for the backward, and the backward. `collect_compiled()` collects
# every `CompiledGraph` compiled inside the `with` block. We run one step, compare the
# output and every gradient with eager, and look at both plans.

# %%
block = GPT2Block(d_model=64, n_head=4).train()
x = torch.randn(2, 16, 64, requires_grad=True)
x_ref = x.detach().clone().requires_grad_(True)
grad_out = torch.randn(2, 16, 64)

compiled_block = miniinductor.compile(block)
with collect_compiled() as graphs:
    out = compiled_block(x)
    out.backward(grad_out)
grads = {name: p.grad.clone() for name, p in block.named_parameters()}

block.zero_grad()
ref = block(x_ref)
ref.backward(grad_out)
torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-4)
for name, p in block.named_parameters():
    torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-4)
print("output and all gradients match eager")

print(f"\n{'graph':10} {'kernels':>7} {'steps':>5} {'reused':>6} {'planned peak':>13} {'eager estimate':>15}")
for g in graphs:
    print(f"{g.graph.name:10} {len(g.kernels):>7} {len(g.plan.steps):>5} {len(g.plan.reuse):>6} "
          f"{g.plan.peak_bytes:>13,d} {eager_peak(g):>15,d}")
    assert g.plan.peak_bytes <= eager_peak(g)
assert [g.graph.name for g in graphs] == ["forward", "backward"]

# %% [markdown]
# The reuse lines of the backward wrapper (each with the kernel it feeds), and the
# timeline of live bytes across its steps:

# %%
backward = graphs[1]
lines = backward.wrapper_source[backward.wrapper_source.index("def call"):].splitlines()
for k, line in enumerate(lines):
    if line.rstrip().endswith("# reuse"):
        print(line.strip())
        print("    then:", lines[k + 1].strip()[:100])
assert any(g.plan.reuse and "# reuse" in g.wrapper_source for g in graphs)

peak = backward.plan.peak_bytes
for k, (step, live) in enumerate(zip(backward.plan.steps, backward.plan.timeline)):
    bar = "#" * round(40 * live / peak)
    print(f"{k:3d} {step.label:14} {live:>8,d} {bar}")

# %% [markdown]
# ## Summary
#
# * The plan walks the wrapper's steps once: lifetimes, a `del` after each buffer's last
#   use, and a pool keyed by (device, dtype, storage size) from which later allocations
#   take dead memory (`# reuse` lines).
# * Inputs, outputs and buffers that a view may still alias are never reused.
# * `plan.peak_bytes` (after each step's frees) is compared with `eager_peak(compiled)`, the same
#   estimate for the ATen graph run op by op; on the GPT-2 block's forward and backward
#   the plan holds less.
print("tutorial 8 done")
