"""The Triton backend's block-size rules: block sizes (`block_sizes`, `tile_sizes`,
`reduces_columns`), when a reduction is split in two (`reduction_splits`), and the
numbers it puts into the core's backend policy (`triton_policy`, through
passes.POLICY_PATCHES: the longest persistent row, the shortest online softmax row).

Mirrors `torch/_inductor/runtime/triton_heuristics.py` (block sizes; we do not autotune
these heuristics' candidates) and `ir.Reduction.num_splits` (`reduction_splits`, a simpler
rule). Leaves out: per-device tuning tables (SM count, shared memory); the numbers here are
the H100's.
"""
from __future__ import annotations

from .runtime import cdiv, next_power_of_2

#: the longest reduction computed in one block, the whole row at once (persistent)
PERSISTENT_REDUCTION_MAX = 4096
#: elements one program handles at a time (XBLOCK * RBLOCK)
MAX_BLOCK_NUMEL = 4096


def triton_policy(policy, config, device) -> dict:
    """What the Triton backend sets in a Triton graph's BackendPolicy (codegen/policy.py):
    rows up to PERSISTENT_REDUCTION_MAX in one block, and softmax online past them."""
    if policy.name != "triton":
        return {}
    return {"persistent_reduction_max": PERSISTENT_REDUCTION_MAX, "online_softmax_min": PERSISTENT_REDUCTION_MAX + 1}


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
    [64, 64, 112, 112]: faster, level with Inductor's, which its run-time autotuner
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
#: rows this long are split below SPLIT_LONG_ROW_PROGRAMS programs (about two per SM): each
#: program reads one long row alone, far from a full device's bandwidth
SPLIT_LONG_ROW, SPLIT_LONG_ROW_PROGRAMS = 2**16, 256
#: a column reduction is split into chunks of this many rows (Inductor's choice for a bias gradient)
OUTER_CHUNK = 128


def reduction_splits(xnumel: int, rnumel: int, outer: bool) -> int:
    """Into how many pieces to cut each row of a reduction (1: do not split).

    A row reduction runs `xnumel / XBLOCK` programs (`block_sizes`); with fewer than
    SPLIT_MIN_PROGRAMS -- a full sum is one -- most of an H100's 132 SMs sit idle, so the
    row is cut into pieces that bring the count to about SPLIT_TARGET_PROGRAMS; rows of
    SPLIT_LONG_ROW or more are cut while the count is under SPLIT_LONG_ROW_PROGRAMS (128 rows
    of half a million elements each ran as 128 programs, each reading its row alone). A column
    reduction (`outer`) loads XBLOCK neighbouring columns per row: fewer than 32 float32
    (128 bytes) waste most of each memory transaction, as a persistent block of long
    columns must (768 x 2048: blocks 2 columns wide, a fraction of the bandwidth); it is cut into
    OUTER_CHUNK-row chunks, whose blocks are 32 columns wide. Splits are powers of two; where one
    does not divide `rnumel`, the last chunk is masked (passes.py)."""
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
        long_rows = rnumel >= SPLIT_LONG_ROW and programs < SPLIT_LONG_ROW_PROGRAMS
        if programs >= SPLIT_MIN_PROGRAMS and not long_rows:
            return 1
        target = SPLIT_LONG_ROW_PROGRAMS if long_rows else SPLIT_TARGET_PROGRAMS
        split = min(next_power_of_2(cdiv(target, programs)), largest(rnumel // SPLIT_MIN_CHUNK))
    return max(split, 1)
