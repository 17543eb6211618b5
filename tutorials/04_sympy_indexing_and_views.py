# %% [markdown]
# # Tutorial 4: SymPy indexing and views
#
# In this tutorial you will learn:
#
# * how every memory access in the loop IR is a SymPy expression of the loop variables
#   (`8*i0 + i1`), and the two integer functions that views need: `FloorDiv` and
#   `ModularIndexing`;
# * how `simplify_with_ranges` uses the loop ranges (`0 <= i1 < 8`) to delete divisions
#   and moduli that cannot change the value, and how `cexpr` prints an index as C;
# * how `reshape`, `permute`, `slice`, `select` and `expand` never copy: each becomes a
#   `View` whose `reindex` function rewrites indices, and the composition ends up as one
#   index expression in the generated kernel;
# * how to *check* an index expression by evaluating it with torch tensors.
#
# Files: `miniinductor/ir/indexing.py`, `miniinductor/lowering/views.py`, `View` in
# `miniinductor/ir/nodes.py`.

# %%
import torch

import miniinductor
from miniinductor.compile_fx import last_compiled
from miniinductor.ir.indexing import FloorDiv, ModularIndexing, cexpr, evaluate, index_vars, simplify_with_ranges
from miniinductor.ir.nodes import InputBuffer, Layout, strided_view_of
from miniinductor.lowering.pointwise import expand_to
from miniinductor.lowering.views import permute, reshape, select, slice_
from miniinductor.ops_handler import RecordingHandler
from miniinductor.virtualized import V

torch.manual_seed(0)
cpu = torch.device("cpu")

# %% [markdown]
# ## 1. Index expressions
#
# Loop variables are SymPy symbols, integer and non-negative: `i0, i1, ...` for
# ordinary loops, `r0, ...` for reduction loops. Element `(i0, i1)` of a row-major
# `[4, 8]` tensor lives at offset `8*i0 + i1`.
#
# Going the other way -- from a flat offset back to coordinates -- needs integer
# division: `FloorDiv(a, b) = a // b` and `ModularIndexing(a, b, m) = (a // b) % m`,
# "digit `b` of `a` in base `m`". They are `sympy.Function`s that fold constants:

# %%
i0, i1, i2 = index_vars("i", [0, 0, 0])
flat = 8 * i0 + i1
print("flat offset:            ", flat)
print("row    = FloorDiv(flat, 8):          ", FloorDiv(flat, 8))
print("column = ModularIndexing(flat, 1, 8):", ModularIndexing(flat, 1, 8))
print("constants fold:         ", FloorDiv(17, 8), ModularIndexing(17, 1, 8))
assert FloorDiv(17, 8) == 2 and ModularIndexing(17, 1, 8) == 1

# %% [markdown]
# ## 2. Simplifying with ranges
#
# SymPy alone cannot simplify `FloorDiv(8*i0 + i1, 8)`: that equals `i0` only if
# `0 <= i1 < 8`. The loop ranges give us exactly those facts.
# `simplify_with_ranges(expr, {symbol: range})` uses them in three ways:
#
# * split the base into a part divisible by the divisor and a remainder, bound the
#   remainder, and drop what cannot matter;
# * factor a common stride out of a division when the other terms can never carry;
# * **join** digits that were split apart: `m*FloorDiv(f, m) + ModularIndexing(f, 1, m)`
#   is just `f` (the quotient and remainder of a division put back together). A reshape
#   followed by reading the original layout produces exactly this pattern.

# %%
ranges = {i0: 4, i1: 8}
examples = [
    FloorDiv(8 * i0 + i1, 8),             # -> i0
    ModularIndexing(8 * i0 + i1, 1, 8),   # -> i1
    FloorDiv(8 * i0 + i1, 4),             # -> 2*i0 + FloorDiv(i1, 4): only partly
    ModularIndexing(16 * i0 + i1, 1, 8),  # whole laps of 8 vanish: -> i1
    6 * FloorDiv(8 * i0 + i1, 6) + ModularIndexing(8 * i0 + i1, 1, 6),   # join: -> 8*i0 + i1
]
for expr in examples:
    print(f"{str(expr):36} -> {simplify_with_ranges(expr, ranges)}")
