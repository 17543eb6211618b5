# %% [markdown]
# # Tutorial 9: Triton code generation
#
# In this tutorial you will learn:
#
# * how a Triton kernel differs from a C++ loop nest: each *program* handles a **block**
#   of `XBLOCK` (and `RBLOCK`) elements at once, and **masks** switch off the lanes that
#   fall past the end of the data;
# * how a loop nest of any rank becomes one **flattened** `xindex` (and `rindex`), and how
#   the loop variables `i0, i1, r0...` are recovered from it with `//` and `%`;
# * the two shapes of a reduction: **persistent** (the whole row in one block, straight-line
#   code: a softmax is one kernel that reads its input once) and **looped**
#   (`for roffset in range(...)` with block-shaped accumulators, when a row is longer
#   than 4096);
# * why a transposing copy is **tiled** over a 2-D grid of `[XBLOCK, RBLOCK]` tiles;
# * how a row reduction and a column reduction of the same input share one
#   **mix-order** kernel that reads the input once;
# * how the *same* fused group from the scheduler becomes Triton instead of C++, and how
#   the two kernels compare line by line;
# * how to run it all on the CPU (`miniinductor.compile(fn, cpu_backend="triton")` runs
#   Triton's interpreter) and on a GPU, and what the fused softmax saves in memory
#   traffic.
#
# Files: the Triton backend, `miniinductor/triton/`: `kernel.py` and `reduction.py`
# (TritonKernel), `tiling.py` (tile_split), `overrides.py` (TritonOverrides: the text of
# each op), `policy.py` (block-size heuristics, split rules), `runtime.py` and `helpers.py`
# (the module loader, the kernels' helpers and the interpreter's libdevice);
# `miniinductor/ext/mix_order/` (the mix-order extension: MixOrderKernel, section 6),
# `miniinductor/codegen/policy.py` (the backend policy),
# `miniinductor/compile_fx.py` (`generate_kernel`), `miniinductor/codegen/wrapper.py`.
#
# On the CPU the kernels run under Triton's *interpreter*: NumPy code, one program at a
# time. It is slow, so every tensor below is tiny. Where a GPU is present, section 9 runs
# the same functions on it.

# %%
import dataclasses
import time

import torch

import miniinductor
from miniinductor.compile_fx import collect_compiled, generate_kernel
from miniinductor.triton.overrides import TritonOverrides
from miniinductor.triton.policy import PERSISTENT_REDUCTION_MAX, block_sizes, tile_sizes
from miniinductor.triton.runtime import load_module
from miniinductor.virtualized import V

torch.manual_seed(0)
HAS_GPU = torch.cuda.is_available()


def compile_one(fn, *args, **options):
    """Compile `fn` afresh, run it once, check it against eager; return its CompiledGraph.
    (A sum adds in another order than eager does -- per block, then across the block --
    so float32 results differ in the last bits: compare with a tolerance.)"""
    torch._dynamo.reset()
    with collect_compiled() as graphs, torch.no_grad():
        out = miniinductor.compile(fn, **options)(*args)
    torch.testing.assert_close(out, fn(*args), rtol=1e-4, atol=1e-4)
    (graph,) = graphs
    return graph


def only_kernel(graph) -> str:
    """The source of a graph's single generated kernel."""
    (kernel,) = graph.kernels.values()   # name → GeneratedKernel
    return kernel.source


def kernel_part(source: str) -> str:
    """A Triton module without its imports and @triton.jit helpers: the kernel + launcher."""
    return source[source.index("@triton.jit\ndef triton_"):].strip()


def side_by_side(left: str, right: str, titles=("C++", "Triton"), width=58):
    """Print two sources in two columns (long lines are cut with a '~')."""
    a, b = left.strip().splitlines(), right.strip().splitlines()
    cut = lambda s: s if len(s) <= width else s[:width - 1] + "~"
    print(f"{titles[0]:<{width}} | {titles[1]}")
    print("-" * width + "-+-" + "-" * width)
    for k in range(max(len(a), len(b))):
        print(f"{cut(a[k]) if k < len(a) else '':<{width}} | {cut(b[k]) if k < len(b) else ''}")


