"""Reference solution of exercise 05 (the fusion score: bytes saved)."""
TARGET = "miniinductor.scheduler.fusion.shared_bytes"


def shared_bytes(a, b, nbytes) -> int:
    a_touch = {d.name for n in a.nodes for d in n.reads + n.writes}
    b_reads = {d.name for n in b.nodes for d in n.reads}
    return sum(nbytes(name) for name in a_touch & b_reads)
