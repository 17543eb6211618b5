"""Extension `cost_model`: each candidate fusion that shares a loop over reduction ranges is
weighed, bytes it saves against work it adds, and refused where it costs more.

The core scores a fusion by the bytes it saves alone (scheduler/fusion.py). Fusing a
pointwise producer into a reduction's loop, or two reductions into one loop, also changes how
each load walks memory: the kernel walks the reduction ranges in one order (triton/tiling.py's
`reduction_order`), and a load that steps several elements at each step of the innermost loop
fetches a whole memory sector (32 bytes) per element it uses. Apart, each kernel walks its own
loads in its own best order (a pointwise kernel in the order of its store, or tiled). So:

  * **saves**: the bytes of the buffers the earlier group writes and the later one reads
    (written once and read once less: an upper bound, a buffer some third kernel also reads is
    still written), and of those both read (read once, not twice);
  * **adds**: the bytes of sectors the fused loop's strided loads waste, minus what the two
    kernels apart waste: per load, its element count times its element size times
    (min(step, sector / element size) - 1), `step` its stride along the innermost loop.

A fusion whose `adds` is larger than its `saves` is refused ("cost: saves X, adds Y"); an
accepted one shows both numbers in its reason. `explain()` and the HTML report list them with
every fusion decision.

Mirrors, loosely, Inductor's `Scheduler.score_fusion` / `speedup_by_fusion` (torch/_inductor/
scheduler.py), which weigh memory saved and, with `benchmark_fusion`, time both. Simplified:
only affine loads are weighed (a gather's addresses are not known); recomputation is not
modelled (our scheduler never repeats a node's loop: fused_shape lines loops up exactly, and
lowering decides what is inlined); a pair of two pointwise groups is left to the core.
"""
from __future__ import annotations

import math

from ...config import declare_extension
from ...ir.sizevars import size_hint
from ...passes import FUSION_RULES
from ...scheduler import fusion
from ...triton.tiling import reduction_loads, stride_order
from ...virtualized import V

SECTOR_BYTES = 32   # a GPU's memory transaction (an L2 sector); a CPU cache line holds two

declare_extension("cost_model", "fusions over reduction loops weighed: bytes saved against strided loads added")


def _itemsize(name: str) -> int:
    try:
        return V.graph.get_dtype(name).itemsize
    except (KeyError, AttributeError):
        return 4


def scattered_bytes(nodes, R, Q) -> int:
    """Bytes of memory sectors wasted by the affine loads of `nodes` in one loop nest over
    R x Q, the reduction ranges Q walked in their best order (0 without Q: a pointwise
    kernel walks in its store's order, or tiles)."""
    if not Q:
        return 0
    n, m = len(R), len(Q)
    # a load two nodes make is made once
    loads = {(dep.name, dep.index): (dep.name, c) for dep, c in reduction_loads(nodes, R, Q)}.values()
    order = stride_order([c[n:] for _, c in loads if any(c[n:])], Q) or list(range(m))
    inner, total = n + order[-1], math.prod(int(s) for s in list(R) + list(Q))
    wasted = 0
    for name, c in loads:
        itemsize = _itemsize(name)
        step = abs(c[inner])
        if step > 1:
            wasted += total * itemsize * (min(step, max(SECTOR_BYTES // itemsize, 1)) - 1)
    return wasted


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def weigh(a, b):
    """A rule of passes.FUSION_RULES: None where it does not judge the pair (no reduction
    loop, loops that do not line up: the core says why); else ((R, Q), kind with both
    numbers), or the refusal with both numbers. Outside a graph (a scheduler built by hand)
    the buffers' sizes are unknown: not judged."""
    shape = fusion.fused_shape(a, b)   # (looked up at each call: an exercise swaps it)
    if not V.has_graph() or isinstance(shape, str) or not shape[1] or not all(str(s).isdigit() for s in list(shape[0]) + list(shape[1])):
        return None
    R, Q = shape
    b_reads = {d.name for n in b.nodes for d in n.reads}
    passed = {d.name for n in a.nodes for d in n.writes} & b_reads
    shared = {d.name for n in a.nodes for d in n.reads} & b_reads   # read once, not twice
    saves = sum(_numel(name) * _itemsize(name) * (2 if name in passed else 1) for name in passed | shared)
    adds = max(0, scattered_bytes(a.nodes + b.nodes, R, Q) - scattered_bytes(a.nodes, a.R, a.Q)
               - scattered_bytes(b.nodes, b.R, b.Q))
    cost = f"cost: saves {_bytes(saves)}, adds {_bytes(adds)}"
    if adds > saves:
        return f"{cost} of strided loads", None
    return shape, ("vertical" if passed else "horizontal") + f"; {cost}"


def _numel(name: str) -> int:
    try:
        return math.prod(size_hint(s) for s in V.graph.get_buffer(name).get_size())
    except KeyError:
        return 0


FUSION_RULES.append(("cost_model", weigh))
