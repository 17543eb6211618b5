# %% [markdown]
# # Tutorial 11: The accuracy debugger
#
# In this tutorial you will learn:
#
# * why a compiler that can compute every buffer **three ways** (the generated kernel, the
#   IR interpreter, and the ATen ops it was lowered from) can point at the cause of a
#   wrong answer instead of leaving you to bisect by hand;
# * how to run `miniinductor.debug_accuracy(fn, *inputs)` on a training step of a GPT-2
#   block, forward and backward, and read what it prints: the first bad buffer, its
#   kernel and source, the ATen nodes it came from, its fused group, the largest error;
# * what the **levels** say: a `fusion=False` rerun (fusion bug or not?), a `fallback`
#   rerun of the suspicious ATen ops (confirmed?), and a **float64** reference (a logic
#   bug, or only accumulation order and precision?);
# * how to rerun the one guilty kernel alone from the **repro script** it writes, and see
#   every buffer's error in the HTML report.
#
# Files: `miniinductor/tools/debug/accuracy.py`, `miniinductor/tools/debug/planted_bugs.py`,
# `miniinductor/tools/debug/interpreter.py`, `miniinductor/codegen/wrapper.py` (`generate(record=True)`).

# %%
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import miniinductor
from miniinductor.tools.debug import planted_bugs
from miniinductor.tools.models import GPT2Block

torch.manual_seed(0)
out_dir = Path(tempfile.mkdtemp(prefix="miniinductor_tutorial11_"))

# %% [markdown]
# ## 1. A healthy block first
#
# `debug_accuracy` compiles the function, runs it forward, then backward with fixed random
# output gradients (the same ones for eager and every rerun). For each graph it records
# the inputs the compiled graph was really called with, then computes every buffer:
#
# * by the **kernel**: the generated wrapper regenerated with `record=True` hands each
#   buffer over right after the step that defines it;
# * by the **IR interpreter**, from the kernel's own values of that buffer's inputs, so
#   that a kernel that goes wrong is caught where it goes wrong, not downstream;
# * by **eager ATen**, the ATen graph run node by node, for buffers holding a node's value.
#
# A healthy compile is reported clean.

# %%
block = GPT2Block(32, 2, max_seq=8)
x = torch.randn(2, 8, 32, requires_grad=True)
report = miniinductor.debug_accuracy(block, x)
print(report)
assert report.clean
assert [cg.graph.name for cg in report.graphs] == ["forward", "backward"]
print(f"{len(report.checks)} buffers checked;",
      f"{sum(c.vs_eager is not None for c in report.checks)} of them against an ATen node too")

# The debugger's own comparison with eager, redone by hand: output and input gradient.
grad = torch.randn(2, 8, 32)
x_c = x.detach().clone().requires_grad_()
compiled = miniinductor.compile(block)
out_c = compiled(x_c)
(g_c,) = torch.autograd.grad(out_c, x_c, grad)
out_e = block(x)
(g_e,) = torch.autograd.grad(out_e, x, grad)
torch.testing.assert_close(out_c, out_e, rtol=1e-4, atol=1e-5)
torch.testing.assert_close(g_c, g_e, rtol=1e-4, atol=1e-5)

# %% [markdown]
# ## 2. Plant a bug in the backward
#
# `planted_bugs.reversed_row_reads("backward")` breaks C++ codegen on purpose, and only in
# backward graphs: in the per-element loop that follows a reduction *inside the same
# kernel* (layer norm's backward: sum over the row, then scale every element), the
# kernel reads its row back to front. Only fused kernels have such loops, so this is a
# fusion-only indexing bug, the kind that is hardest to find by hand: the forward is
# right, the loss is right, one gradient is quietly wrong.

# %%
torch._dynamo.reset()   # compile afresh, under the bug
with planted_bugs.reversed_row_reads("backward"):
    out_b = miniinductor.compile(block)(x_c)
    (g_b,) = torch.autograd.grad(out_b, x_c, grad)
torch.testing.assert_close(out_b, out_e, rtol=1e-4, atol=1e-5)     # the forward is still right
print("input gradient, max error vs eager:", (g_b - g_e).abs().max().item())
assert (g_b - g_e).abs().max() > 0.1                                 # the gradient is not

# %% [markdown]
# ## 3. One call finds it
#
# Read the report from the top: the first bad buffer in execution order (the backward
# graph's), the kernel that computes it, whether the *kernel* departs from its own IR on
# the same inputs (codegen) or the *IR* departs from ATen (lowering), the ATen nodes the
# kernel came from, the other buffers of its fused group, and the largest error with its
# position. Then the levels:
#
# * **fusion**: the whole thing rerun with `fusion=False`; correct now, so a fusion bug;
# * **fallback**: rerun with the kernel's ATen ops as ATen calls (the `fallback_ops`
#   option); correct now, so these ops' kernel is confirmed as the cause;
# * **float64**: the ATen graph rerun in float64; the compiled error is in the leading
#   digits while eager's is in the last ones, so a logic bug, not accuracy.

# %%
with planted_bugs.reversed_row_reads("backward"):
    report = miniinductor.debug_accuracy(block, x, repro_dir=out_dir / "repro")
print(report)
culprit = report.culprit
assert culprit is not None and report.kind == "codegen"
assert report.graphs[culprit.graph].graph.name == "backward"
assert culprit.kernel_vs_ir.bad and len(report.fused_group()) > 1
assert report.levels["fusion"].endswith("a fusion bug")
assert report.levels["fallback"].endswith("confirmed")
assert report.levels["float64"].startswith("logic")

# %% [markdown]
# The guilty kernel's source: look for the loop after the reduction, and its index.

# %%
print(report.kernel_source)
assert "r0" in report.kernel_source

# %% [markdown]
# ## 4. Rerun that one kernel alone
#
# `report.repro` is a standalone script: it loads the kernel's source, the saved values of
# its inputs, runs it once and compares each output with the IR interpreter's value on the
# same inputs (exit status 1 if one departs). It is what you attach to a bug report.

# %%
run = subprocess.run([sys.executable, str(report.repro)], capture_output=True, text=True)
print(run.stdout)
assert run.returncode == 1 and f"{culprit.name}: max abs error" in run.stdout

# %% [markdown]
# ## 5. Every buffer's error in the report
#
# `report.write_report(path)` writes the HTML report of tutorial 10 with one more column
# in each kernels table: the largest error of each buffer the kernel computes ("-" for a
# buffer kept in registers). The errors grow from the culprit onward.

# %%
html = report.write_report(out_dir / "accuracy.html").read_text()
assert "max error per buffer" in html
print("report:", out_dir / "accuracy.html")

# %% [markdown]
# ## 6. Accuracy, not logic
#
# Not every difference is a bug. A long float32 sum gives slightly different answers in a
# different order of additions; with a tight tolerance the debugger flags the kernel, and
# the float64 level calls it what it is: the compiled error against float64 is in the
# last digits of float32, like eager's.

# %%
long = torch.randn(2**20) + 1
report = miniinductor.debug_accuracy(torch.sum, long, backward=False, rtol=0, atol=1e-6, levels=("float64",))
print(report)
assert report.levels["float64"].startswith("accuracy")
# A float32 sum of n terms drifts by about eps * sqrt(n) = 6e-8 * 1024 ~ 6e-5 of its size
# when the order changes; a logic bug would be off in the leading digits.
torch.testing.assert_close(miniinductor.compile(torch.sum)(long), long.sum(), rtol=1e-3, atol=0)

# %%
print("tutorial 11 done")
