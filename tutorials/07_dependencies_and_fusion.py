# %% [markdown]
# # Tutorial 7: Dependencies and fusion
#
# In this tutorial you will learn:
#
# * how the scheduler turns every buffer into a node and finds what it reads and writes
#   -- its **MemoryDeps** -- by running the node's body under a recording handler, with
#   *canonical* loop variables `c0, c1, ...` so that two nodes' indices can be compared;
# * **vertical fusion** (a producer computed inside its consumer's loops): a layer norm's
#   three buffers become one C++ kernel;
# * **horizontal fusion** (independent nodes that read the same inputs share a loop):
#   `h = x + r; return norm(h), h`, and two reductions of one tensor;
# * the rules that **refuse** a fusion -- ranges that differ, an index that differs, a
#   cycle through a node outside the pair -- and how to read every decision, with its
#   reason and score, from `miniinductor.explain(...)`;
# * how many bytes fusion saves: `fusion=False` against fusion on, kernel counts and
#   memory traffic, worked out by hand and checked against the compiler's own numbers.
#
# Files: `miniinductor/scheduler/scheduler.py` (nodes, deps, fusion rounds, order),
# `miniinductor/scheduler/fusion.py` (legality and score), `miniinductor/tools/debug/explain.py`.

# %%
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import miniinductor
from miniinductor.capture import decomposition_table
from miniinductor.config import Config
from miniinductor.lowering import GraphLowering
from miniinductor.scheduler import ExternKernelSchedulerNode, Scheduler, SchedulerNode
from miniinductor.tools.models import GPT2Block
from miniinductor.virtualized import V

torch.manual_seed(0)

# %% [markdown]
# ## 1. Scheduler nodes and their MemoryDeps
#
# We stop the pipeline right before fusion: lower a layer norm (tutorial 5) and hand the
# buffers to a `Scheduler` built with `Config(fusion=False)`. Every `ComputedBuffer`
# becomes a `SchedulerNode`; every ATen call an `ExternKernelSchedulerNode`.
#
# For each node the scheduler runs the same `inner_fn` closure that codegen will compile,
# but under a `RecordingHandler`: every `ops.load(name, index)` becomes a read
# `MemoryDep(name, index)`, every `ops.store` a write. The loop variables it passes in are
# the canonical `c0, c1, ...`: one per loop that is not of size 1, outer loops first, then
# the reduction loops. So "row `c0`, column `c1`" means the same thing in every node.

# %%


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


R, C = 8, 32
ln_args = [torch.randn(R, C), torch.randn(C), torch.randn(C)]
gm = make_fx(layer_norm, decomposition_table=decomposition_table())(*ln_args)
graph = GraphLowering(gm, ln_args, Config(), "layer_norm").run()
with V.set_graph_handler(graph):
    sched = Scheduler(graph.buffers, graph.output_names(), Config(fusion=False), graph.graph_inputs.values())

for node in sched.nodes:
    kind = "reduction" if node.is_reduction else "pointwise"
    loops = f"{node.outer}" + (f" x reduce {node.inner}" if node.is_reduction else "")
    print(f"{node.get_name()} ({kind}, loops {loops})")
    print("    reads: ", ", ".join(str(d) for d in node.reads))
    print("    writes:", ", ".join(str(d) for d in node.writes))

x_name = graph.graph_input_names[0]
first = sched.nodes[0]
assert isinstance(first, SchedulerNode) and first.is_reduction
assert any(d.name == x_name and str(d.index) == f"{C}*c0 + c1" for d in first.reads)
assert [str(d.index) for d in first.writes] == ["c0"]     # one value per row

# %% [markdown]
# Read it like this: the reductions read `x` at `32*c0 + c1` (row `c0`, column `c1`) and
# write one value per row at `c0`; the last node reads `x`, the weight at `c1`, the bias
# at `c1` and the per-row statistics at `c0`. Those indices are the whole story of
# fusion: a consumer can compute inside its producer's loop nest exactly when it reads
# each produced value at the index where it was written.
#
# An extern kernel (an ATen call such as `aten.mm`) is a black box: its deps are coarse,
# the whole of each input (index `0`) and the whole output.

# %%


def sin_mm_cos(x, w):
    return (x.sin() @ w).cos()


