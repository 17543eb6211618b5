# %% [markdown]
# # Tutorial 12: Symbolic shapes -- one compile for every size
#
# In this tutorial you will learn:
#
# * what `dynamic=False`, `dynamic=True` and the default `dynamic=None` mean, and what
#   each costs when a model sees many batch sizes (the naive way: one compile per shape);
# * how Dynamo names the sizes that vary with **size symbols** (`s27`, `s77`, ...) and
#   records what the compiled code relies on as **guards**;
# * what a **generic kernel** looks like: the C++ loop bounds and indices are expressions
#   of the symbols, which arrive as `int64_t` arguments that the wrapper reads from the
#   inputs on every call -- in C++ and in Triton;
# * what a **recompile** looks like: a guard fails, Dynamo hands over the graph again;
# * how much a generic kernel pays for not knowing its sizes (a benchmark at the end).
#
# Files: `miniinductor/ir/sizevars.py` (SizeVarAllocator: `statically_known_*`,
# `size_hint`, `guard_*`, `describe`), `miniinductor/codegen/cpp.py` (size arguments),
# `miniinductor/codegen/wrapper.py` (`s77 = arg0_1.size(0)`), `miniinductor/capture/aot.py`
# and `miniinductor/capture/specialize.py` (the per-shape fallback),
# `miniinductor/compile_fx.py` (`compile(..., dynamic=None)`).

# %%
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import miniinductor
from miniinductor import metrics
from miniinductor.compile_fx import collect_compiled
from miniinductor.tools.debug.sizes import describe_sizes

torch.manual_seed(0)


class LayerNormMLP(nn.Module):
    def __init__(self, d=32, hidden=64, out=8):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, out)

    def forward(self, x):                       # x: [batch, d]
        return self.fc2(F.gelu(self.fc1(self.ln(x))))   # -> [batch, out]


model = LayerNormMLP().eval()
BATCHES = (3, 5, 17, 33, 64)


def sweep(dynamic):
    """Run every batch size through a fresh compile of `model`; check each output against
    eager; return (graphs compiled, kernels generated, seconds)."""
    torch._dynamo.reset()
    metrics.reset()
    compiled = miniinductor.compile(model, dynamic=dynamic)
    start = time.perf_counter()
    with torch.no_grad():
        for batch in BATCHES:
            x = torch.randn(batch, 32)
            # LayerNorm's two reductions add in another order than eager's: float32 round-off
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    return metrics.graphs_compiled, metrics.generated_kernel_count, time.perf_counter() - start


# %% [markdown]
# ## 1. The naive way: one compile per shape
#
# With `dynamic=False` every size is a constant baked into the kernels. Each new batch
# size fails a guard (`x.size(0) == 3`) and Dynamo hands the graph over again, so five
# batch sizes cost five compiles: five lowerings, five schedules, five g++ runs. A
# server that sees every batch size from 1 to 64 would compile 64 times.

# %%
static = sweep(dynamic=False)
print(f"dynamic=False: {static[0]} graphs compiled, {static[1]} kernels generated, {static[2]:.1f} s")
assert static[0] == len(BATCHES)

# %% [markdown]
# ## 2. `dynamic=True`: the sizes become symbols
#
# With `dynamic=True` Dynamo traces the batch dimension as a symbol. Everything downstream
# keeps it: buffer sizes are `[s77, 64]`, loops run to `s77`, and the kernels take `s77`
# as an argument. One compile serves every batch size.

# %%
dynamic = sweep(dynamic=True)
print(f"dynamic=True:  {dynamic[0]} graph compiled,  {dynamic[1]} kernels generated, {dynamic[2]:.1f} s")
assert dynamic[0] == 1 and dynamic[1] == static[1] // len(BATCHES)

# %% [markdown]
# What does the compiled graph know about its sizes? `describe_sizes(sizevars)` lists
# each symbol with the value it was traced at (the *hint*, used only for heuristics such
# as whether to start OpenMP threads), the range the ShapeEnv allows (0 and 1 are always
# specialised: a size-1 dimension broadcasts, so it must be known), where the wrapper
# reads it from, and the guards -- facts Dynamo re-checks before every call. The same
# lines are in the trace folder (`symbols.txt`), `explain`'s summary and the HTML report.

# %%
with collect_compiled() as graphs, torch.no_grad():
    torch._dynamo.reset()
    x = torch.randn(5, 32)
    out = miniinductor.compile(model, dynamic=True)(x)
torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
(cg,) = graphs
print("\n".join(describe_sizes(cg.graph.sizevars)))
# Only the batch is free: Dynamo made every dim of x a symbol, but x.size(1) meets the
# LayerNorm's weight (32), so a guard pins it to 32 and the code treats it as a constant.
batch = re.search(r"^  (s\d+) = 5 .*L\['x'\]\.size\(\)\[0\]", "\n".join(describe_sizes(cg.graph.sizevars)), re.M)[1]

# %% [markdown]
# ## 3. A generic kernel
#
# Here is the fused LayerNorm kernel. Its row count is the symbol, passed as
# `const int64_t`; its row length (32) is still a constant, so its inner loops are as
# tight as a static kernel's. OpenMP's `if(...)` clause decides *at run time* whether the
# rows are worth a thread team, because the compiler no longer knows how many there are.