assert simplify_with_ranges(examples[0], ranges) == i0
assert simplify_with_ranges(examples[1], ranges) == i1
assert simplify_with_ranges(examples[4], ranges) == 8 * i0 + i1
# if i1 could reach 16, FloorDiv(8*i0 + i1, 8) is *not* i0:
print("with i1 in [0, 16):", simplify_with_ranges(examples[0], {i0: 4, i1: 16}))

# %% [markdown]
# We can *test* a simplification instead of trusting it: `evaluate(expr, env)` computes
# an index expression with Python ints or with integer tensors. Binding each variable to
# an `arange` that broadcasts along its own dimension evaluates all indices at once
# (this is what the IR interpreter of tutorial 3 does for every `ops.load`).

# %%


def grid(sizes):
    """{i_k: arange(sizes[k]) shaped to broadcast along dim k}."""
    env = {}
    for k, (sym, n) in enumerate(zip(index_vars("i", sizes), sizes)):
        shape = [1] * len(sizes)
        shape[k] = n
        env[sym] = torch.arange(n).reshape(shape)
    return env


env = grid([4, 8])
for expr in examples:
    before = torch.as_tensor(evaluate(expr, env))
    after = torch.as_tensor(evaluate(simplify_with_ranges(expr, ranges), env))
    assert torch.equal(before.broadcast_to(4, 8), after.broadcast_to(4, 8)), expr
print("every simplification agrees with the original on all 32 (i0, i1) pairs")

# %% [markdown]
# Finally `cexpr` prints an index as C for the kernels: `FloorDiv` becomes `/` and
# `ModularIndexing` becomes `/` and `%`. Indices are never negative, so C's truncating
# division agrees with floor division.

# %%
for expr in [8 * i0 + i1, FloorDiv(i0, 4) + 6 * ModularIndexing(i0, 1, 4), ModularIndexing(i0, 4, 6)]:
    print(f"{str(expr):40} C: {cexpr(expr)}")

# %% [markdown]
# ## 3. Views are reindex functions
#
# The lowering of a view op returns `View(data, size, reindex)`: element `index` of
# the view is element `reindex(index)` of `data`. Nothing is copied. Let's make an
# input buffer `x` of shape `[4, 6]` and apply the view lowerings from
# `lowering/views.py` directly; `str(View)` shows the reindex function applied to
# symbolic indices.

# %%
x = InputBuffer("x", Layout(cpu, torch.float32, size=[4, 6], stride=[6, 1]))
xt = permute(x, [1, 0])
print(xt)
print(slice_(x, 1, 1, 5, 2))
print(reshape(x, [2, 12]))

# %% [markdown]
# A loader composes all reindex functions down to the buffer, whose `Layout` turns
# coordinates into a flat offset. To see the final index, run the loader under the
# `RecordingHandler` from tutorial 3 and read the `MemoryDep` it records.
#
# For each view we (1) print the raw and simplified index, (2) check it: the input
# tensor's memory, gathered at the evaluated index, must equal what PyTorch's own view
# returns.

# %%
x_t = torch.randn(4, 6)


def load_index(node):
    with V.set_ops_handler(RecordingHandler()) as recorder:
        node.make_loader()(index_vars("i", node.get_size()))
    (dep,) = recorder.reads
    return dep.index


cases = [
    ("x.t()", permute(x, [1, 0]), x_t.t()),
    ("x[:, 1:5:2]", slice_(x, 1, 1, 5, 2), x_t[:, 1:5:2]),
    ("x[2]", select(x, 0, 2), x_t[2]),
    ("x.reshape(2, 12)", reshape(x, [2, 12]), x_t.reshape(2, 12)),
    ("x.t().reshape(24)", reshape(permute(x, [1, 0]), [24]), x_t.t().reshape(24)),
    ("x[:, None].expand(4, 5, 6)", expand_to(reshape(x, [4, 1, 6]), [4, 5, 6]),
     x_t[:, None].expand(4, 5, 6)),
    ("x.reshape(3, 8)", reshape(x, [3, 8]), x_t.reshape(3, 8)),
]
for title, view, expected in cases:
    size = view.get_size()
    raw = load_index(view)
    simple = simplify_with_ranges(raw, dict(zip(index_vars("i", size), size)))
    print(f"{title:28} size={size}")
    print(f"    raw index:   {raw}")
    print(f"    simplified:  {simple}")
    offsets = torch.as_tensor(evaluate(simple, grid(size))).broadcast_to(size)
    torch.testing.assert_close(x_t.flatten()[offsets], expected)
