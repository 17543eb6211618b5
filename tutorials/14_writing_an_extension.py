# %% [markdown]
# # Tutorial 14: Writing an extension
#
# In this tutorial you will learn:
#
# * how the pipeline is a **registry of passes** (`miniinductor/passes.py`): each pass is
#   `run(obj, ctx)` at a named stage, and the driver (`compile_fx.py`) is one loop over the
#   stages; `python -m miniinductor passes` prints the list;
# * what an **extension** is: a folder under `miniinductor/ext/` that declares itself
#   (`config.declare_extension`) and adds passes, kernel kinds or policy changes, and that the
#   core never imports; `options={"extensions": [...]}` chooses which run, and `[]` (the
#   `core` preset) runs the core path alone;
# * how to write one here, in a few lines: a schedule-stage pass that **fuses something the
#   core does not**: pointwise kernels that share no buffer but run over the same loops
#   (horizontal fusion of independent siblings), with its decisions in the report;
# * how to check it: the same outputs as eager, one kernel instead of two, and what it is
#   worth on this machine.
#
# Files: `miniinductor/passes.py` (Pass, Context, register, run_stage), `miniinductor/compile_fx.py`
# (the core's passes, registered at its bottom), `miniinductor/ext/combo/__init__.py` (a real
# extension that does this and more: combo kernels), `miniinductor/scheduler/scheduler.py`
# (`can_fuse`, `merge`).

# %%
import time

import torch

import miniinductor
from miniinductor import passes
from miniinductor.codegen.policy import policy_for
from miniinductor.compile_fx import collect_compiled
from miniinductor.config import Config, declare_extension
from miniinductor.scheduler import FusedGroup
from miniinductor.scheduler.fusion import FusionDecision

torch.manual_seed(0)

# %% [markdown]
# ## 1. The pipeline as a table
#
# Every pass has a stage (the object it works on: the ATen graph, the loop IR, the
# scheduler, the kernels...), a name, the extension that registered it, and a switch
# `enabled(ctx)` read from the options and the backend policy. This is what runs for a
# CPU graph with the core alone:

# %%
config = Config.build(preset="core")
ctx = passes.Context(config, policy_for(torch.device("cpu"), config), torch.device("cpu"))
print(passes.describe(ctx))
core_passes = [p.name for p in passes.PASSES if p.runs(ctx)]
assert "lower" in core_passes and "winograd_convolutions" not in core_passes

# %% [markdown]
# ## 2. What the core does with two independent maps
#
# `f` computes two pointwise results from two different inputs. The core fuses a pair of
# kernels only when they share a buffer (that is where fusion saves memory traffic), so it
# writes two kernels: two loops, two OpenMP parallel regions, two calls from the wrapper.

# %%
def f(x, y):                          # x, y: [N, M] -> two [N, M] results
    return x.sin() * 2, (y + 1).relu()


N, M = 512, 1024
x, y = torch.randn(N, M), torch.randn(N, M)


def compile_and_run(options):
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        out = miniinductor.compile(f, **options)(x, y)
    for got, want in zip(out, f(x, y)):
        torch.testing.assert_close(got, want)
    (graph,) = graphs
    return graph


core = compile_and_run({"extensions": []})
print(f"core: {len(core.kernels)} kernels:", ", ".join(core.kernels))
assert len(core.kernels) == 2

# %% [markdown]
# ## 3. The extension: fuse independent siblings
#
# The pass runs at the `schedule` stage, after the core's `fuse` and before `order`. It
# looks at every pair of pointwise groups left, and asks the scheduler's own legality check
# (`can_fuse`: same loops, no dependency cycle, no mutation hazard, within
# `max_fusion_size`) before merging. Each verdict is a `FusionDecision`, so the report's
# "why (not) fused" table and `explain()` show it like any other.
#
# Memory-traffic arithmetic: the two kernels read 2 x N x M floats and write 2 x N x M
# floats whether fused or not (they share nothing), so fusion saves no bytes; what it saves
# is one parallel region and one call. That is why the core's score (bytes saved) never
# picks this pair, and why it is an extension: worth it for many small kernels (an optimizer
# step over many parameters: the real `combo` extension), not for big ones.

# %%
declare_extension("siblings", "a tutorial's: independent pointwise kernels over the same loops share one")


def fuse_siblings(scheduler, ctx):
    merged = 0
    while True:
        groups = [g for g in scheduler.groups if isinstance(g, FusedGroup) and not g.is_reduction]
        pair = next(((a, b) for k, a in enumerate(groups) for b in groups[k + 1:] if a.R == b.R), None)
        if pair is None:
            break
        a, b = pair
        shape, reason = scheduler.can_fuse(a, b)
        scheduler.decisions.append(FusionDecision(a.get_name(), b.get_name(), shape is not None,
                                                  f"siblings: {reason}"))
        if shape is None:
            break
        scheduler.merge(a, b, *shape)
        merged += 1
    ctx.note(f"{merged} pairs fused" if merged else "")


siblings = passes.Pass("schedule", "fuse_siblings", fuse_siblings, extension="siblings",
                       enabled=lambda ctx: ctx.config.fusion, doc="independent pointwise kernels, same loops → one")

# %% [markdown]
# ## 4. Run it
#
# `passes.registered` adds the pass for the `with` block only. The extension runs when the
# options name it: here the core plus `siblings`.

# %%
with passes.registered(siblings, before="order"):
    fused = compile_and_run({"extensions": ["siblings"]})
    print(f"core + siblings: {len(fused.kernels)} kernel:", ", ".join(fused.kernels))
    print()
    print("\n".join(str(r) for r in fused.passes if r.ran and r.stage == "schedule"))
    print()
    print([str(d) for d in fused.scheduler.decisions if d.reason.startswith("siblings")])
    print()
    print(next(iter(fused.kernels.values())).source)
assert len(fused.kernels) == 1
assert any(r.name == "fuse_siblings" and "1 pairs fused" in r.change for r in fused.passes)
# the pass is gone again: a fresh compile is the core's
assert all(p.name != "fuse_siblings" for p in passes.PASSES)

# %% [markdown]
# ## 5. What it is worth here
#
# Each compiled call, timed the same way (the best of a few runs, after a warm-up call). On 2 cores the saving is
# one parallel region's start-up, small beside the 4 x N x M floats each version moves;
# with small inputs and many such kernels it matters more. Measure before you keep an
# extension: a broad corpus, not one row (docs/benchmarks.md).

# %%
def best_ms(graph, runs=30):
    graph([x, y])
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        graph([x, y])
        times.append((time.perf_counter() - start) * 1e3)
    return min(times)


print(f"two kernels: {best_ms(core):.3f} ms, one fused kernel: {best_ms(fused):.3f} ms")
print("tutorial 14 done")
