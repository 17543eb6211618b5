# %% [markdown]
# # Tutorial 13: GEMM templates -- a matmul kernel with a hole for its epilogue
#
# In this tutorial you will learn:
#
# * why a matmul is *not* lowered like the other ops (its inner loop is a `tl.dot` over
#   tiles, not an `inner_fn` per element) and what a **template** is instead: a fixed
#   Triton kernel whose store is left open;
# * how the scheduler fuses pointwise consumers (bias, GELU, a residual add) into that
#   store -- an **epilogue** -- and records the decision like any other fusion;
# * what the epilogue saves: the product never goes to memory and back;
# * how `max_autotune=True` picks between ATen and the template's tile configurations
#   (the **autotuner** and its table), and what `max_autotune_gemm_backends` does;
# * how to run it all on the CPU (Triton's interpreter) and on a GPU;
# * what a CUTLASS kernel is (tile, stages, cluster, schedule, epilogue visitor tree), and
#   how `max_autotune_gemm_backends="...,CUTLASS"` adds CUTLASS kernels to the choices.
#
# GEMM templates are an extension (`gemm`, on by default; `extensions=[]` turns it off). Files,
# in `miniinductor/ext/gemm/`: `template.py` (the template text, `TritonTemplateKernel`),
# `autotune.py` (`select_gemm`: the autotuner, `coordinate_descent`), `epilogue_tuning.py`
# (the template timed with its epilogue), `lowering.py` (when a matmul becomes a template),
# `scheduling.py` (the epilogue rule); and `miniinductor/triton/runtime.py`
# (`AutotuneCache`).
#
# Mirrors `torch/_inductor/kernel/mm.py` and `select_algorithm.py`, in small. On the CPU
# every tensor below is tiny: the interpreter runs one program at a time.

# %%
import logging
import os
import re

import torch
import torch.nn.functional as F

if not torch.cuda.is_available():   # no GPU: Triton's interpreter (read when Triton is imported)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import miniinductor  # noqa: E402
from miniinductor.compile_fx import collect_compiled  # noqa: E402
from miniinductor.ext.gemm.autotune import GEMM_CONFIGS  # noqa: E402

torch.manual_seed(0)
HAS_GPU = torch.cuda.is_available()
DEVICE = "cuda" if HAS_GPU else "cpu"


def linear_gelu(x, w, b):            # x: [M, K], w: [N, K], b: [N]
    return F.gelu(x @ w.t() + b)     # -> [M, N]


M, K, N = 48, 40, 72                 # not multiples of the 16..128 tiles: masks matter
x, w, b = (torch.randn(*s, device=DEVICE) for s in ((M, K), (N, K), (N,)))

# %% [markdown]
# ## 1. The naive way: a library matmul, then a pointwise kernel
#
# Without max-autotune a matmul is an **extern call** (`aten.addmm`: cuBLAS, or MKL on
# the CPU). The GELU after it cannot fuse into a library call, so it is a kernel of its own
# that reads the product back: the [M, N] product is written once and read once more.

# %%
BYTES = 4   # float32


def compile_and_check(fn, *args, **options):
    """Compile afresh, run once, compare with eager (tolerance: the template and the library
    sum the K products in different orders; each partial sum rounds to 24 bits); return
    the compiled graph."""
    torch._dynamo.reset()
    with collect_compiled() as graphs, torch.no_grad():
        out = miniinductor.compile(fn, **options)(*args)
    torch.testing.assert_close(out, fn(*args), rtol=1e-4, atol=1e-4)
    (graph,) = graphs
    return graph


cpu_triton = {} if HAS_GPU else {"cpu_backend": "triton"}
naive = compile_and_check(linear_gelu, x, w, b, **cpu_triton)
print(naive.wrapper_source[naive.wrapper_source.index("def call"):])
print(f"kernels: {list(naive.kernels)}")
extra = 2 * M * N * BYTES
print(f"the product goes to memory and back: {extra} bytes ({M}x{N} floats written + read)")

# %% [markdown]
# ## 2. The template, with GELU fused into its store
#
# With `max_autotune=True` and `max_autotune_gemm_backends="TRITON"` (only templates,
# no ATen choice) the matmul becomes a `TemplateBuffer`. Its kernel is plain text: each
# program computes one `BLOCK_M x BLOCK_N` tile of the product in a float32 accumulator
# `acc`, looping over K in steps of `BLOCK_K` with `tl.dot`. Where the template would
# store `acc`, the scheduler has put the epilogue: the bias add and GELU run on `acc` in
# registers, and only the final value is stored.

