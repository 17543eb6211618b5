"""Triton block sizes: how many elements each Triton program handles.

Phase: runtime (Triton). Mirrors the size heuristics of
`torch/_inductor/runtime/triton_heuristics.py` (`pointwise`, `persistent_reduction`,
`reduction` and their `triton_config*` helpers; Inductor also autotunes among a few).

A Triton kernel runs as a grid of programs; each handles a block of XBLOCK outputs (and,
for a reduction, RBLOCK elements of each row at a time). `block_sizes(xnumel, rnumel,
persistent, outer, gathers=0)` returns {"XBLOCK": ..., "num_warps": ...} for a pointwise kernel
(`rnumel is None`) and {"XBLOCK": ..., "RBLOCK": ..., "num_warps": ...} for a reduction.
  * every block size is a power of 2 (`tl.arange` needs one), num_warps a power of 2 in 1..16;
  * pointwise: enough elements a program to amortise it (Inductor: 1024), but no more than
    the next power of 2 of xnumel;
  * persistent reduction (`persistent=True`, rows no longer than PERSISTENT_REDUCTION_MAX):
    the kernel loads a whole row at once, so RBLOCK must cover the row
    (RBLOCK >= rnumel); XBLOCK rows a program, keeping XBLOCK * RBLOCK <= MAX_BLOCK_NUMEL;
  * looped reduction: the kernel walks each row RBLOCK elements at a time; keep
    XBLOCK * RBLOCK <= MAX_BLOCK_NUMEL. Along rows (`outer=False`) one row a program and a
    long RBLOCK (e.g. 2048) read contiguous memory; summing columns (`outer=True`) wants a
    few columns a program (XBLOCK 8..64) so that loads along x are contiguous.
  * num_warps grows with the block: about one warp per 256 elements.
  * (a refinement the checks leave to you: `gathers` counts a pointwise kernel's loads that
    cannot be vectorised, a pooling window's; the compiler gives those kernels 2 elements a
    thread, XBLOCK 512 and 8 warps, so more warps hide the loads' latency.)
Worked example: block_sizes(1000, None, False, False) → {"XBLOCK": 1024, "num_warps": 4};
block_sizes(64, 100, True, False) → {"XBLOCK": 32, "RBLOCK": 128, "num_warps": 16}.

The stub below gives every program one element: legal for pointwise kernels (just very
slow), wrong for a persistent reduction, which then reads only the first element of a row.
Helpers (imported below): next_power_of_2, MAX_BLOCK_NUMEL.
Run: python -m miniinductor exercise run 8   (Triton runs interpreted on the CPU)
"""
from miniinductor.triton.policy import MAX_BLOCK_NUMEL, next_power_of_2  # noqa: F401

TARGET = "miniinductor.triton.policy.block_sizes"


def block_sizes(xnumel, rnumel, persistent, outer, gathers=0):
    if rnumel is None:
        return {"XBLOCK": 1, "num_warps": 1}
    return {"XBLOCK": 1, "RBLOCK": 1, "num_warps": 1}