# %% [markdown]
# ## 1. From one element at a time to one block at a time
#
# A C++ kernel (tutorial 6) is a loop nest: each iteration handles **one** element, and
# OpenMP splits the outer loop across a few threads. A GPU runs thousands of threads, and
# Triton lets us program them a **block** at a time. The kernel is launched on a *grid*
# of programs; program `p` handles elements `p*XBLOCK ... p*XBLOCK + XBLOCK - 1`, all at
# once, as a vector:
#
# ```python
# xoffset = tl.program_id(0) * XBLOCK        # where my block starts
# xindex = xoffset + tl.arange(0, XBLOCK)    # the XBLOCK element numbers I handle
# xmask = xindex < xnumel                    # False for lanes past the end
# tmp0 = tl.load(in_ptr0 + xindex, xmask)    # a whole block in one load
# ```
#
# `XBLOCK` is a power of two (Triton's blocks must be), the data rarely is, so the last
# block sticks out past the end: the **mask** turns those lanes off in every load and
# store. `XBLOCK` is a `tl.constexpr`: Triton compiles one kernel per value, which is how
# the block shape can be a compile-time constant.
#
# Our first function is a pointwise chain with a broadcast: `x` is `[20, 50]`, `b` is
# `[50]`. We compile it with `cpu_backend="triton"`: on CPU tensors the kernels run in
# Triton's interpreter.

# %%


def chain(x, b):
    return torch.relu((x * 2 + b) * x - 1)


chain_args = (torch.randn(20, 50), torch.randn(50))
chain_triton = compile_one(chain, *chain_args, cpu_backend="triton")
print(only_kernel(chain_triton))

# %% [markdown]
# How to read it:
#
# * The kernel is named as Inductor names it: `triton_poi_` (pointwise; `triton_per_` and
#   `triton_red_` are persistent and looped reductions), `fused_` and the ATen ops it
#   computes, then its number in the graph.
# * The module is self-contained: imports, then the `@triton.jit` kernel
#   `triton_poi_fused_add_mul_relu_sub_0`, then the **launcher**
#   `launch_triton_poi_fused_add_mul_relu_sub_0`, a plain Python function the wrapper
#   calls with the tensors. It picks the grid -- `(1,)`: `cdiv(1000, 1024)` programs -- and the block
#   sizes from `codegen/policy.py`'s heuristic (no autotuning: 1024 elements a
#   program, 4 warps).
# * The loop nest `[20, 50]` is **flattened**: `xnumel = 1000` and one `xindex` runs over
#   all of it. `x` is read contiguously, so its index is `xindex` itself. The bias is read
#   at column `i1`, recovered as `xindex % 50` (the row would be `xindex // 50`; it is
#   not needed, so it is not computed).
# * Every `tmpN` is a whole block (a vector of `XBLOCK` values); constants are 0-d
#   (`tl.full([], 2.0, tl.float32)`) and broadcast.
# * `tl.load(..., xmask, other=0)` and `tl.store(..., xmask)`: with `XBLOCK = 1024` and
#   1000 elements, the last 24 lanes are masked off.
#
# The mask matters. We can load the module ourselves and launch the kernel on an output
# buffer that is *longer* than 1000 elements, filled with NaN: the kernel must write
# exactly the first 1000.

# %%
module = load_module(only_kernel(chain_triton), interpret=True)
padded_out = torch.full((1024,), float("nan"))
(chain_name,) = chain_triton.kernels
assert chain_name == "triton_poi_fused_add_mul_relu_sub_0", chain_name
getattr(module, f"launch_{chain_name}")(chain_args[0], chain_args[1], padded_out)
torch.testing.assert_close(padded_out[:1000].view(20, 50), chain(*chain_args))
assert padded_out[1000:].isnan().all()
print("lanes 1000..1023 were masked off: the tail of the buffer is still NaN")