mm_args = [torch.randn(8, 8), torch.randn(8, 8)]
mm_gm = make_fx(sin_mm_cos, decomposition_table=decomposition_table())(*mm_args)
mm_graph = GraphLowering(mm_gm, mm_args, Config(), "mm").run()
with V.set_graph_handler(mm_graph):
    mm_sched = Scheduler(mm_graph.buffers, mm_graph.output_names(), Config(fusion=False),
                         mm_graph.graph_inputs.values())
for node in mm_sched.nodes:
    print(f"{type(node).__name__:27} {node.get_name()}: reads {[str(d) for d in node.reads]}, "
          f"writes {[str(d) for d in node.writes]}")
(extern,) = [n for n in mm_sched.nodes if isinstance(n, ExternKernelSchedulerNode)]
assert all(d.index == 0 for d in extern.reads + extern.writes)

# %% [markdown]
# ## 2. Asking the scheduler directly: `can_fuse`
#
# `Scheduler.can_fuse(a, b)` answers for two groups of nodes: `((R, Q), reason)` -- the
# loops of the fused kernel, outer `R` and reduction `Q` -- or `(None, reason)`. With
# fusion off, every computed node is a group of its own, so we can ask about any pair:

# %%
groups = sched.groups
for i, a in enumerate(groups):
    for b in groups[i + 1:]:
        shape, reason = sched.can_fuse(a, b)
        print(f"{a.get_name()} + {b.get_name()}: {'OK ' + str(shape) if shape else 'no'} ({reason})")
shape, reason = sched.can_fuse(groups[0], groups[1])
assert shape == ([R], [C]) and reason.startswith("vertical")

# %% [markdown]
# Pairs of reductions over the same rows line up; the first node and the output can not
# be fused *on their own*, because the output also needs a node that sits between them:
# computing the pair in one kernel would have to run that node in the middle of it
# (a **cycle**). The fusion rounds solve this by fusing neighbours first.
#
# ## 3. Vertical fusion: a layer norm in one kernel
#
# `miniinductor.explain(fn, *inputs, **options)` compiles `fn` afresh (Dynamo's cache is
# reset, so a cached compile never hides a decision), runs it once and returns
# everything that was decided. `.decisions` is the list of `FusionDecision(node1, node2,
# fused, reason, score)` in the order the rounds took them; the score is the number of
# bytes the fusion saves, and pairs are tried best score first.

# %%
ln = miniinductor.explain(layer_norm, *ln_args)
torch.testing.assert_close(ln.outputs, layer_norm(*ln_args))
for d in ln.decisions:
    print(d)
(kernel,) = ln.kernels
print()
print(kernel)
print(kernel.source)
assert all(d.fused and "vertical" in d.reason for d in ln.decisions)

# %% [markdown]
# One kernel, one loop over the rows. Inside it, one block per reduction (the mean's sum
# and the variance's) accumulates in a register, and the last block writes the
# normalized row. The statistics never touch memory: the only pointers are `x`, the
# weight, the bias and the output.
#
# ## 4. Horizontal fusion
#
# A fusion is *horizontal* when neither group reads what the other writes: they only
# share inputs. Computing them in one loop reads those inputs once instead of twice.
# First, a near miss -- a residual add whose result is returned *and* normalized:

# %%


def rmsnorm_residual(x, r, w):
    h = x + r
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w, h


rms_args = [torch.randn(R, C), torch.randn(R, C), torch.randn(C)]
rms = miniinductor.explain(rmsnorm_residual, *rms_args)
torch.testing.assert_close(rms.outputs, rmsnorm_residual(*rms_args))
for d in rms.decisions:
    print(d)
print(rms.kernels[0])
assert len(rms.kernels) == 1
assert all(d.fused and "vertical" in d.reason for d in rms.decisions)

# %% [markdown]
# `h` is a graph output, so lowering stores it the moment it is computed; the norm then
# *reads* it, and the fusions are vertical: one loop nest writes `h` and, in later loops
# over the same row, reads it back. A truly horizontal pair is two reductions of one
# tensor over the same rows: they share only their input.

# %%


def sum_and_max(x):
    return x.sum(1), x.amax(1)


sm_x = torch.randn(R, C)
sm = miniinductor.explain(sum_and_max, sm_x)
torch.testing.assert_close(sm.outputs, sum_and_max(sm_x))
(d,) = sm.decisions
print(d)
assert d.fused and "horizontal" in d.reason and d.score == sm_x.numel() * 4

