# %% [markdown]
# # Tutorial 2: Capture with AOTAutograd and decompositions
#
# In this tutorial you will learn:
#
# * how AOTAutograd (`aot_function`, `aot_module_simplified`) turns a Torch-level graph
#   into *ATen* graphs, and splits training into a forward and a backward graph;
# * what a *decomposition table* is, and how it rewrites `aten._softmax` into
#   `prepare_softmax_online / sub / exp / div` -- ops a compiler can fuse;
# * which decompositions miniinductor picks (`miniinductor/capture/decompositions.py`),
#   which one it refuses, and why;
# * that the graphs are *functional*: in-place ops are gone by the time we see them.
#
# This is phase 1 of the pipeline (`miniinductor/capture/`). Everything after it only
# ever sees the ATen graphs printed here.

# %%
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._functorch.aot_autograd import aot_function, aot_module_simplified, make_boxed_func

from miniinductor.capture import decomposition_table
from miniinductor.capture.decompositions import EXTRA, NOT_DECOMPOSED

torch.manual_seed(0)
aten = torch.ops.aten


def ops_in(gm: torch.fx.GraphModule) -> list[str]:
    """The ATen op packets a graph calls, in order: ['amax', 'sub', 'exp', ...]."""
    return [n.target.overloadpacket.__name__ for n in gm.graph.nodes
            if n.op == "call_function" and hasattr(n.target, "overloadpacket")]


def printing_compiler(title: str, store: dict):
    """An AOTAutograd 'compiler' that prints the graph and runs it as is.

    AOTAutograd calls compilers with the *boxed* convention (the callable takes one list
    of arguments, so it can free inputs early); `make_boxed_func` adapts `gm.forward`."""
    def compiler(gm: torch.fx.GraphModule, example_inputs):
        store[title] = gm
        print(f"===== {title} graph =====")
        print(gm.code.strip())
        return make_boxed_func(gm.forward)
    return compiler


# %% [markdown]
# ## 1. AOTAutograd without decompositions
#
# `aot_function(fn, fw_compiler, bw_compiler)` traces `fn` through the ATen dispatcher
# *ahead of time*: it runs the function and its autograd backward with fake tensors,
# records every ATen call, and partitions the joint graph into a forward graph and a
# backward graph. Each goes to its compiler. Let's look at softmax:

# %%


def softmax_fn(x):
    return torch.softmax(x, dim=-1)


x = torch.randn(4, 8, requires_grad=True)
grad_out = torch.randn(4, 8)

raw = {}
out = aot_function(softmax_fn, printing_compiler("forward", raw),
                   printing_compiler("backward", raw))(x)
(out * grad_out).sum().backward()

# %% [markdown]
# The forward is one opaque `aten._softmax`, the backward one
# `aten._softmax_backward_data`. A compiler would have to write a hand-made kernel for
# each such op -- Inductor's answer (and ours) is to *not* see them at all.
#
# Also note the forward returns an extra output: the softmax result is *saved for
# backward* (the partitioner decides what to save; `detach` marks it).

# %%
assert "_softmax" in ops_in(raw["forward"])
assert "_softmax_backward_data" in ops_in(raw["backward"])

# %% [markdown]
# ## 2. The same, with miniinductor's decomposition table
#
# A decomposition is a Python function that implements an ATen op in terms of other
# ATen ops. Passing `decompositions={op: fn}` makes the tracer call `fn` instead of
# recording `op`, recursively. PyTorch ships hundreds of them (`torch._decomp`).

# %%
table = decomposition_table()
print("decompositions in miniinductor's table:", len(table))
print("example: aten._softmax.default ->", table[aten._softmax.default])

dec = {}
x.grad = None
out = aot_function(softmax_fn, printing_compiler("forward", dec),
                   printing_compiler("backward", dec), decompositions=table)(x)
(out * grad_out).sum().backward()

# %% [markdown]
# Now softmax is the numerically stable textbook formula,
# `exp(x - max(x)) / sum(exp(x - max(x)))`, and its backward is
# `y * (g - sum(g * y))` written as `mul / sum / mul / sub`. The row's max and sum of
# exp come from one op of ours, `miniinductor.prepare_softmax_online(x, dim)`
# (`triton/softmax.py`, Inductor's `prims.prepare_softmax_online`): lowering makes it
# the two reductions `amax` and `sum(exp(x - max))`, or, for a row too long for one
# block, a single *online* reduction that reads the row once (tutorial 9). (Graphs for
# the C++ kernels are captured with `decomposition_table(backend="cpp")`: PyTorch's
# own `amax`, `sub`, `exp`, `sum`, whose `exp` a CPU stores once rather than computing it
# twice.) Every op here
# is a pointwise op or a reduction that miniinductor lowers natively, and that the
# scheduler can fuse into a couple of loops.

# %%
fw_ops, bw_ops = ops_in(dec["forward"]), ops_in(dec["backward"])
print("forward ops: ", fw_ops)
print("backward ops:", bw_ops)
assert "_softmax" not in fw_ops
for op in ("prepare_softmax_online", "sub", "exp", "div"):
    assert op in fw_ops, op
assert "_softmax_backward_data" not in bw_ops and "sum" in bw_ops

# The decomposed graphs compute the same values and gradients as eager:
x_eager = x.detach().clone().requires_grad_()
expected = softmax_fn(x_eager)
(expected * grad_out).sum().backward()
torch.testing.assert_close(out, expected)
torch.testing.assert_close(x.grad, x_eager.grad)
print("forward and gradient match eager")