# %% [markdown]
# The wrapper's `call` (tutorial 6) is the same as for C++, except that it calls the
# launcher with tensors rather than raw pointers; the module is loaded from a file
# (`@triton.jit` reads its function's source with `inspect`), with `interpret=True` for
# CPU tensors:

# %%
wrapper = chain_triton.wrapper_source
print(wrapper[wrapper.index("def call"):].strip())

# %% [markdown]
# ## 2. The same group, in C++ and in Triton
#
# Lowering and the scheduler produce the same kind of **fused group** for both backends --
# a list of nodes, outer loops `R` and reduction loops `Q` -- and
# the graph's backend policy (`GraphLowering.policy`, chosen once per graph) says who writes
# it: Triton for CUDA tensors, and on the CPU the `cpu_backend` option (`"cpp"` by default).
# (A few earlier decisions read the policy too: an `addmm` is split for Triton, a mix-order
# pair (section 6) is Triton-only, and only C++ kernels store a twice-read transcendental
# value rather than recompute it.) `generate_kernel(group, ...)` then
# builds a `CppKernel` or a Triton kernel (the first kernel kind in `passes.KERNEL_KINDS`
# that takes the group: the extensions' mix-order and combo kernels, then
# `kernel_for_group(group)` in triton/tiling.py, which picks a plain or tiled one). Both are **ops handlers**
# (tutorial 3): each node's `inner_fn` runs under the kernel, and every `ops.load`,
# `ops.add`... writes one line of C++ or of Triton. Only the spelling of each op differs;
# `TritonOverrides` holds Triton's:

# %%
for op, args in [("add", ("a", "b")), ("relu", ("a",)), ("maximum", ("a", "b")), ("floordiv", ("a", "b"))]:
    for dtype in (torch.float32, torch.int64):
        call = f"ops.{op}({', '.join(args)})"
        print(f"{call:20} {dtype!s:14} -> {getattr(TritonOverrides, op)(*args, dtype=dtype)}")

# %% [markdown]
# (Where torch and Triton disagree -- NaN in `max`, floor division of negative integers --
# the dtype picks a spelling with torch's meaning.)
#
# Now compile the chain again with the default C++ backend and compare. The scheduler's
# group is the same (its buffers and loops); only the kernel differs, and its name
# (`cpp_fused_...` rather than `triton_poi_fused_...`):

# %%
chain_cpp = compile_one(chain, *chain_args)
print("C++ groups:   ", [str(g) for g in chain_cpp.fused_groups()])
print("Triton groups:", [str(g) for g in chain_triton.fused_groups()])
loops = lambda graph: [(g.get_names(), g.R, g.Q) for g in graph.fused_groups()]  # noqa: E731
assert loops(chain_cpp) == loops(chain_triton)
print()
side_by_side(only_kernel(chain_cpp), kernel_part(only_kernel(chain_triton)))

# %% [markdown]
# Line for line: the C++ loops `for i0` / `for i1` became `xindex` and the grid; the loop
# bounds became `xmask`; `in_ptr0[50*i0 + i1]` became `tl.load(in_ptr0 + (xindex), ...)`
# (the contiguous run of dimensions was merged); `mi_relu` became a `tl.where`. The
# `tmp` numbering is the same because the same closure ran under both handlers.
#
# We can show that it really is *one* group: take the group the C++ compile scheduled and
# hand it to the Triton kernel generator ourselves. The result is the very source the
# Triton compile produced.

# %%
(group,) = chain_cpp.fused_groups()
# the compile's Context (passes.py) holds its config, policy and scheduler; the same Context
# with the Triton compile's policy asks for a Triton kernel
as_triton = dataclasses.replace(chain_cpp.context, policy=chain_triton.context.policy)
with V.set_graph_handler(chain_cpp.graph):
    by_hand = generate_kernel(group, as_triton)
    cpp_again = generate_kernel(group, chain_cpp.context)
    # record() names the kernel and generates it (codegen() looks up dtypes in V.graph)
    assert by_hand.record(group, 0).source == only_kernel(chain_triton)
    assert cpp_again.record(group, 0).source == only_kernel(chain_cpp)
