"""Fusion score: how many bytes of memory traffic does fusing two groups save?

Phase: scheduler. Mirrors `Scheduler.score_fusion` / `score_fusion_memory` in
`torch/_inductor/scheduler.py` (Inductor scores by the bytes of the buffers both nodes
touch, then by proximity in program order, as miniinductor does).

Every round, the scheduler scores each pair of groups that share a buffer, sorts the pairs
best first, and fuses greedily (each group at most once a round). A good score puts the
pairs that save the most memory traffic first. Each group has `.nodes`; each node has
`.reads` and `.writes`, lists of `MemoryDep`s with a `.name` (the buffer). `nbytes(name)`
gives a buffer's size in bytes.

Fusing a and b saves, for each buffer counted once:
  * a buffer the earlier group `a` writes and `b` reads (vertical): it need not be written
    out and read back (or at least not read back);
  * a buffer both read (horizontal): it is loaded once instead of twice.
So: score = sum of nbytes over (buffers a reads or writes) ∩ (buffers b reads).

Worked example, `x / x.sum(-1, keepdim=True)` for x [32, 64] float32 (8192 bytes):
a = the sum (reads x, writes buf0: 32 floats = 128 bytes), b = the division (reads x and
buf0). shared_bytes(a, b, nbytes) = 8192 + 128 = 8320.

The stub below counts only vertical sharing (what a writes and b reads): two reductions
of the same input (a horizontal pair) score 0.
Run: python -m miniinductor exercise run 5
"""
TARGET = "miniinductor.scheduler.fusion.shared_bytes"


def shared_bytes(a, b, nbytes) -> int:
    a_writes = {d.name for n in a.nodes for d in n.writes}
    b_reads = {d.name for n in b.nodes for d in n.reads}
    return sum(nbytes(name) for name in a_writes & b_reads)