# %% [markdown]
# ## 5. Refused fusions, and why
#
# Three rules say no. Each decision names the rule.
#
# **Ranges differ.** A sum over dim 0 loops over columns outside and rows inside; a max
# over dim 1 the other way round. One loop nest can not do both:

# %%


def col_sum_row_max(x):
    return (x * x).sum(0), x.abs().amax(1)


mix_x = torch.randn(R, C)
mix = miniinductor.explain(col_sum_row_max, mix_x)
torch.testing.assert_close(mix.outputs, col_sum_row_max(mix_x))
(d,) = mix.decisions
print(d)
assert not d.fused and "ranges differ" in d.reason

# %% [markdown]
# (Real Inductor makes one kernel for this pair on its GPU; we make two.)
#
# **Index differs.** Below, `a = x.sin()` must be stored because the matmul reads it from
# memory. The other output reads `a` *transposed*: element `(c0, c1)` needs `a[c1, c0]`,
# which another iteration of the same loop writes. The dependency rule catches it:

# %%


def transposed_reader(x, w):
    a = x.sin()
    return a @ w, a.t() * 2


tr_args = [torch.randn(8, 8), torch.randn(8, 8)]
tr = miniinductor.explain(transposed_reader, *tr_args)
torch.testing.assert_close(tr.outputs, transposed_reader(*tr_args))
(d,) = tr.decisions
print(d)
assert not d.fused and " reads " in d.reason and "written at" in d.reason

# %% [markdown]
# **A cycle.** `A` feeds an extern matmul, and `B` reads both `A` and the matmul's
# result. Fusing `A` and `B` into one kernel would have to run the matmul in the middle
# of that kernel: a path from `A` to `B` through a node outside the pair is a cycle in the
# graph of groups.

# %%


def through_a_matmul(x, w):
    a = x.sin() * 2        # A
    m = a @ w              # an extern kernel
    return a + m           # B


cyc = miniinductor.explain(through_a_matmul, *tr_args)
torch.testing.assert_close(cyc.outputs, through_a_matmul(*tr_args))
(d,) = cyc.decisions
print(d)
(mm_node,) = [n for n in cyc.graphs[0].scheduler.nodes if isinstance(n, ExternKernelSchedulerNode)]
assert not d.fused and f"cycle via {mm_node.get_name()}" in d.reason

# %% [markdown]
# The same decisions are logged by the `fusion` log switch: set
# `MINIINDUCTOR_LOGS=fusion` (or call `miniinductor.logs.set_logs("fusion")`) and
# every compile prints its decisions to stderr.
#
# A whole model shows all the rules at once. In a GPT-2 block, the layer norms fuse
# vertically, the Q/K/V copies horizontally, the softmax into one kernel; fusing the
# first layer norm with the final residual add is refused as a cycle (the attention's
# matmuls sit between them).
#
# We build the block with `max_seq=16`, the sequence length we run: its causal mask is a
# constant `[max_seq, max_seq]` tensor, and `bytes_moved` (section 6) counts every
# argument buffer whole, so the default 1024 x 1024 mask would be counted as 1 MiB read
# by the softmax kernel although it only reads the 16 x 16 corner.

# %%
block = GPT2Block(d_model=64, n_head=4, max_seq=16).eval()
bx = torch.randn(2, 16, 64)
with torch.no_grad():
    gpt = miniinductor.explain(block, bx)
    torch.testing.assert_close(gpt.outputs, block(bx), rtol=1e-4, atol=1e-4)
print(gpt)
assert len(gpt.kernels) <= 9   # real Inductor makes 9 on an H100
assert any(not d.fused and "cycle via" in d.reason for d in gpt.decisions)

# %% [markdown]
# ## 6. What fusion saves: bytes
#
# Each kernel reads its inputs from memory and writes its outputs back; whatever stays
# inside a kernel lives in registers. `GeneratedKernel.bytes_moved` adds up the bytes of every
# buffer a kernel takes as an argument, and `miniinductor.metrics.estimated_bytes_moved`
# adds it up over a compile.
#
# For the layer norm on an `[R, C]` float32 input the minimum is reading `x`, the weight
# and the bias once and writing the output once: `(2*R*C + 2*C) * 4` bytes. Fused, we move
# exactly that. Unfused, each statistic is written out and read back, and `x` is read
# again by every node.