print("all view indices gather exactly what PyTorch's views return")

# %% [markdown]
# Three things to notice:
#
# * `x[:, None].expand(4, 5, 6)` simplifies back to `6*i0 + i2`: broadcast dimensions
#   simply do not appear in the index.
# * `x.reshape(3, 8)` splits the flat offset `8*i0 + i1` into the digits of the old
#   shape `[4, 6]` and then multiplies them by x's strides `[6, 1]`: the *join* rule
#   puts the digits back together, and the contiguous reshape costs nothing
#   (Inductor's twin is `join_dimensions` in `torch/_inductor/sizevars.py`).
# * `x.t().reshape(24)` genuinely needs `FloorDiv`/`ModularIndexing`: a transposed
#   tensor flattened in row-major order is not a strided view of `x`.
#
# ## 4. When is a view free for an extern call?
#
# Extern ATen calls (like `mm`) take real tensors, so a view passed to one must be
# expressible as `(size, stride, offset)` over a buffer. `strided_view_of` checks
# whether the composed index is *affine* in the loop variables and reads off the
# strides; if so the wrapper passes `reinterpret(buf, size, stride, offset)` -- no copy.
# If not, the view is copied into a fresh buffer first.

# %%
for title, view in [("x.t()", permute(x, [1, 0])), ("x[:, 1:5:2]", slice_(x, 1, 1, 5, 2)),
                    ("x.reshape(3, 8)", reshape(x, [3, 8])),
                    ("x.t().reshape(24)", reshape(permute(x, [1, 0]), [24]))]:
    found = strided_view_of(view)
    print(f"{title:20}", f"strided: {found[1]} offset={found[1].offset}" if found else "not strided: copy")
assert strided_view_of(permute(x, [1, 0]))[1].stride == [1, 6]
assert strided_view_of(reshape(x, [3, 8]))[1].stride == [8, 1]
assert strided_view_of(reshape(permute(x, [1, 0]), [24])) is None

# %% [markdown]
# ## 5. The same, through the whole compiler
#
# Now let the real pipeline lower some views of a graph input and print the loads of
# the generated C++ kernels. The index in each `in_ptr0[...]` is the simplified
# composition we computed above, printed by `cexpr`. (Whether several outputs share
# one kernel is the scheduler's decision; either way each load carries its own index.)

# %%


def views_fn(x, y):
    return (x.t() * 2,                  # permute
            x[:, 1:5:2] + 1,            # slice with a step
            x + y,                      # broadcast y [6] over rows
            x.t().reshape(24).sin())    # reshape of a transpose: div and mod


y_t = torch.randn(6)
compiled = miniinductor.compile(views_fn)
outs = compiled(x_t, y_t)
for got, want in zip(outs, views_fn(x_t, y_t)):
    torch.testing.assert_close(got, want)
print("all four outputs match eager\n")

graph = last_compiled()[-1]
for name, kernel in graph.kernels.items():
    source, arg_names = kernel.source, kernel.args   # a GeneratedKernel: C++ source, argument buffer names...
    loads = [line.strip() for line in source.splitlines() if "in_ptr" in line and "=" in line]
    print(f"{name} (args {arg_names}):")
    for line in loads:
        print("    ", line)

# %% [markdown]
# ## Summary
#
# * Indices are SymPy expressions over loop variables; `FloorDiv` and
#   `ModularIndexing` express reshapes; `simplify_with_ranges` removes what the loop
#   ranges make redundant; `cexpr` prints C.
# * Every view is a `View(data, size, reindex)`: composing reindex functions is free at
#   compile time and costs nothing at run time.
# * `evaluate` lets you check an index expression against PyTorch itself.
#
# Next: [tutorial 5](05_lowering_aten_ops.py), where ATen graphs become this IR.
print("tutorial 4 done")