print(type(by_hand).__name__, "and", type(cpp_again).__name__, "from one group:", group)

# %% [markdown]
# ## 3. A persistent reduction: softmax in one kernel
#
# A reduction group has rows (`R`, flattened into `xindex`) and a reduction (`Q`,
# flattened into `rindex`). Each program now holds a 2-D block, `[XBLOCK, RBLOCK]`:
# `xindex` is a column `[XBLOCK, 1]`, `rindex` a row `[1, RBLOCK]`, and they broadcast.
# When a row is short enough (`rnumel <= 4096`), `RBLOCK` is the next power of two above
# it and the whole row sits in registers: the reduction is **persistent**. There is no
# loop at all:
#
# * load the `[XBLOCK, RBLOCK]` block once, masked by `xmask & rmask`;
# * `tl.where(mask, value, identity)` puts the reduction's identity (`-inf` for max, `0`
#   for sum) in the masked lanes, then `tl.reduce(..., 1, combine)[:, None]` folds each
#   row into a `[XBLOCK, 1]` column;
# * the next step uses that column against the *same* loaded block.
#
# Softmax is max, then sum of exp, then divide: three buffers that the scheduler fuses
# into one group (tutorial 7). Rows of 33 columns show the masks at work (`RBLOCK = 64`).

# %%


def softmax(x):
    return torch.softmax(x, dim=-1)


sm_args = (torch.randn(8, 33),)
sm_triton = compile_one(softmax, *sm_args, cpu_backend="triton")
sm_source = only_kernel(sm_triton)
print(sm_triton.fused_groups()[0])
print(sm_source)
assert len(sm_triton.kernels) == 1 and "persistent reduction" in sm_source and "for roffset" not in sm_source
assert sm_source.count("tl.load(") == 1   # x is read once

# %% [markdown]
# * The helpers `_max_combine` (NaN-propagating, as `torch.amax`) and `_sum_combine` are
#   included in the module because the kernel calls them.
# * `tmp0` -- the block of `x` -- is loaded **once** and used three times. The max (`tmp2`)
#   and the sum (`tmp6`) never touch memory: the only pointers are the input and the
#   output. `x` is read once and the output written once, the least any softmax can do.
# * `XBLOCK = 8`: all 8 rows fit in one program (the heuristic aims for 4096 elements a
#   block); with more rows the grid grows.
#
# The C++ kernel for the same softmax walks each row several times (one loop per block):
# a CPU core has no registers for a whole row, so it rereads the row from its cache. On the
# CPU, lowering also stores `exp(x - max)` once (the output then overwrites it in place)
# instead of computing the exponential twice, so its group holds one more buffer.

# %%
sm_cpp = compile_one(softmax, *sm_args)
assert len(sm_cpp.fused_groups()) == len(sm_triton.fused_groups()) == 1
side_by_side(only_kernel(sm_cpp), kernel_part(sm_source))

# %% [markdown]
# `rindex` is flattened like `xindex`. Summing a `[4, 6, 10]` tensor over dims `(0, 2)`
# reduces 40 elements per output that are *not* contiguous in memory: the loop
# variables come back with `//` and `%`, and the load's address is built from them.

# %%
sum02 = compile_one(lambda x: x.sum((0, 2)), torch.randn(4, 6, 10), cpu_backend="triton")
print(sum02.fused_groups()[0])
print(kernel_part(only_kernel(sum02)))
assert "r0 = (rindex // 10)" in only_kernel(sum02) and "r1 = rindex % 10" in only_kernel(sum02)

# %% [markdown]
# ## 4. A looped reduction: rows longer than 4096
#
# A row of 5000 floats is past `PERSISTENT_REDUCTION_MAX` (4096): a block that big would
# not fit in one program's registers. The reduction is then **looped**: each program
# takes one row (`XBLOCK = 1`) and walks it in chunks of `RBLOCK = 2048`:
#
# * the accumulator `_acc0` is block-shaped, `[XBLOCK, RBLOCK]`, and starts at the
#   identity; each chunk is added *element-wise* (`tl.where` keeps masked lanes as they
#   were), so the loop body is pure vector work;
# * after the loop, one `tl.reduce` folds the accumulator into the row's result.

