# %% [markdown]
# # Tutorial 1: Registering a `torch.compile` backend
#
# In this tutorial you will learn:
#
# * what `torch.compile` actually hands to a compiler backend: an FX `GraphModule` and
#   a list of *example inputs*;
# * how to write a backend in five lines, and when Dynamo calls it (once per graph,
#   again after a graph break, again for a new input shape);
# * how miniinductor plugs into the same hook, both by name
#   (`torch.compile(fn, backend="miniinductor")`) and as `miniinductor.compile(fn)`;
# * how to read `miniinductor.metrics`, the counters of what the compiler did.
#
# Every later tutorial opens one phase of the compiler that sits *behind* this hook.
#
# Run it with `python tutorials/01_registering_a_backend.py`; each `# %%` cell is also
# a cell in VS Code or Jupytext.

# %%
import torch
import torch._dynamo
from torch.fx.node import _get_qualified_name  # "torch.relu", "_operator.add"

import miniinductor

torch.manual_seed(0)


def fn(x, w, b):
    """A tiny model: a matmul, a bias and two pointwise ops."""
    return torch.relu(x @ w + b) * 2.0


x, w, b = torch.randn(8, 16), torch.randn(16, 4), torch.randn(4)
expected = fn(x, w, b)

# %% [markdown]
# ## 1. A backend is a function `(gm, example_inputs) -> callable`
#
# TorchDynamo runs your Python function symbolically, records every tensor operation it
# sees into an FX graph and hands that graph to the backend. The backend returns any
# callable that computes the same thing; Dynamo caches it (guarded on shapes, dtypes,
# ...) and calls it instead of your function from then on.
#
# Here is the smallest useful backend: it prints what it receives and returns the
# graph's own `forward`, i.e. it runs the graph eagerly, op by op.

# %%
calls = []


def inspecting_backend(gm: torch.fx.GraphModule, example_inputs):
    calls.append(gm)
    print(f"--- backend call #{len(calls)}: the FX graph as Python code ---")
    print(gm.code.strip())
    print("--- the same graph, node by node ---")
    for node in gm.graph.nodes:
        target = _get_qualified_name(node.target) if callable(node.target) else node.target
        print(f"  {node.op:14} {target:18} args={node.args}")
    print("--- example inputs (real tensors, or fake ones with the right metadata) ---")
    for t in example_inputs:
        print(f"  {type(t).__name__} shape={tuple(t.shape)} dtype={t.dtype} "
              f"requires_grad={t.requires_grad}")
    return gm.forward  # "compiling" = doing nothing


torch._dynamo.reset()
opt_fn = torch.compile(fn, backend=inspecting_backend)
out = opt_fn(x, w, b)
torch.testing.assert_close(out, expected)
print("matches eager:", out.shape)

# %% [markdown]
# Notice what the graph is made of: *Torch-level* calls (`torch.relu`, `operator.matmul`,
# `operator.add`...) exactly as written in Python, one placeholder per tensor input.
# Dynamo does not decompose anything; turning these into ATen operators, and
# producing the backward graph for training, is the next phase (tutorial 2).
#
# The second call with the same shapes hits Dynamo's cache, so the backend is not
# called again:

# %%
opt_fn(torch.randn(8, 16), w, b)
print("backend calls so far:", len(calls))
assert len(calls) == 1

# %% [markdown]
# A new input shape fails a guard and triggers a recompile (we pass `dynamic=False`,
# as `miniinductor.compile` does by default, so each shape gets its own static graph;
# with `dynamic=True`, or the default `dynamic=None` after a second shape, Dynamo hands
# over SymInt sizes instead, and miniinductor compiles one static specialisation per
# concrete shape, see `capture/specialize.py`):

# %%
torch._dynamo.reset()
calls.clear()
opt_fn = torch.compile(fn, backend=inspecting_backend, dynamic=False)
opt_fn(x, w, b)
opt_fn(torch.randn(3, 16), w, b)
print("backend calls after two shapes:", len(calls))
assert len(calls) == 2

# %% [markdown]
# ## 2. Graph breaks: one function, several graphs
#
# Dynamo cannot put everything into a graph: printing, data-dependent Python control
# flow or unsupported calls *break* the graph. The code before and after the break
# becomes two separate graphs, and the backend is called once for each. A backend
# therefore never sees "your function", only straight-line pieces of it.

# %%


def fn_with_break(x):
    y = torch.sin(x) + 1
    torch._dynamo.graph_break()  # as if we had called print(y) here
    return torch.cos(y) * 2


torch._dynamo.reset()
calls.clear()
out = torch.compile(fn_with_break, backend=inspecting_backend)(x)
torch.testing.assert_close(out, fn_with_break(x))
print("graphs for one function with a graph break:", len(calls))
assert len(calls) == 2