# %%
options = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", **cpu_triton}
templated = compile_and_check(linear_gelu, x, w, b, **options)
(name, kernel), = templated.kernels.items()
print(name, "from ATen ops:", ", ".join(kernel.origins))
body = kernel.source[kernel.source.index("@triton.jit\ndef "):]
print(body[:body.index("def launch")] if "def launch" in body else body)
assert "tl.dot" in kernel.source and "erf" in kernel.source   # the matmul loop and GELU, one kernel
assert "aten.addmm" not in templated.wrapper_source and "aten.mm" not in templated.wrapper_source

# %% [markdown]
# The scheduler recorded the fusion like any other decision (and the HTML report and
# `explain` show it the same way):

# %%
for decision in templated.scheduler.decisions:
    print(decision)
fused = [d for d in templated.scheduler.decisions if d.fused]
assert fused, "the epilogue fused into the template"
print(f"saved: the {M}x{N} product's write and read back, {extra} bytes "
      f"(the decision's score counts the {extra // 2} bytes of the read it removes)")

# %% [markdown]
# ## 3. The autotuner
#
# Which tile sizes are best depends on the shape and the GPU. Under `max_autotune` every
# choice -- ATen and each template configuration `(BLOCK_M, BLOCK_N, BLOCK_K, num_warps,
# num_stages)` -- is compiled and timed on random operands of the real shapes; the table
# goes to the `autotune` log (`MINIINDUCTOR_LOGS=autotune`) and the winner to an on-disk
# cache, so the next compile of the same shape times nothing. On the CPU nothing is timed
# (the interpreter's timings mean nothing) and the first configuration is taken; the log
# says so. The configurations tried:

# %%
for config in GEMM_CONFIGS:
    print("  BLOCK_M={} BLOCK_N={} BLOCK_K={} num_warps={} num_stages={}".format(*config))


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


autotune_log, handler = logging.getLogger("miniinductor.autotune"), Lines()
autotune_log.addHandler(handler)
autotune_log.setLevel(logging.INFO)
c = torch.randn(K, 56, device=DEVICE)
compile_and_check(lambda a, c: a @ c, x, c, max_autotune=True, **cpu_triton)   # "ATEN,TRITON": both compete
autotune_log.removeHandler(handler)
print("\n".join(handler.lines))
assert any(line.startswith("AUTOTUNE") for line in handler.lines)

# %% [markdown]
# The table times the *bare* templates. An epilogue changes the kernel: on an H100, exact
# GELU (erf) on the 128x128 float32 tile the bare table liked best ran 5x slower than the
# bare template (the registers spill). So once the scheduler has fused, each template with
# an epilogue is timed again, fused, under the bare table's fastest configs, and against
# the template and its epilogue as two kernels: the fastest fused config is kept, or, when
# the two kernels are faster, the group is split and the fusion decision says why
# (`miniinductor/ext/gemm/epilogue_tuning.py`; a second `AUTOTUNE` table in the log). On
# the CPU nothing is timed, so the template keeps the first configuration, fused.
#
# `max_autotune_gemm_backends` chooses the competitors: `"ATEN,TRITON"` (the default),
# `"TRITON"` (every matmul from a template: no library call left) or `"ATEN"`. A name it
# does not know is an error that lists the valid ones:

# %%
try:
    miniinductor.compile(linear_gelu, max_autotune=True, max_autotune_gemm_backends="CUBLAS")(x, w, b)
    raise AssertionError("an unknown backend name must be refused")
except Exception as exc:   # (Dynamo may wrap the compiler's ValueError)
    message = str(exc)
    print(message.splitlines()[-1][:300])
    assert "ATEN" in message and "TRITON" in message

# %% [markdown]
# Float32 precision follows eager: IEEE products unless
# `torch.backends.cuda.matmul.allow_tf32` asks for TF32. An IEEE `tl.dot` runs on the FMA
# units, and on an H100 it reaches only half of cuBLAS's float32 speed on a Linear's weight.
# `gemm_fp32_precision="tf32x3"` asks for Triton's three-product TF32 dot instead: each
# operand is split into a TF32 number and a TF32 remainder, and big*big + big*small +
# small*big runs on the tensor cores (1.8x cuBLAS's IEEE float32 on the MLP of
# docs/benchmarks_gpu.md, and nearer a float64 product than either IEEE result there; not
# eager's bits). The template's `tl.dot` line says which one it got:

# %%
(tf32x3_kernel,) = compile_and_check(linear_gelu, x, w, b, **options, gemm_fp32_precision="tf32x3").kernels.values()
dot_line = next(line.strip() for line in tf32x3_kernel.source.splitlines() if "tl.dot" in line)
print(dot_line)
assert ("'tf32'" if torch.backends.cuda.matmul.allow_tf32 else "'tf32x3'") in dot_line

