"""Reference solution of exercise 08 (Triton block sizes)."""
from miniinductor.triton.policy import GATHERS_MIN, MAX_BLOCK_NUMEL, next_power_of_2

TARGET = "miniinductor.triton.policy.block_sizes"


def block_sizes(xnumel, rnumel, persistent, outer, gathers=0):
    xblock_max = next_power_of_2(max(xnumel, 1))
    if rnumel is None:
        if gathers >= GATHERS_MIN:   # loads that are not vectorised: 2 elements a thread
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