# %%


def row_sum(x):
    return x.sum(1)


rs_args = (torch.randn(2, 5000),)
rs_triton = compile_one(row_sum, *rs_args, cpu_backend="triton")
rs_source = only_kernel(rs_triton)
print(kernel_part(rs_source))
assert PERSISTENT_REDUCTION_MAX < 5000
assert "looped reduction" in rs_source and "for roffset in range(0, 5000, 2048)" in rs_source

# %% [markdown]
# 5000 = 2048 + 2048 + 904: the third chunk is partly masked (`rmask`). The loop bounds are
# literals (Triton 3.6's interpreter cannot take a `constexpr` in `range()`: see
# `TritonKernel._codegen`), and the launcher's `RBLOCK=2048` matches them. Beside it the
# C++ kernel, a plain scalar loop with an OpenMP `simd` reduction:

# %%
rs_cpp = compile_one(row_sum, *rs_args)
side_by_side(only_kernel(rs_cpp), kernel_part(rs_source))

# %% [markdown]
# A softmax over such rows is still one kernel, but it can no longer keep the row in
# registers: every block that reads a finished reduction starts a new loop (as Inductor
# does). The max and the sum of `exp(x - max)` share one loop, an *online softmax*: each
# lane keeps a running max `m` and sum `s`, and a larger value `x` rescales the sum,
# `s = s * exp(m - x) + 1` (`_online_softmax_combine`). So `x` is read twice, once for the
# pair and once for the output, where the two-pass form (max, then sum) reads it three times.

# %%
long_sm = compile_one(softmax, torch.randn(2, 5000), cpu_backend="triton")
long_sm_source = only_kernel(long_sm)
print(f"{len(long_sm.kernels)} kernel, {long_sm_source.count('for roffset')} loops, "
      f"{long_sm_source.count('tl.load(')} loads of x")
assert len(long_sm.kernels) == 1 and long_sm_source.count("for roffset") == 2
assert "_online_softmax_combine" in long_sm_source

# %% [markdown]
# The block sizes are a small heuristic, easy to call directly: pointwise 1024 elements a
# program; a persistent reduction fills about 4096 elements (at most 64 rows); a looped one
# takes one row and 2048 columns at a time; an *outer* reduction (summing columns, where
# memory is contiguous along `x`) takes a few columns and many rows.

# %%
print("pointwise 1000:          ", block_sizes(1000, None, False, False))
print("softmax 8 x 33:          ", block_sizes(8, 33, True, False))
print("softmax 4096 x 1024:     ", block_sizes(4096, 1024, True, False))
print("row sum 2 x 5000:        ", block_sizes(2, 5000, False, False))
print("column sum 5000 x 3:     ", block_sizes(3, 5000, False, True))
print("tiled transpose 80 x 96: ", tile_sizes(80, 96))

# %% [markdown]
# ## 5. Tiling a transpose
#
# `x.t().contiguous()` reads `x` down its columns and writes the output along its rows.
# Flattened into one `xindex`, the store would be contiguous but the load would jump by
# a whole row from one lane to the next: on a GPU each lane then pulls its own 32-byte
# memory sector, and most of every sector is wasted.
#
# `tile_split` spots an access whose last dimension has a stride > 1 while an earlier
# dimension has stride 1, and cuts the group's ranges in two: the first part becomes the
# `x` dimension, the second takes the `r` slot and the **second grid axis**
# (`tl.program_id(1)`). Each program handles a `[XBLOCK, RBLOCK]` tile: the load is
# contiguous down the tile's columns (`i0 + 80*r0`: consecutive `i0`), the store along its
# rows (`96*i0 + r0`), and Triton's compiler moves the tile through shared memory between
# the two, so both sides are coalesced. No reduction happens: `r` is only a second tile
# dimension.