# %% [markdown]
# ## 3. Which decompositions, and why
#
# `decomposition_table()` is:
#
# 1. PyTorch's **core ATen decompositions** (`torch._decomp.core_aten_decompositions()`):
#    the ones that reduce the ~2000 ATen ops to the ~200 "core ATen" opset. That keeps
#    our lowering table (tutorial 5) small.
# 2. plus a few **composite ops** that core ATen keeps whole but that are cheap
#    arithmetic around a reduction -- decomposing them lets them fuse with their
#    neighbours instead of being one opaque library call:

# %%
for op in EXTRA:
    print(f"  decomposed:     {op}")
for op in NOT_DECOMPOSED:
    print(f"  NOT decomposed: {op}")
assert all(op.default in table for op in EXTRA if hasattr(op, "default"))

# %% [markdown]
# 3. minus **`aten.addmm`** (`bias + x @ w`, what `F.linear` produces). Core ATen would
#    split it into `mm` + `add`, but a single BLAS call that adds the bias in its
#    epilogue is faster than a matmul followed by a separate pass over the output.
#    Matmuls are never generated by miniinductor anyway: they run as ATen extern calls.
#
# Let's check both claims on a small MLP block: `F.linear` stays `addmm`, while
# `layer_norm` and `gelu` dissolve into pointwise ops and reductions. We use
# `make_fx`, the tracer underneath AOTAutograd, for a forward-only graph.

# %%
from torch.fx.experimental.proxy_tensor import make_fx


def block(x, w, b, gamma, beta):
    h = F.linear(x, w, b)
    return F.gelu(F.layer_norm(h, (h.shape[-1],), gamma, beta))


args = (torch.randn(4, 16), torch.randn(32, 16), torch.randn(32), torch.randn(32), torch.randn(32))
gm_raw = make_fx(block)(*args)
gm_dec = make_fx(block, decomposition_table=table)(*args)
print("without decompositions:", ops_in(gm_raw))
print("with decompositions:   ", ops_in(gm_dec))
print()
print(gm_dec.code.strip())

assert "addmm" in ops_in(gm_dec)
assert "native_layer_norm" in ops_in(gm_raw) and "native_layer_norm" not in ops_in(gm_dec)
assert "gelu" in ops_in(gm_raw) and "gelu" not in ops_in(gm_dec)
torch.testing.assert_close(gm_dec(*args), block(*args))
print("decomposed block matches eager")

# %% [markdown]
# ## 4. Functionalization: no in-place ops, no aliasing
#
# AOTAutograd also *functionalizes* the program: `y.mul_(2)` becomes `mul(y, 2)`, and
# a write through a view (`y[:, 0].fill_(...)`) becomes a `*_scatter` op that returns a
# new tensor. Mutating a graph input turns into a `copy_` that AOTAutograd applies
# outside the compiled graph (an "epilogue"). Our compiler therefore never has to
# reason about mutation or aliasing inside a graph. (We pass no decompositions here, to
# see `select_scatter` itself; miniinductor lowers it directly, see
# `lowering/views.py`.)

# %%


def inplace_fn(x):
    y = x.clone()
    y.mul_(2)
    y[:, 0].fill_(0.5)  # an in-place write through a view
    return y.relu_()


fun = {}
xi = torch.randn(4, 8)
out = aot_function(inplace_fn, printing_compiler("functional", fun))(xi)
torch.testing.assert_close(out, inplace_fn(xi))
print("ops:", ops_in(fun["functional"]))
assert not any(name.endswith("_") for name in ops_in(fun["functional"])), "no in-place ops left"
assert "select_scatter" in ops_in(fun["functional"])

# %% [markdown]
# ## 5. The real entry: `aot_module_simplified` inside a Dynamo backend
#
# `miniinductor/capture/aot.py` does exactly this, with miniinductor's compiler in
# place of our printing one:
#
# ```python
# aot_module_simplified(gm, example_inputs,
#                       fw_compiler=..., bw_compiler=..., inference_compiler=...,
#                       decompositions=decomposition_table())
# ```
#
# `aot_module_simplified` is the variant for a Dynamo `GraphModule` (parameters are
# already lifted to inputs). When no input requires grad it calls the
# `inference_compiler` once, with a forward-only graph. Here it is as a Dynamo backend,
# on a training step of a layer norm:

# %%
captured = {}


def capture_backend(gm, example_inputs):
    return aot_module_simplified(
        gm, example_inputs,
        fw_compiler=printing_compiler("forward", captured),
        bw_compiler=printing_compiler("backward", captured),
        decompositions=table)


def layer_norm_fn(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias)


torch._dynamo.reset()
ln_args = [torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True),
           torch.randn(8, requires_grad=True)]
out = torch.compile(layer_norm_fn, backend=capture_backend)(*ln_args)
g = torch.randn(4, 8)
(out * g).sum().backward()

eager_args = [a.detach().clone().requires_grad_() for a in ln_args]
expected = layer_norm_fn(*eager_args)
(expected * g).sum().backward()
torch.testing.assert_close(out, expected)
for got, want in zip(ln_args, eager_args):
    torch.testing.assert_close(got.grad, want.grad)
assert "native_layer_norm" not in ops_in(captured["forward"])
assert "native_layer_norm_backward" not in ops_in(captured["backward"])
print("layer norm forward, backward and all three gradients match eager")

# %% [markdown]
# These two graphs are what `GraphLowering` (tutorial 5) receives: ATen ops only,
# functional, with example inputs carrying exact shapes and strides.
#
# ## Summary
#
# * AOTAutograd traces to ATen ahead of time, functionalizes, and partitions training
#   into forward and backward graphs, each handed to a compiler.
# * The decomposition table decides the vocabulary the rest of the compiler must
#   handle: core ATen + composite ops that fuse well, minus `addmm`.
#
# Next: [tutorial 3](03_loop_ir_and_ops_handlers.py), the loop IR those ops become.
print("tutorial 2 done")