# %%


def compiled_stats(fn, args, **options):
    miniinductor.metrics.reset()
    torch._dynamo.reset()
    out = miniinductor.compile(fn, **options)(*args)
    torch.testing.assert_close(out, fn(*args))
    m = miniinductor.metrics
    return m.generated_kernel_count, m.estimated_bytes_moved


R, C = 256, 512
big_args = [torch.randn(R, C), torch.randn(C), torch.randn(C)]
k_on, bytes_on = compiled_stats(layer_norm, big_args)
k_off, bytes_off = compiled_stats(layer_norm, big_args, fusion=False)
minimum = (2 * R * C + 2 * C) * 4
print(f"fusion on : {k_on} kernel(s), {bytes_on:>9,d} bytes moved")
print(f"fusion off: {k_off} kernel(s), {bytes_off:>9,d} bytes moved")
print(f"minimum   :            {minimum:>9,d} bytes")
assert k_on == 1 and k_off > 1
assert bytes_on == minimum and bytes_off > bytes_on

# %% [markdown]
# Where does the unfused number come from? These rows are long (512): the C++ kernels
# compute the variance as one *Welford* reduction (`lowering/reductions.var`; the rows of
# 32 in section 1 keep two sums, which are faster there), which gives m2, each row's sum of
# squared deviations from its mean, in one pass; the mean is the decomposition's own sum of
# `x`, which the fused kernel computes in the same loop. Unfused, each of the three kernels
# reads `x` in full (`3 * R*C` floats): the Welford m2 `buf0`, the row sum `buf1`, and the
# output; `buf0` and `buf1` are each written once and read once (`4 * R`); the weight and
# the bias are read once (`2 * C`) and the output is written once (`R*C`):
# `(4*R*C + 4*R + 2*C) * 4` bytes, about 2 times the minimum. (With two passes, the
# variance's mean is the same sum: `make_reduction` computes the same reduction of the same
# value once.) Let's check the arithmetic against the kernels' own argument lists:

# %%
off = miniinductor.explain(layer_norm, *big_args, fusion=False)
for k in off.kernels:
    print(f"  {k.name}: {', '.join(k.buffers)}  moves {k.bytes_moved:>9,d} bytes "
          f"({k.bytes_moved / (R * C * 4):.2f} x the input)")
total = sum(k.bytes_moved for k in off.kernels)
print(f"  total {total:,d} bytes = {total / minimum:.2f} x the minimum")
assert total == bytes_off == (4 * R * C + 4 * R + 2 * C) * 4

# %% [markdown]
# For memory-bound work, time follows bytes: the fused layer norm moves about
# `bytes_off / bytes_on` times less data, and tutorial 6 showed that the runtime follows.
#
# The same comparison for the GPT-2 block's forward, where matmuls (extern calls) break
# the graph into pieces that fusion can not cross:

# %%
with torch.no_grad():
    gpt_off = miniinductor.explain(block, bx, fusion=False)
    torch.testing.assert_close(gpt_off.outputs, block(bx), rtol=1e-4, atol=1e-4)
on_bytes = sum(k.bytes_moved for k in gpt.kernels)
off_bytes = sum(k.bytes_moved for k in gpt_off.kernels)
print(f"GPT-2 block forward: {len(gpt_off.kernels)} kernels unfused -> {len(gpt.kernels)} fused")
print(f"bytes moved by generated kernels: {off_bytes:,d} -> {on_bytes:,d}")
assert len(gpt.kernels) < len(gpt_off.kernels) and on_bytes < off_bytes

# %% [markdown]
# ## Summary
#
# * The scheduler learns each node's reads and writes by *running* its body under a
#   recording handler, with canonical loop variables `c0, c1, ...`.
# * Two groups fuse when their loops line up (same ranges, or a pointwise loop over a
#   reduction's rows or rows x columns), every value is read where it was written, no
#   outside node sits between them, and the result is under `max_fusion_size`.
# * Vertical fusion keeps intermediates in registers; horizontal fusion reads shared
#   inputs once. Pairs are tried by bytes saved, in rounds, until nothing fuses.
# * `miniinductor.explain(...)` gives every decision with its reason and score, the
#   kernels with their source ops, and the bytes each kernel moves.
print("tutorial 7 done")