# %%


def transpose_copy(x):
    return x.t().contiguous()


tr_args = (torch.randn(96, 80),)
tr_triton = compile_one(transpose_copy, *tr_args, cpu_backend="triton")
tr_source = only_kernel(tr_triton)
print(tr_triton.fused_groups()[0])
print(kernel_part(tr_source))
assert "tiled pointwise" in tr_source and "tl.program_id(1)" in tr_source
assert f"{next(iter(tr_triton.kernels))}[(2, 2)]" in tr_source   # 80 x 96 in 64 x 64 tiles: a 2 x 2 grid

# %% [markdown]
# The C++ kernel for the same group does not tile: it reads `x` with a stride of 80
# floats and relies on the CPU's caches (a `[96, 80]` matrix fits in them).

# %%
tr_cpp = compile_one(transpose_copy, *tr_args)
side_by_side(only_kernel(tr_cpp), kernel_part(tr_source))

# %% [markdown]
# Tiles are only worth it when both sides are at least 16 long. A small transpose is
# flattened like any pointwise kernel, and the loop variables come back with `//`, `%`:

# %%
small_tr = compile_one(transpose_copy, torch.randn(6, 10), cpu_backend="triton")
print(kernel_part(only_kernel(small_tr)))
assert "pointwise: xnumel=60" in only_kernel(small_tr)

# %% [markdown]
# ## 6. A row and a column reduction in one pass (mix-order)
#
# `x.sum(0)` (one value per column) and `x.amax(1)` (one per row) read the same `[M, N]`
# input, but no loop nest fits both: the first reduces over the rows, the second over the
# columns, so the scheduler's usual rule ("same `(R, Q)`") keeps them apart and the input
# crosses memory twice: `2MN` floats read. On the GPU that capped this pair at 47% of
# copy bandwidth.
#
# The mix-order extension's pass `fuse_mix_order` (`ext/mix_order/schedule.py`) pairs them
# anyway, and its `MixOrderKernel` (`ext/mix_order/kernel.py`) generates one kernel in
# which each program takes a **band** of rows: every row is reduced whole, as in section 3,
# while the band's column partials are folded into an accumulator of one row
# (`tl.reduce(..., 0, ...)`). Each
# program stores its partial row; the launcher combines the bands' partial rows with one
# small ATen reduction. Reads: `MN` floats, plus `bands x N` partials.
#
# The column node's body runs with its loop variables swapped (its rows are the kernel's
# reduction dimension), so its load prints the same text as the row node's and CSE shares
# it: one `tl.load` feeds both reductions. By default only inputs of 4M elements or more
# are paired (below that the extra launch costs more than the read it saves), so this tiny
# example lowers the bar with `mix_order_min_numel=0`.

# %%


def colsum_rowmax(x):
    return x.sum(0), x.amax(1)


mix_x = torch.randn(256, 32)   # the band loop needs at least 256 rows
mixed = compile_one(colsum_rowmax, mix_x, cpu_backend="triton", mix_order_min_numel=0)
mix_source = only_kernel(mixed)
print(mixed.fused_groups()[0])
print(kernel_part(mix_source))
assert "mix-order reduction" in mix_source and mix_source.count("tl.load(") == 1
two = compile_one(colsum_rowmax, mix_x, cpu_backend="triton")   # the default bar: two kernels
mixed_bytes, two_bytes = (sum(k.bytes_moved for k in g.kernels.values()) for g in (mixed, two))
print(f"input read once: {mixed_bytes:,d} bytes in {len(mixed.kernels)} kernel; "
      f"without mix-order: {two_bytes:,d} bytes in {len(two.kernels)} kernels")
assert len(two.kernels) == 2 and two_bytes > mixed_bytes

