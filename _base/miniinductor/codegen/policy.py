"""Backend policy: every choice that depends on who writes the kernels, made once per graph.

C++ and Triton kernels want different things from the phases before codegen. The choice
is taken once, from the graph's device and `Config.cpu_backend` (`policy_for`), held by
`GraphLowering.policy` and read from there by lowering, the scheduler and codegen; no
phase compares backend strings.

    stores_are_cheap      C++: a row stored and read back by the next loop stays in cache,
                          so a twice-read transcendental value is stored, not recomputed
    unfuse_addmm          Triton: addmm read only pointwise → mm + a bias add its readers
                          inline (lowering/matmul.py)
    split_reductions      Triton: long rows or long columns cut in two (`reduction_splits`)
    mix_order_reduction   Triton: a row and a column reduction of one input share a kernel
    gemm_templates        Triton: under max_autotune, matmuls may come from GEMM templates
    persistent_reduction_max  Triton: the longest row reduced in one block
    online_softmax_min    the shortest row whose softmax max and sum of exp are one online
                          reduction (one pass over the row; `online_softmax`); None: never
    welford_min           C++: the shortest innermost reduced dim whose variance is one Welford
                          reduction (`welford`); None (Triton): never, two passes
    tiled_transposes      Triton: a transposing pointwise kernel gets a 2-D tiled grid of its
                          own (`tile_split`), so it stays out of combo kernels; C++ tiles its
                          loops inside the kernel (codegen/cpp_loops.py)
    channels_last_conv    an inference graph's 2-D convolutions take their input channels-last
                          (lowering/layout.py): C++ (oneDNN runs them faster) and GPU graphs
                          (cuDNN's NHWC kernels: its NCHW path reorders inside every call);
                          not `cpu_backend="triton"` (the CPU's convolution, Triton's kernels:
                          nothing to gain in CI's interpreter)
    vector_matrix_max     C++: a single row times a matrix (`[1, K] @ w.t()`) up to this many
                          matrix elements is a reduction kernel, not a BLAS call (`vector_matrix`)
    explicit_vectors      C++: a pointwise kernel's innermost loop on explicit vectors where it can
                          be (codegen/cpp_vec.py); else, and always for reductions, omp simd
    clamped_window_reads  C++: a pooling window's positions over the padding are read at the
                          nearest position inside and discarded by a comparison, so the kernel
                          has no masked load and g++ vectorises it; Triton: a masked load with
                          -inf where the position is outside (a predicated load costs nothing on
                          a GPU; the clamps and comparisons were 1.7x Inductor's time on an H200)

It also holds the Triton rules that several phases share: block sizes (`block_sizes`,
`tile_sizes`, `reduces_columns`), split reductions (`reduction_splits`) and which
reductions a mix-order kernel can finish (`MIX_ORDER_KINDS`, `MIX_ORDER_MIN_ROWS`).

Mirrors the backend checks spread through `torch/_inductor`: `runtime/triton_heuristics.py`
(block sizes; we do not autotune these heuristics' candidates), `ir.Reduction.num_splits`
(`reduction_splits`, a simpler rule), `fx_passes/post_grad.should_prefer_unfused_addmm` and
`config.triton.mix_order_reduction`. Leaves out: per-device tuning tables (SM count, shared
memory); the numbers here are the H100's.
"""
from __future__ import annotations

import dataclasses

import torch

from ..config import Config
from ..runtime.triton_runtime import cdiv, next_power_of_2
from .cpp_reduction import LANES

#: the longest reduction computed in one block, the whole row at once (persistent)
PERSISTENT_REDUCTION_MAX = 4096
#: elements one program handles at a time (XBLOCK * RBLOCK)
MAX_BLOCK_NUMEL = 4096
#: column reductions a mix-order kernel can finish (its partial rows are combined again)
MIX_ORDER_KINDS = {"sum": "sum", "max": "amax", "min": "amin"}
#: fewer rows than this: two plain kernels are as good
MIX_ORDER_MIN_ROWS = 256
#: C++: the largest K * N whose single-row product `[1, K] @ [K, N]` is our reduction kernel
VECTOR_MATRIX_MAX = 1 << 20


