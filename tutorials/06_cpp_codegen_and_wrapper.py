# %% [markdown]
# # Tutorial 6: C++/OpenMP code generation and the Python wrapper
#
# In this tutorial you will learn:
#
# * how `compile_graph` runs every phase for one ATen graph and keeps each artifact:
#   the lowered graph, the schedule, the C++ kernels and the Python wrapper;
# * how to read a generated kernel: the loop nest, the fused reduction blocks, the
#   `#pragma omp parallel for` / `#pragma omp simd` lines and when they appear;
# * what the wrapper's `call(args)` does: allocate, launch, free after last use;
# * how the kernel cache works (`MINIINDUCTOR_CACHE_DIR`) and what a cold and a warm
#   compile cost;
# * why fusion is fast: the memory traffic of an unfused (eager) pointwise chain versus
#   a fused kernel, and a small benchmark to check the arithmetic.
#
# Files: `miniinductor/compile_fx.py`, `miniinductor/codegen/cpp.py`,
# `miniinductor/codegen/wrapper.py`, `miniinductor/runtime/cpp_builder.py`.

# %%
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import miniinductor
from miniinductor.capture import decomposition_table
from miniinductor.compile_fx import compile_graph, last_compiled
from miniinductor.config import Config

torch.manual_seed(0)
CORE = Config(extensions=())   # the core path alone (docs/architecture.md)

# A private kernel cache for this tutorial, so that the first build below is always
# cold (and so that we can list what it contains). The variable is read at every
# build, so setting it here is enough.
cache_root = tempfile.TemporaryDirectory(prefix="miniinductor-tutorial6-")
os.environ["MINIINDUCTOR_CACHE_DIR"] = cache_root.name

# %% [markdown]
# ## 1. One graph through every phase: `compile_graph`
#
# `compile_graph(gm, example_inputs, config, name)` is the compiler proper (what
# AOTAutograd calls for each forward/backward graph). It returns a `CompiledGraph`
# holding every artifact: `.graph` (GraphLowering, tutorial 5), `.scheduler`,
# `.kernels` (`{name: GeneratedKernel}`: each kernel's language, C++ source, argument
# buffer names, in-place pairs, origins and bytes moved), `.wrapper_source`,
# `.path` (the wrapper file) and `.call`.
#
# Our example is a scaled softmax plus a bias: two reductions and some pointwise work.
# We compile with the core alone (`CORE`: every extension off), so that the kernels printed
# are written by the one `CppKernel` class of `codegen/cpp.py`; the default options add the
# `cpu_fast` extension's loop forms (explicit vectors, tiles: `miniinductor/ext/cpu_fast/`).

# %%


def softmax_fn(x, y):
    return (torch.softmax(x * y, dim=-1) + 1,)


args = [torch.randn(64, 1024), torch.randn(1024)]
gm = make_fx(softmax_fn, decomposition_table=decomposition_table())(*args)
print(gm.code.strip())

start = time.perf_counter()
compiled = compile_graph(gm, args, CORE, name="softmax")
cold_s = time.perf_counter() - start
print(f"\ncompile_graph took {cold_s:.2f} s (lowering, scheduling, codegen and a cold C++ build)")

(out,) = compiled(list(args))
torch.testing.assert_close(out, softmax_fn(*args)[0])
print("compiled softmax matches eager")

# %% [markdown]
# ## 2. The schedule and the kernel
#
# Lowering produced three buffers (the max, the sum and the output). The scheduler
# fused them into **one** kernel over the 64 rows, because they share loops `[64]` and
# a reduction range `[1024]`; the max and the sum never reach memory -- they live in
# registers (`acc0`, `acc1`).

# %%
print(compiled.scheduler)
print()
for name, kernel in compiled.kernels.items():
    source, arg_names = kernel.source, kernel.args
    print(f"// {name}: arguments {arg_names}")
    print(source)

# %% [markdown]
# How to read it:
#
# * **Parameters**: each buffer the kernel reads is `const float* __restrict__ in_ptrN`,
#   each one it writes `float* __restrict__ out_ptrN` (`__restrict__` promises no
#   aliasing, so the compiler may vectorize freely).
# * **`#pragma omp parallel for`** on the outer loop: the 64 rows are split across
#   threads. It is only emitted when the loop nest has at least
#   `Config.parallel_min_numel` (32768) elements -- starting an OpenMP team costs
#   microseconds, more than a small kernel's whole run.
# * Inside a row, **one block per fused reduction**: the max, then the sum of
#   `exp(x*y - max)`, then the output. A row this long (64 elements or more) is walked in
#   steps of 32, element `t` of a step folded into accumulator `acc1_lanes[t]`: under
#   `#pragma omp simd` those are 4 vectors of independent adds, where one accumulator
#   would wait for each add to finish; the 32 lanes are summed after the loop (a shorter
#   row: `#pragma omp simd reduction(+:acc1)`). Either way the sum is reassociated, so
#   the result can differ from eager in the last bits: compare with a tolerance.
# * `x * y` is recomputed in each block: cheaper than storing and reloading it.
#
# To see the threshold at work, compile the same graph for a tiny input and for a big
# one, and look only at the pragmas:

# %%


def pragmas(compiled_graph):
    return [line.strip() for kernel in compiled_graph.kernels.values()
            for line in kernel.source.splitlines() if line.strip().startswith("#pragma")]


small_args = [torch.randn(4, 8), torch.randn(8)]
small = compile_graph(make_fx(softmax_fn, decomposition_table=decomposition_table())(*small_args),
                      small_args, CORE, name="softmax_small")
print("4 x 8 input:    ", pragmas(small))
print("64 x 1024 input:", pragmas(compiled))
assert not any("parallel" in p for p in pragmas(small))
assert any("omp parallel for" in p for p in pragmas(compiled))
torch.testing.assert_close(small(list(small_args))[0], softmax_fn(*small_args)[0])

# %% [markdown]
# With `Config(fusion=False)` the scheduler keeps one kernel per buffer, and the max and
# the sum of `exp(x*y - max)` make a round trip through memory (they are now kernel
# arguments). Softmax arrives as `prepare_softmax_online` (the pair max, sum; see
# triton/softmax.py), whose lowering computes the exponentials inside the sum's loop, so
# the output kernel computes them again rather than reading a stored copy:

# %%
unfused = compile_graph(gm, args, CORE.replace(fusion=False), name="softmax_unfused")
print(unfused.scheduler)
for name, kernel in unfused.kernels.items():
    print(f"  {name} arguments: {kernel.args}")
assert len(unfused.kernels) == 3 and len(compiled.kernels) == 1
torch.testing.assert_close(unfused(list(args))[0], softmax_fn(*args)[0])

# %% [markdown]
# ## 3. The wrapper
#
# The wrapper is an ordinary Python module, written to the cache folder and imported.
# Its top holds the C++ source of all kernels (`CPP_SOURCE`), built once by
# `load_kernels` and loaded with `ctypes`. Its `call(args)`:
#
# * unpacks the inputs and **clears `args`** (the "boxed" convention: the caller's list
#   no longer keeps the inputs alive, so they can be freed as early as possible);
# * **allocates** each buffer that must exist in memory with `empty_strided` (eager's
#   strides for outputs);
# * **launches** kernels with raw data pointers (`t.data_ptr()`, declared `c_void_p`) and extern
#   ATen ops by name; the comment after a kernel call names the FX nodes its buffers
#   came from;
# * **`del`s** each buffer after its last use, and returns the outputs.

# %%
wrapper = compiled.wrapper_source
print("wrapper file:", compiled.path)
print(wrapper[:wrapper.index("CPP_SOURCE")].strip())
print("CPP_SOURCE = r'''...the kernels above...'''")
print(wrapper[wrapper.index("_kernels = load_kernels"):].strip())
assert Path(compiled.path).read_text() == wrapper

# %% [markdown]
# A graph with an extern call shows the other kind of step. A matmul falls back to
# `aten.mm` (tutorial 5); the wrapper calls it through `torch.mm` (faster than the
# `torch.ops.aten.mm.default` overload; other extern ops are called that way and
# `check_layout` then checks the strides they return) and hands its output to the next kernel:

# %%


def mlp_fn(x, w):
    return (torch.relu(x @ w) * 2,)


mlp_args = [torch.randn(8, 16), torch.randn(16, 32)]
mlp = compile_graph(make_fx(mlp_fn, decomposition_table=decomposition_table())(*mlp_args),
                    mlp_args, CORE, name="mlp")
print(mlp.wrapper_source[mlp.wrapper_source.index("def call"):].strip())
torch.testing.assert_close(mlp(list(mlp_args))[0], mlp_fn(*mlp_args)[0])

# %% [markdown]
# ## 4. The kernel cache
#
# Building C++ takes about a second, so builds are cached on disk under
# `$MINIINDUCTOR_CACHE_DIR` (default `~/.cache/miniinductor`). The key is a hash of
# the full source (with the prelude of helper functions), the compiler flags and the
# compiler's `--version`: a changed kernel or compiler never reuses a stale build.
# Every file is written under a temporary name and moved into place with `os.replace`,
# which is atomic: two processes building the same kernel never see a half-written
# library. Wrappers are cached the same way, keyed by their source.

# %%
files = sorted(p.relative_to(cache_root.name) for p in Path(cache_root.name).rglob("*") if p.is_file())
for path in files:
    print("  ", path)