# %% [markdown]
# ## 7. Memory traffic of the fused softmax
#
# Softmax over an `[R, C]` float32 tensor, `N = R*C` elements. Eager PyTorch run op by op
# (`amax`, `sub`, `exp`, `sum`, `div`: what the decomposition does) moves, in floats:
#
# | op | reads | writes |
# |---|---|---|
# | `m = x.amax(-1)`    | N      | R |
# | `d = x - m`         | N + R  | N |
# | `e = d.exp()`       | N      | N |
# | `s = e.sum(-1)`     | N      | R |
# | `out = e / s`       | N + R  | N |
#
# that is `8N + 4R` floats. Our fused kernel reads `x` once and writes `out` once:
# `2N` floats, about **4x** less. (The hand-written `torch.softmax` kernel of eager
# PyTorch is also a single pass: `2N`. Fusion lets a compiler reach that for *any*
# chain of ops, not only the ones someone wrote a kernel for.)
#
# Without fusion (`fusion=False`) our lowering already inlines the pointwise ops into
# their consumers, so three kernels remain: the max reads `x` (N) and writes `R`, the
# sum reads `x` and the max and writes `R`, the output reads `x` and both statistics and
# writes `N`: `4N + 5R` floats. The compiler's own count (each kernel's argument buffers,
# each kernel's `bytes_moved`) agrees:

# %%
R, C = 16, 64   # tiny: the interpreter's tl.reduce is slow (a 64 x 256 softmax takes seconds)
N = R * C
mem_x = torch.randn(R, C)
fused = compile_one(softmax, mem_x, cpu_backend="triton")
unfused = compile_one(softmax, mem_x, cpu_backend="triton", fusion=False)
fused_bytes, unfused_bytes = (sum(k.bytes_moved for k in g.kernels.values()) for g in (fused, unfused))
print(f"op by op (eager decomposition): {(8 * N + 4 * R) * 4:>8,d} bytes")
print(f"miniinductor, fusion=False:     {unfused_bytes:>8,d} bytes in {len(unfused.kernels)} kernels")
print(f"miniinductor, fused:            {fused_bytes:>8,d} bytes in {len(fused.kernels)} kernel")
assert fused_bytes == 2 * N * 4
assert unfused_bytes == (4 * N + 5 * R) * 4 and len(unfused.kernels) == 3

# %% [markdown]
# The count is of *buffers a kernel touches*, so it is exact for a persistent reduction.
# A looped softmax (section 4) reads each row three times, `4N` floats in all; its rows
# (20 KB for 5000 floats) usually come back from the GPU's L2 cache on the second and
# third pass, so it costs less than the count suggests, but more than `2N`.
#
# ## 8. Timing
#
# On the CPU the kernels above ran in Triton's **interpreter**: each program is a series of
# NumPy calls on blocks, with Python overhead on every line. Its timings mean nothing for a
# GPU -- they say how slow Python is, not how fast the kernel is. We print one only to make
# that point, and benchmark on a GPU only.

# %%


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


if not HAS_GPU:
    torch._dynamo.reset()
    compiled_softmax = miniinductor.compile(softmax, cpu_backend="triton")
    with torch.no_grad():
        compiled_softmax(mem_x)            # compile (and warm up) outside the timing
        softmax(mem_x)
        interp_s = timed(compiled_softmax, mem_x)
        eager_s = min(timed(softmax, mem_x) for _ in range(5))
    print(f"interpreted Triton softmax {R}x{C}: {interp_s * 1e3:.1f} ms; eager: {eager_s * 1e3:.3f} ms")
    print("No GPU here: timings of the Triton interpreter mean nothing, so there is no benchmark.")
    print("On a machine with CUDA, section 9 compiles these functions for the GPU and times them.")

# %% [markdown]
# ## 9. On the GPU
#
# With CUDA tensors, Triton is the default backend (no option needed): the kernels are
# compiled by Triton to GPU code instead of being interpreted. The Triton source is the
# same text as on the CPU for the same shapes -- only the wrapper (device of the buffers,
# `interpret=False`) differs. This section runs only where `torch.cuda.is_available()`.