@dataclasses.dataclass(frozen=True)
class BackendPolicy:
    name: str                       # who writes the kernels: "cpp" or "triton"
    stores_are_cheap: bool
    unfuse_addmm: bool
    split_reductions: bool
    mix_order_reduction: bool
    gemm_templates: bool = False    # max_autotune may compute matmuls with Triton GEMM templates
    mix_order_min_numel: int = 0
    persistent_reduction_max: int = PERSISTENT_REDUCTION_MAX
    online_softmax_min: int | None = PERSISTENT_REDUCTION_MAX + 1
    welford_min: int | None = None
    tiled_transposes: bool = True
    explicit_vectors: bool = False
    clamped_window_reads: bool = False
    channels_last_conv: bool = False
    vector_matrix_max: int = 0

    def vector_matrix(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """Compute `a @ b` for a single row `a` [1, K] and `b` [K, N] read along K (a Linear's
        `weight.t()`) as a reduction kernel (lowering/matmul.vector_matrix), not a BLAS call?
        C++: for float32/float64 with K * N at most `vector_matrix_max`. The BLAS call pays
        for its threads' start-up at every layer of a batch-1 MLP; our kernel fuses the bias and
        activation and runs its rows on the threads the kernel already has."""
        static = all(isinstance(n, int) for n in (*a.shape, *b.shape, *b.stride()))
        return (static and a.shape[0] == 1 and b.dim() == 2 and (b.stride(0) == 1 or b.shape[0] == 1)
                and a.dtype in (torch.float32, torch.float64) and b.shape[0] * b.shape[1] <= self.vector_matrix_max)

    def online_softmax(self, xnumel, rnumel) -> bool:
        """Compute softmax's row max and sum of exp as one online reduction (lowering/softmax.py)?
        Triton: where the row is looped (longer than a persistent block: two reductions would
        read it twice) and not split (`reduction_splits`: the online pair is not split in two).
        `rnumel` None: a symbolic row with no upper bound (looped, never split)."""
        if self.online_softmax_min is None or (rnumel is not None and rnumel < self.online_softmax_min):
            return False
        static = isinstance(xnumel, int) and rnumel is not None
        return not (self.split_reductions and static and reduction_splits(xnumel, rnumel, False) > 1)

    def welford(self, xnumel, inner) -> bool:
        """Compute a variance (var, var_mean, layer and batch norm) as one Welford reduction, the
        row read once (lowering/reductions.var), rather than a sum for the mean and then a sum of
        squared deviations? C++: where the innermost reduced dim (`inner`) has at least
        `welford_min` elements, so that the kernel folds it into lanes (codegen/cpp.py: a shorter
        one is a scalar loop with a division per element: layer norm of 16384 x 32 took 1150 µs
        that way, 260 with two vectorized sums),
        and not for a single row (`xnumel` 1: its two sums run on every thread, a Welford loop on
        one). Triton keeps two passes: a persistent row is in registers for both, and a looped
        row's Welford would need a combine function in `tl.reduce` (Inductor's). None: symbolic."""
        if self.welford_min is None or (inner is not None and inner < self.welford_min):
            return False
        return xnumel is None or xnumel > 1


def policy_for(device: torch.device, config: Config) -> BackendPolicy:
    """Triton for GPU graphs; on the CPU, `config.cpu_backend` ('cpp' or 'triton')."""
    if device.type != "cuda" and config.cpu_backend == "cpp":
        # online softmax: a row of the C++ kernels stays in cache between its passes, and the
        # online loop computes two exps per element where the max pass computes none.
        # Explicit vectors (codegen/cpp_vec.py), kernels alone through ctypes, min of 15 runs,
        # four runs (1 and 2 threads): the bench's gelu * sigmoid - tanh kernel on 4M floats
        # 3-7% faster (6.55-6.88 vs 6.88-7.24 ms); batch norm + relu, x * 0.5 + y, relu(x + b),
        # where/maximum level (within 2%, either way)
        return BackendPolicy("cpp", stores_are_cheap=True, unfuse_addmm=False, split_reductions=False,
                             mix_order_reduction=False, online_softmax_min=None, welford_min=2 * LANES,
                             tiled_transposes=False, channels_last_conv=True, vector_matrix_max=VECTOR_MATRIX_MAX,
                             explicit_vectors=True, clamped_window_reads=True)
    return BackendPolicy("triton", stores_are_cheap=False, unfuse_addmm=True, split_reductions=True,
                         mix_order_reduction=config.mix_order_reduction,
                         mix_order_min_numel=config.mix_order_min_numel, gemm_templates=True,
                         channels_last_conv=device.type == "cuda")


# --------------------------------------------------------------------------- Triton block sizes
#: a pointwise kernel with this many gathered loads runs 2 elements a thread (`block_sizes`)
GATHERS_MIN = 2


def block_sizes(xnumel: int, rnumel: int | None, persistent: bool, outer: bool, gathers: int = 0) -> dict:
    """XBLOCK, RBLOCK (reductions only) and num_warps for a kernel, from its sizes (and, for a
    pointwise kernel, how many of its loads are gathers).

    Pointwise: 1024 elements a program, 4 warps (8 elements a thread: wide loads). With
    GATHERS_MIN or more gathered loads (positions strided or computed along the innermost
    dim: a pooling window), 512 elements and 8 warps, 2 a thread: such loads are not
    vectorised, and more warps in flight hide their latency (H100, max_pool2d 3x3/2 of
    [64, 64, 112, 112]: 0.154 -> 0.095 ms, Inductor's 0.099, which its run-time autotuner
    gets by timing these two configurations).
    Persistent reduction: RBLOCK covers the row; XBLOCK rows fill MAX_BLOCK_NUMEL.
    Looped reduction along contiguous memory (a row sum): one row a program, RBLOCK 2048.
    Looped "outer" reduction (a column sum, contiguous along x): a few columns a program
    so that the grid still fills the GPU, and RBLOCK rows of them at a time."""
    xblock_max = next_power_of_2(max(xnumel, 1))
    if rnumel is None:
        if gathers >= GATHERS_MIN:
            xblock = min(512, xblock_max)
            return {"XBLOCK": xblock, "num_warps": max(1, min(8, xblock // 64))}
        xblock = min(1024, xblock_max)
        return {"XBLOCK": xblock, "num_warps": max(1, min(8, xblock // 256))}
    rblock_full = next_power_of_2(max(rnumel, 1))
    if persistent:
        rblock = rblock_full
        xblock = min(xblock_max, max(1, MAX_BLOCK_NUMEL // rblock), 64)
    elif outer:
        xblock = min(xblock_max, max(8, min(64, next_power_of_2(xnumel // 256))))
        rblock = min(rblock_full, max(1, MAX_BLOCK_NUMEL // xblock))
    else:
        xblock, rblock = 1, min(rblock_full, 2048)
    return {"XBLOCK": xblock, "RBLOCK": rblock,
            "num_warps": max(1, min(16, next_power_of_2(xblock * rblock // 256)))}


def reduces_columns(load_strides) -> bool:
    """Is a reduction "outer" (summing columns)? True when most of its loads step 1 along x
    and not along r, given each load's (x stride, r stride) at the innermost dims: then a
    block should be wide in x and short in r, for coalesced loads."""
    return sum(int(xs == 1 and rs != 1) - int(rs == 1) for xs, rs in load_strides) > 0


def tile_sizes(xnumel: int, rnumel: int) -> dict:
    """A tiled pointwise kernel: 64x64 tiles (smaller when a dim is), 4 warps; the second
    grid dim is limited to 65535 programs, so its tile grows if it must."""
    rblock = min(64, next_power_of_2(max(rnumel, 1)))
    while cdiv(rnumel, rblock) > 65535:
        rblock *= 2
    return {"XBLOCK": min(64, next_power_of_2(max(xnumel, 1))), "RBLOCK": rblock, "num_warps": 4}


# --------------------------------------------------------------------------- Triton split reductions
#: no split below this many elements read: the second launch would cost more than it saves
SPLIT_MIN_NUMEL = 2**18
#: a row reduction that runs as fewer programs than this is split ...
SPLIT_MIN_PROGRAMS = 32
#: ... into enough pieces for about this many programs, each piece at least SPLIT_MIN_CHUNK long
SPLIT_TARGET_PROGRAMS, SPLIT_MIN_CHUNK = 128, 1024
#: a column reduction is split into chunks of this many rows (Inductor's choice for a bias gradient)
OUTER_CHUNK = 128


def reduction_splits(xnumel: int, rnumel: int, outer: bool) -> int:
    """Into how many pieces to cut each row of a reduction (1: do not split).

    A row reduction runs `xnumel / XBLOCK` programs (`block_sizes`); with fewer than
    SPLIT_MIN_PROGRAMS -- a full sum is one -- most of an H100's 132 SMs sit idle, so the
    row is cut into pieces that bring the count to about SPLIT_TARGET_PROGRAMS. A column
    reduction (`outer`) loads XBLOCK neighbouring columns per row: fewer than 32 float32
    (128 bytes) waste most of each memory transaction, as a persistent block of long
    columns must (768 x 2048: blocks 2 columns wide, 30% of the bandwidth); it is cut into
    OUTER_CHUNK-row chunks, whose blocks are 32 columns wide. Splits are powers of two that
    divide `rnumel`."""
    if xnumel * rnumel < SPLIT_MIN_NUMEL:
        return 1
    blocks = block_sizes(xnumel, rnumel, rnumel <= PERSISTENT_REDUCTION_MAX, outer)
    programs = cdiv(xnumel, blocks["XBLOCK"])
    largest = lambda n: next_power_of_2(n + 1) // 2   # noqa: E731  (the largest power of 2 <= n)
    if outer:
        if blocks["XBLOCK"] >= 32 and programs >= SPLIT_MIN_PROGRAMS:
            return 1
        split = largest(rnumel // OUTER_CHUNK)
    else:
        if programs >= SPLIT_MIN_PROGRAMS:
            return 1
        split = min(next_power_of_2(cdiv(SPLIT_TARGET_PROGRAMS, programs)), largest(rnumel // SPLIT_MIN_CHUNK))
    while split > 1 and rnumel % split:
        split //= 2
    return max(split, 1)