assert any(str(p).endswith(".so") for p in files) and any(str(p).endswith("_wrapper.py") for p in files)

start = time.perf_counter()
again = compile_graph(gm, args, CORE, name="softmax")
warm_s = time.perf_counter() - start
print(f"\ncold compile: {cold_s:.3f} s   warm compile (same graph, cache hit): {warm_s:.3f} s")
assert next(iter(again.kernels.values())).source == next(iter(compiled.kernels.values())).source

# %% [markdown]
# ## 5. Through the front door
#
# `miniinductor.compile(fn)` runs the same `compile_graph` for each graph AOTAutograd
# produces; `miniinductor.compile_fx.last_compiled()` returns the most recent
# `CompiledGraph`s, so every artifact above is available for any model you compile.
#
# ## 6. Why fusion pays: memory traffic of a pointwise chain
#
# Take a chain of five cheap pointwise ops over `N` float32 elements:
#
# ```python
# def chain(x, y):
#     return torch.relu((x * 2 + y) * x - 1)
# ```
#
# **Eager** (naive, unfused) runs five kernels, each reading its inputs from memory and
# writing a full-size temporary:
#
# | op | reads | writes |
# |---|---|---|
# | `t1 = x * 2`   | x      | t1 |
# | `t2 = t1 + y`  | t1, y  | t2 |
# | `t3 = t2 * x`  | t2, x  | t3 |
# | `t4 = t3 - 1`  | t3     | t4 |
# | `out = relu(t4)` | t4   | out |
#
# that is 7 reads + 5 writes = **12 N floats = 48 N bytes**. The **fused** kernel reads
# `x` and `y` once and writes `out` once: **3 N floats = 12 N bytes**, 4x less. Each op
# does one flop per element, so both versions are limited by memory bandwidth, not
# arithmetic: the fused kernel should be up to ~4x faster once the data does not fit in
# cache.

# %%


def chain(x, y):
    return torch.relu((x * 2 + y) * x - 1)


N = 1 << 22   # 4M elements, 16 MiB per tensor: well beyond the caches
x, y = torch.randn(N), torch.randn(N)
expected = chain(x, y)

torch._dynamo.reset()
miniinductor.metrics.reset()
fused_chain = miniinductor.compile(chain)
with torch.no_grad():
    out = fused_chain(x, y)
torch.testing.assert_close(out, expected)
print("kernels generated for the chain:", miniinductor.metrics.generated_kernel_count)
assert miniinductor.metrics.generated_kernel_count == 1
(chain_graph,) = last_compiled()[-1:]
print(next(iter(chain_graph.kernels.values())).source)

# %%


def median_seconds(fn, *args, repeat=15):
    for _ in range(3):   # warm up (page faults, thread pool start)
        fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


with torch.no_grad():
    t_eager = median_seconds(chain, x, y)
    t_fused = median_seconds(fused_chain, x, y)

bytes_eager, bytes_fused = 48 * N, 12 * N
print(f"threads: {torch.get_num_threads()}, N = {N:,}")
print(f"{'':8}{'time':>10}{'traffic':>12}{'achieved':>14}")
for label, t, nbytes in (("eager", t_eager, bytes_eager), ("fused", t_fused, bytes_fused)):
    print(f"{label:8}{t * 1e3:8.2f} ms{nbytes / 2**20:9.0f} MiB{nbytes / t / 1e9:9.1f} GB/s")
print(f"speed-up of the fused kernel over eager: {t_eager / t_fused:.2f}x "
      f"(the memory-traffic ratio predicts about {bytes_eager / bytes_fused:.0f}x)")

# %% [markdown]
# The "achieved" column divides the bytes that *must* move by the time taken. If both
# rows show a similar GB/s, both are running at the machine's memory bandwidth and the
# speed-up is exactly the traffic saved. (Timings on a busy or tiny machine are noisy;
# `benchmarks/bench_cpu.py` measures properly, against the machine's copy bandwidth and
# the real Inductor.) Whatever the timing, the result must be right:

# %%
with torch.no_grad():
    torch.testing.assert_close(fused_chain(x, y), chain(x, y))
print("fused chain matches eager")

cache_root.cleanup()

# %% [markdown]
# ## Summary
#
# * `compile_graph` = lowering → scheduling (fusion) → one C++ kernel per fused group →
#   a Python wrapper whose `call(args)` allocates, launches, frees and returns.
# * OpenMP: `parallel for` over outer loops only for big loop nests; `simd` (with a
#   reduction clause) on the innermost loop.
# * Builds and wrappers are cached by content hash in `$MINIINDUCTOR_CACHE_DIR`.
# * Fusion turns 12 N floats of memory traffic into 3 N for a five-op chain; for
#   memory-bound work, time follows traffic.
print("tutorial 6 done")