# %%
if HAS_GPU:
    cases = [(chain, chain_args, chain_triton), (softmax, sm_args, sm_triton),
             (row_sum, rs_args, rs_triton), (transpose_copy, tr_args, tr_triton)]
    for fn, cpu_args, cpu_graph in cases:
        gpu_args = tuple(a.cuda() for a in cpu_args)
        gpu_graph = compile_one(fn, *gpu_args)           # asserts the result against eager
        assert only_kernel(gpu_graph) == only_kernel(cpu_graph)
        print(f"{fn.__name__:15} on {torch.cuda.get_device_name()}: matches eager, same kernel as on the CPU")
    big = torch.randn(64, 4100, device="cuda")           # a looped softmax on the GPU too
    compile_one(softmax, big)
    print("looped softmax on the GPU matches eager")

# %% [markdown]
# A small benchmark of the fused softmax on a tensor well beyond the GPU's caches,
# against eager's hand-written `torch.softmax` (one pass, `2N`), eager op by op
# (`8N + 4R`), and a plain copy of the same bytes (`x.clone()`, read N + write N: the
# best any one-pass kernel can do). The "achieved" column divides the `2N` floats that
# must move by the time. Each call of the compiled function also costs tens of
# microseconds of Python on the CPU (Dynamo's guards, the wrapper, Triton's launcher), so
# the tensor is made big enough (64 MiB) for the GPU's time to dominate; `do_bench`
# reports the median of many runs.

# %%
if HAS_GPU:
    from triton.testing import do_bench

    def softmax_op_by_op(x):
        m = x.amax(-1, keepdim=True)
        e = (x - m).exp()
        return e / e.sum(-1, keepdim=True)

    R_gpu, C_gpu = 16384, 1024
    xg = torch.randn(R_gpu, C_gpu, device="cuda")
    torch._dynamo.reset()
    fused_softmax = miniinductor.compile(softmax)
    with torch.no_grad():
        torch.testing.assert_close(fused_softmax(xg), softmax(xg))
        timings = {
            "x.clone() (copy)": do_bench(lambda: xg.clone(), return_mode="median"),
            "miniinductor fused": do_bench(lambda: fused_softmax(xg), return_mode="median"),
            "eager torch.softmax": do_bench(lambda: softmax(xg), return_mode="median"),
            "eager op by op": do_bench(lambda: softmax_op_by_op(xg), return_mode="median"),
        }
    must_move = 2 * R_gpu * C_gpu * 4
    print(f"softmax over [{R_gpu}, {C_gpu}] float32 on {torch.cuda.get_device_name()}")
    for label, ms in timings.items():
        print(f"  {label:22} {ms * 1e3:8.1f} us   {must_move / (ms * 1e-3) / 1e9:7.0f} GB/s achieved")
    print(f"  fused vs op by op: {timings['eager op by op'] / timings['miniinductor fused']:.2f}x "
          f"(traffic predicts about {(8 * R_gpu * C_gpu + 4 * R_gpu) / (2 * R_gpu * C_gpu):.1f}x)")

# %% [markdown]
# ## Summary
#
# * A Triton program handles a block: `xindex = program_id * XBLOCK + arange(XBLOCK)`,
#   with `xmask` switching off lanes past `xnumel`. Loop nests are flattened into
#   `xindex` / `rindex`, and loop variables are recovered with `//` and `%` only where
#   an index needs them.
# * Reductions are **persistent** (the whole row in one `[XBLOCK, RBLOCK]` block, read
#   once: a softmax reads `x` once and writes once) up to 4096 columns, **looped** beyond
#   (block-shaped accumulators, one `tl.reduce` after the loop, a new loop for each block
#   that reads a finished reduction).
# * Transposing copies are **tiled**: a 2-D grid of `[XBLOCK, RBLOCK]` tiles, coalesced on
#   both sides.
# * The scheduler's fused group is the same for both backends; `kernel_backend()` picks
#   `TritonKernel` or `CppKernel`, and each runs the same `inner_fn` closures as an ops
#   handler that writes its own language.
# * `cpu_backend="triton"` runs the kernels in Triton's interpreter: good for reading and
#   testing, meaningless for timing.
print("tutorial 9 done")