# %% [markdown]
# ## 3. miniinductor is the same kind of function
#
# `miniinductor.backend(gm, example_inputs)` has exactly the signature above. Instead
# of returning `gm.forward`, it captures ATen graphs with AOTAutograd, lowers them to
# loop IR, schedules, generates C++ and returns a wrapper that runs the compiled
# kernels.
#
# Backends can be passed as functions or looked up by *name*. Third-party packages
# register names through the `torch_dynamo_backends` entry-point group; our
# `pyproject.toml` says
#
# ```toml
# [project.entry-points.torch_dynamo_backends]
# miniinductor = "miniinductor:backend"
# ```
#
# so once the package is installed (`pip install -e .`), `backend="miniinductor"`
# works. If you run this file from a checkout that was never installed, the name is
# unknown and we pass the function itself, which is what the name resolves to anyway.

# %%
registered = "miniinductor" in torch._dynamo.list_backends()
print("'miniinductor' registered as a backend name:", registered)
backend = "miniinductor" if registered else miniinductor.backend
if registered:
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend("miniinductor") is miniinductor.backend

torch._dynamo.reset()
miniinductor.metrics.reset()
with torch.no_grad():
    out = torch.compile(fn, backend=backend)(x, w, b)
torch.testing.assert_close(out, expected)
print("torch.compile(fn, backend=miniinductor) matches eager")

# %% [markdown]
# ## 4. `miniinductor.compile`: the same, with options checked
#
# `miniinductor.compile(fn, **options)` is `torch.compile(fn, backend=...)` with
# `dynamic=False` by default and options validated up front. Options live in one frozen
# `miniinductor.Config`, passed explicitly through every phase (no global mutable config
# module); the core declares its own, and each extension (miniinductor/ext/) its own:

# %%
from miniinductor.config import OPTIONS

for name, option in OPTIONS.items():
    print(f"  {name:28} default={getattr(miniinductor.Config(), name)!r:14} ({option.extension})")

try:
    miniinductor.compile(fn, paralel_min_numel=1)  # a typo
except ValueError as exc:
    print("\nValueError:", exc)
else:
    raise AssertionError("a misspelt option must be rejected")

# %%
torch._dynamo.reset()
miniinductor.metrics.reset()
compiled = miniinductor.compile(fn)
with torch.no_grad():
    out = compiled(x, w, b)
torch.testing.assert_close(out, expected)
print("miniinductor.compile(fn) matches eager")

# %% [markdown]
# ## 5. What did the compiler do? `miniinductor.metrics`
#
# Like `torch/_inductor/metrics.py`, `miniinductor.metrics` is a module of plain
# counters: observations, not configuration. Tests read them to check, for example,
# that a pointwise chain became a single kernel.
#
# * `generated_kernel_count`: C++ kernels generated;
# * `fallback_count` / `fallback_ops`: ops that ran as ATen calls (`ExternKernel`s).
#   The matmul is one: every compiler leaves matmuls to a BLAS library;
# * `graphs_compiled` and `output_code_paths`: one generated Python wrapper per graph.

# %%
m = miniinductor.metrics
print("generated_kernel_count:", m.generated_kernel_count)
print("fallback_count:        ", m.fallback_count)
print("fallback_ops:          ", dict(m.fallback_ops))
print("graphs_compiled:       ", m.graphs_compiled)
print("output_code_paths:     ", m.output_code_paths)
assert m.graphs_compiled == 1 and m.generated_kernel_count >= 1
assert any("mm" in op for op in m.fallback_ops), "the matmul runs as an ATen extern call"

# %% [markdown]
# The wrapper file is ordinary Python; tutorial 6 reads it line by line. Here is a peek:

# %%
with open(m.output_code_paths[-1]) as f:
    source = f.read()
print(source[source.index("def call"):])

# %% [markdown]
# ## 6. Training: one Dynamo graph, two compiled graphs
#
# When an input requires grad, AOTAutograd (inside `miniinductor.backend`) splits the
# graph into a forward and a backward graph and compiles both. Gradients flow through
# our kernels and match eager's:

# %%
torch._dynamo.reset()
miniinductor.metrics.reset()
xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
out = miniinductor.compile(fn)(xg, wg, bg)
out.sum().backward()

xe, we, be = (t.clone().requires_grad_() for t in (x, w, b))
fn(xe, we, be).sum().backward()
for got, want in ((xg, xe), (wg, we), (bg, be)):
    torch.testing.assert_close(got.grad, want.grad)
print("graphs compiled for training:", m.graphs_compiled, "(forward + backward)")
assert m.graphs_compiled == 2

# %% [markdown]
# ## Summary
#
# * A backend is `(GraphModule, example_inputs) -> callable`; Dynamo calls it once per
#   graph (per graph break, per new shape) and caches the result.
# * `backend="miniinductor"` resolves through an entry point to `miniinductor.backend`;
#   `miniinductor.compile(fn, **options)` adds option checking.
# * `miniinductor.metrics` tells you how many kernels were generated and which ops fell
#   back to ATen.
#
# Next: [tutorial 2](02_capture_aotautograd.py) opens the first phase, capture.
print("tutorial 1 done")
