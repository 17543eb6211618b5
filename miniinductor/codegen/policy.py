"""Backend policy: every choice that depends on who writes the kernels, made once per graph.

C++ and Triton kernels want different things from the phases before codegen. The choice
is taken once, from the graph's device and `Config.cpu_backend` (`policy_for`), held by
`GraphLowering.policy` and read from there by lowering, the scheduler and codegen; no
phase compares backend strings. Each field is said in one line below; the longer reasons
are in docs/design_notes.md.

The Triton backend sets its own numbers (persistent_reduction_max, online_softmax_min) through
`passes.POLICY_PATCHES`, and keeps its block-size and split rules in triton/policy.py.

Mirrors the backend checks of `torch/_inductor` (`fx_passes/post_grad.should_prefer_unfused_addmm`, `config.triton.mix_order_reduction`).
"""
from __future__ import annotations

import dataclasses

import torch

from ..config import Config
from ..passes import POLICY_PATCHES


@dataclasses.dataclass(frozen=True)
class BackendPolicy:
    name: str                       # who writes the kernels: "cpp" or "triton"
    stores_are_cheap: bool          # C++: a twice-read transcendental value is stored, not recomputed
    unfuse_addmm: bool              # Triton: addmm read only pointwise → mm + a bias add that fuses
    split_reductions: bool          # Triton: long rows or columns reduced in two kernels
    mix_order_reduction: bool       # Triton: a row and a column reduction of one input share a kernel
    gemm_templates: bool = False    # max_autotune may compute matmuls with Triton GEMM templates
    mix_order_min_numel: int = 0
    persistent_reduction_max: int = 0       # Triton's (triton/policy.py); 0: no persistent block
    online_softmax_min: int | None = None   # the shortest row whose softmax is one online reduction
    welford_min: int | None = None  # C++: the shortest inner reduced dim whose variance is one Welford pass
    tiled_transposes: bool = True   # Triton: a transposing pointwise kernel gets a 2-D tiled grid
    explicit_vectors: bool = False  # C++: pointwise inner loops on explicit vectors (ext/cpu_fast)
    clamped_window_reads: bool = False   # C++: pooling reads clamped inside and compared, not masked
    channels_last_conv: bool = False     # inference graphs' 2-D convolutions channels-last (ext/layout)
    vector_matrix_max: int = 0      # C++: [1, K] @ [K, N] up to this K * N is a reduction kernel

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
