"""Backend policy: every choice that depends on who writes the kernels, made once per graph.

C++ and Triton kernels want different things from the phases before codegen. The choice
is taken once, from the graph's device and `Config.cpu_backend` (`policy_for`), held by
`GraphLowering.policy` and read from there by lowering, the scheduler and codegen; no
phase compares backend strings.

    stores_are_cheap      C++: a row stored and read back by the next loop stays in cache,
                          so a twice-read transcendental value is stored, not recomputed
    unfuse_addmm          Triton: addmm read only pointwise → mm + a bias add its readers
                          inline (lowering/matmul.py)
    split_reductions      Triton: long rows or long columns cut in two (triton/passes.py)
    mix_order_reduction   Triton: a row and a column reduction of one input share a kernel
                          (set by ext/mix_order; lowering/reductions.py leaves those unsplit)
    gemm_templates        Triton: under max_autotune, matmuls may come from GEMM templates
    persistent_reduction_max  Triton: the longest row reduced in one block
    online_softmax_min    the shortest row whose softmax max and sum of exp are one online
                          reduction (one pass over the row; triton/softmax.py); None: never
    welford_min           C++: the shortest innermost reduced dim whose variance is one Welford
                          reduction (`welford`); None (Triton): never, two passes
    tiled_transposes      Triton: a transposing pointwise kernel gets a 2-D tiled grid of its
                          own (`tile_split`), so it stays out of combo kernels; C++ tiles its
                          loops inside the kernel (with extension cpu_fast: ext/cpu_fast/loops.py)
    channels_last_conv    an inference graph's 2-D convolutions take their input channels-last
                          (ext/layout): C++ (oneDNN runs them faster) and GPU graphs
                          (cuDNN's NHWC kernels: its NCHW path reorders inside every call);
                          not `cpu_backend="triton"` (the CPU's convolution, Triton's kernels:
                          nothing to gain in CI's interpreter)
    vector_matrix_max     C++: a single row times a matrix (`[1, K] @ w.t()`) up to this many
                          matrix elements is a reduction kernel, not a BLAS call (`vector_matrix`;
                          0: never, unless extension cpu_fast sets it)
    explicit_vectors      C++: a pointwise kernel's innermost loop on explicit vectors where it can
                          be (ext/cpu_fast/vec.py); else, and always for reductions, omp simd
    clamped_window_reads  C++: a pooling window's positions over the padding are read at the
                          nearest position inside and discarded by a comparison, so the kernel
                          has no masked load and g++ vectorises it; Triton: a masked load with
                          -inf where the position is outside (a predicated load costs nothing on
                          a GPU; the clamps and comparisons were slower than Inductor's on an H200)

The Triton backend sets its own numbers (persistent_reduction_max, online_softmax_min) through
`passes.POLICY_PATCHES`, and keeps its block-size and split rules in triton/policy.py.

Mirrors the backend checks spread through `torch/_inductor`:
`fx_passes/post_grad.should_prefer_unfused_addmm` and `config.triton.mix_order_reduction`.
"""
from __future__ import annotations

import dataclasses

import torch

from ..config import Config
from ..passes import POLICY_PATCHES


@dataclasses.dataclass(frozen=True)
class BackendPolicy:
    name: str                       # who writes the kernels: "cpp" or "triton"
    stores_are_cheap: bool
    unfuse_addmm: bool
    split_reductions: bool
    mix_order_reduction: bool
    gemm_templates: bool = False    # max_autotune may compute matmuls with Triton GEMM templates
    mix_order_min_numel: int = 0
    persistent_reduction_max: int = 0       # Triton's (triton/policy.py); 0: no persistent block
    online_softmax_min: int | None = None
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

    def welford(self, xnumel, inner) -> bool:
        """Compute a variance (var, var_mean, layer and batch norm) as one Welford reduction, the
        row read once (lowering/reductions.var), rather than a sum for the mean and then a sum of
        squared deviations? C++: where the innermost reduced dim (`inner`) has at least
        `welford_min` elements, so that the kernel folds it into lanes (ext/cpu_fast: a shorter
        one is a scalar loop with a division per element: layer norm of 16384 x 32 ran several
        times slower that way than with two vectorized sums),
        and not for a single row (`xnumel` 1: its two sums run on every thread, a Welford loop on
        one). Triton keeps two passes: a persistent row is in registers for both, and a looped
        row's Welford would need a combine function in `tl.reduce` (Inductor's). None: symbolic."""
        if self.welford_min is None or (inner is not None and inner < self.welford_min):
            return False
        return xnumel is None or xnumel > 1


def policy_for(device: torch.device, config: Config) -> BackendPolicy:
    """Triton for GPU graphs; on the CPU, `config.cpu_backend` ('cpp' or 'triton'). The core's
    policy, then what each extension that is on changes in it (`passes.POLICY_PATCHES`)."""
    if device.type != "cuda" and config.cpu_backend == "cpp":
        policy = BackendPolicy("cpp", stores_are_cheap=True, unfuse_addmm=False, split_reductions=False,
                               mix_order_reduction=False, online_softmax_min=None, tiled_transposes=False,
                               clamped_window_reads=True)
    else:
        policy = BackendPolicy("triton", stores_are_cheap=False, unfuse_addmm=True, split_reductions=True,
                               mix_order_reduction=False)
    for extension, patch in POLICY_PATCHES:
        if config.uses(extension):
            policy = dataclasses.replace(policy, **patch(policy, config, device))
    return policy
