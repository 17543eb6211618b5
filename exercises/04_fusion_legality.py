"""Fusion legality: may two groups of nodes share one loop nest, and over which loops?

Phase: scheduler. Mirrors `Scheduler.can_fuse` / `can_fuse_vertical` in
`torch/_inductor/scheduler.py` (the shape part: Inductor compares the nodes' `group`,
(numel, rnumel)).

A fused group runs one kernel: outer loops over `R` (its non-reduction ranges) and, inside,
blocks that loop over `Q` (the reduction ranges) or run once per outer iteration. Every
group has `.R`, `.Q` (lists of ints, sizes of 1 dropped; `Q == []` for pointwise) and
`.is_reduction`. `fused_shape(a, b)` returns the (R, Q) of the fused group, or a string
saying why the loops do not line up (the scheduler records it as the reason for not fusing;
the dependency and cycle rules are checked elsewhere).

The rules:
  * two reductions: only when both reduce over the same (R, Q);
  * a reduction and a pointwise group: the pointwise group may iterate R + Q (one element
    of the reduced rows each: softmax's `exp(x - max)` next to its `sum`) or R (one value
    per row: the `/ sum` after it); the fused group keeps the reduction's (R, Q);
  * two pointwise groups: the same R; the fused group is (R, []).
Worked example, softmax of a [32, 64] tensor: `amax` is R=[32], Q=[64]; `exp(x - amax)`
is R=[32, 64]. fused_shape(amax, exp) == ([32], [64]). A pointwise group over [16] next to
amax gives "ranges differ: [16] vs reduction [32]x[64]".

The stub below is the timid version: it fuses only groups whose loops are identical, so
a softmax becomes three kernels instead of one.
Run: python -m miniinductor exercise run 4
"""
TARGET = "miniinductor.scheduler.fusion.fused_shape"


def fused_shape(a, b):
    if a.R == b.R and a.Q == b.Q:
        return a.R, a.Q
    return f"loops differ: {a.R}x{a.Q} vs {b.R}x{b.Q}"