# %% [markdown]
# ## 4. Timing (GPU only)
#
# On a GPU, time the three: eager (cuBLAS, then a GELU kernel), our ATen + pointwise
# kernel, and the template with its fused epilogue. On the CPU the interpreter's times
# would say nothing, so this cell only runs where a GPU is present. Recorded figures for
# larger shapes are in docs/benchmarks_gpu.md (`python benchmarks/gemm_gpu.py`).

# %%
if HAS_GPU:
    from triton.testing import do_bench

    big = [torch.randn(*s, device="cuda") for s in ((4096, 1024), (1024, 1024), (1024,))]
    torch._dynamo.reset()
    choices = {"eager": linear_gelu,   # (two lambdas: two code objects, two Dynamo caches)
               "ATen + fused pointwise": miniinductor.compile(lambda *a: linear_gelu(*a)),
               "template + epilogue": miniinductor.compile(lambda *a: linear_gelu(*a), max_autotune=True)}
    for label, fn in choices.items():
        with torch.no_grad():
            torch.testing.assert_close(fn(*big), linear_gelu(*big), rtol=1e-2, atol=1e-2)
            print(f"{label:24s} {do_bench(lambda: fn(*big)):.3f} ms")
else:
    print("no GPU: timings skipped (the interpreter's would mean nothing)")
assert re.search(r"tl\.dot", kernel.source)

# %% [markdown]
# ## 5. A CUTLASS kernel: the same GEMM from NVIDIA's C++ templates
#
# With `max_autotune_gemm_backends` listing `CUTLASS`, each matmul also gets CUTLASS
# kernels as choices (`miniinductor/ext/gemm/cutlass/`), timed beside ATen and the Triton
# template. They need CUTLASS's headers (`pip install nvidia-cutlass`), `nvcc` and a Hopper
# GPU (compute capability 9.0); elsewhere one info line says what is missing. A CUTLASS
# kernel is not written out instruction by instruction as our Triton template is: it is an
# *instance* of CUTLASS's templates, picked by a few choices (`CutlassConfig`):
#
# * the **tile** `M x N x K`: the block of C one CTA (thread block) computes, K consumed
#   a tile at a time, loaded by TMA (the copy engine) into shared memory;
# * the **stages**: how many K tiles sit in shared memory at once, so that loads run ahead
#   of the tensor cores (CUTLASS fits as many as the shared memory left beside the epilogue);
# * the **cluster**: CTAs that run together on neighbouring SMs and share each tile they
#   load (TMA multicast): a 2x1 cluster loads each B tile once for two CTAs;
# * the **schedule**: *cooperative* (two warp groups split one tile) or *pingpong* (two warp
#   groups take turns on tiles: one computes while the other runs its epilogue), both fed by
#   a producer warp group.
#
# The epilogue is an **epilogue visitor tree** (EVT): leaves fetch the accumulator, a bias
# row, a residual; a compute node runs the fused pointwise code. Our `Epilogue` builds it by
# running the fused nodes' bodies under an ops handler that writes C++ -- the same `V.ops`
# trick as every backend here. The source below is what the kernel of `linear_gelu`'s product
# would be (printing it needs neither CUTLASS nor a GPU):

# %%
from miniinductor.ext.gemm.cutlass.emit import CutlassConfig, gemm_source  # noqa: E402
from miniinductor.ext.gemm.cutlass.epilogue import bare_epilogue  # noqa: E402

cutlass_config = CutlassConfig(tile_m=128, tile_n=256, tile_k=64, cluster_m=2, cluster_n=1)
cuda = gemm_source(torch.bfloat16, "RowMajor", "ColumnMajor", cutlass_config,
                   bare_epilogue("buf0", torch.bfloat16, 4096, 4096))
print(cutlass_config.name())
print("\n".join(line for line in cuda.splitlines()
                if line.startswith(("using TileShape", "using ClusterShape", "using EVT", "    cutlass::bfloat16_t"))
                or "KernelTmaWarpSpecialized" in line or "StageCount" in line))
assert "Shape<_128, _256, _64>" in cuda and "Shape<_2, _1, _1>" in cuda

# %% [markdown]
# On an H200 (`python benchmarks/gemm_gpu.py --only MLP --profile --options
# '{"max_autotune_gemm_backends": "CUTLASS"}'`), the MLP's first Linear + GELU became one
# CUTLASS kernel whose EVT functor, `mi_epilogue_add_erf_mul_0`, adds the bias and applies
# the exact GELU; docs/benchmarks_gpu.md has the autotuner's tables and the times.

print("tutorial 13 done")