# %%
(ln_kernel,) = cg.kernels.values()   # the two Linear layers are ATen calls (GELU rides on addmm)
print("from ATen ops:", ", ".join(ln_kernel.origins))
print(ln_kernel.source)
assert re.search(rf"const int64_t {batch}\b", ln_kernel.source)
assert re.search(rf"< {batch};", ln_kernel.source)   # the loop over rows runs to the symbol

# %% [markdown]
# The wrapper's `call` gets the symbol's value on every call -- Dynamo passes each size
# symbol as an int argument beside the tensors (here `arg2_1`); where it does not, the
# wrapper reads it from an input's shape (`s77 = arg0_1.size(0)`) -- and hands it to
# every kernel and allocation:

# %%
call = cg.wrapper_source[cg.wrapper_source.index("def call(args):"):]
print(call)
assert f"{batch} = " in call and re.search(rf"empty_strided_cpu\(\({batch}, ", call)

# %% [markdown]
# The same graph as Triton (`cpu_backend="triton"`: Triton's interpreter on the CPU; on a
# GPU it is what runs). The size arrives as an int argument that Triton is told not to
# specialise on (`do_not_specialize`: one compiled binary for every size), the number of
# rows `xnumel` is computed from it, and the launcher works out the grid -- how many
# programs of `XBLOCK` rows -- at every call: `grid=(cdiv(xnumel, XBLOCK),)`.

# %%
torch._dynamo.reset()
with collect_compiled() as graphs, torch.no_grad():
    compiled_triton = miniinductor.compile(model, dynamic=True, cpu_backend="triton")
    for n in (5, 9):
        x = torch.randn(n, 32)
        torch.testing.assert_close(compiled_triton(x), model(x), rtol=1e-4, atol=1e-5)
(triton_graph,) = graphs   # one compile for both sizes
print("Triton kernels:", list(triton_graph.kernels))   # (Linear's bias add and GELU are kernels of their own here)
source = next(k.source for name, k in triton_graph.kernels.items() if "rsqrt" in name)   # the layer norm
print(source[source.index("@triton.jit"):])
assert "do_not_specialize" in source and "grid=(cdiv(xnumel" in source

# %% [markdown]
# ## 4. The default, `dynamic=None`: automatic dynamic
#
# Most programs see one shape. So by default (`miniinductor.compile`'s and
# `torch.compile`'s), the first compile is static -- the fastest kernels -- and only when a
# *second* shape fails a guard does Dynamo recompile, this time with the changed sizes as
# symbols. So at most two compiles, whatever the number of sizes.

# %%
auto = sweep(dynamic=None)
print(f"dynamic=None:  {auto[0]} graphs compiled, {auto[1]} kernels generated, {auto[2]:.1f} s")
assert auto[0] == 2

# %% [markdown]
# ## 5. What a recompile looks like
#
# A symbolic graph still has guards. This function slices the first 8 columns: the
# compiled code is valid only while a row has at least... well, let Dynamo say. We compile
# with `dynamic=True`, then call with a row shorter than the guard allows: the guard fails
# and the graph is compiled again (watch `graphs_compiled`). `torch._dynamo.explain` or
# `TORCH_LOGS=recompiles` prints the failing guard in a real program.

# %%
def head(x):
    return torch.softmax(x, -1)[:, :8] * 2


torch._dynamo.reset()
metrics.reset()
compiled_head = miniinductor.compile(head, dynamic=True)
with collect_compiled() as graphs:
    for n, m in ((4, 20), (6, 33), (5, 50), (3, 6)):
        x = torch.randn(n, m)
        torch.testing.assert_close(compiled_head(x), head(x))
        print(f"x {n} x {m}: graphs compiled so far {metrics.graphs_compiled}")
print("\n".join(describe_sizes(graphs[0].graph.sizevars)))
assert metrics.graphs_compiled == 2   # rows of 20, 33, 50 share a graph; a row of 6 < 8 does not

# %% [markdown]
# ## 6. What not knowing the size costs
#
# A generic kernel computes its bounds from arguments and cannot unroll or drop a tail
# loop for a size it does not know. For row-parallel work like this MLP the difference
# is in the noise: time both on one batch size.

# %%
def per_call_ms(fn, x, reps=200):
    with torch.no_grad():
        for _ in range(10):
            fn(x)
        start = time.perf_counter()
        for _ in range(reps):
            fn(x)
    return (time.perf_counter() - start) / reps * 1e3


torch._dynamo.reset()
x = torch.randn(64, 32)
static_fn = miniinductor.compile(lambda x: model(x), dynamic=False)    # two lambdas: two code
dynamic_fn = miniinductor.compile(lambda x: model(x), dynamic=True)    # objects, two caches
with torch.no_grad():
    torch.testing.assert_close(dynamic_fn(x), model(x), rtol=1e-4, atol=1e-5)
t_static, t_dynamic, t_eager = per_call_ms(static_fn, x), per_call_ms(dynamic_fn, x), per_call_ms(model, x)
print(f"batch 64: eager {t_eager:.3f} ms, static {t_static:.3f} ms, dynamic {t_dynamic:.3f} ms "
      f"(dynamic/static {t_dynamic / t_static:.2f})")

print("tutorial 12 done")
