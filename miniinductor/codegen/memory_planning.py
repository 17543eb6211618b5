"""Memory planning for the wrapper: buffer lifetimes, frees at last use, and reuse.

Codegen phase (the wrapper's steps → a `MemoryPlan`). Mirrors
`torch/_inductor/codegen/memory_planning.py` and the `AllocateLine` /
`FreeIfNotReusedLine` / `ReuseLine` logic of `codegen/wrapper.py`. `plan_memory` walks the
steps (a kernel or an extern call, each reading and defining buffers): a buffer dies after
its last use, and a dead buffer we allocated goes to a pool keyed by (size, stride, dtype)
that a later allocation takes (`buf7 = buf3  # reuse`); graph inputs, outputs and what an
extern's result may alias are never pooled; the live bytes of each step give the peak.
`inplace_buffers` lets a kernel write an output over an input that dies in it.
Simplified: no pool across graphs. The rules in detail: docs/design_notes.md.
"""
from __future__ import annotations

import dataclasses
import math

import sympy
import torch

from ..ir.nodes import ComputedBuffer, ExternKernel, InputBuffer, MultiOutput, MutationLayout
from ..ir.sizevars import UNBACKED_HINT
from ..logs import plural
from ..virtualized import V


@dataclasses.dataclass
class Step:
    label: str                 # "kernel3" or "extern buf5"
    allocs: list[str]          # buffers this step allocates itself (empty_strided)
    reads: set[str]
    defines: set[str]
    may_alias: bool = False    # an extern call whose output may be a view of an input
    inplace: dict = dataclasses.field(default_factory=dict)  # output → input whose memory it takes


def nbytes(buf) -> int:
    """Bytes of a buffer's storage (with symbolic sizes: at the traced sizes, for the plan's
    estimates; reuse itself needs sizes proved equal, `MemoryPlan._key`)."""
    lay = buf.layout
    if lay is None:
        return 0
    numel = lay.storage_numel()
    return (numel if isinstance(numel, int) else V.graph.sizevars.size_hint(numel)) * lay.dtype.itemsize


def may_alias(node) -> bool:
    """Can this extern call's result share memory with an input? Its schema says so."""
    if isinstance(node, MultiOutput):
        return may_alias(node.parent)
    schema = getattr(node.op, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def inplace_buffers(group, scheduler, graph, removed) -> dict[str, str]:
    """{output: input} pairs where a kernel may write an output into the memory of an input
    that dies in it: same layout, no later step reads the input, no extern result may be a view
    of it, and the kernel reads it only at the index the output is written, before or in the
    writing node. Mirrors Inductor's in-place buffers (`can_inplace`)."""
    pairs, taken = {}, set()
    written = {d.name: (k, d.index) for k, n in enumerate(group.nodes) for d in n.writes}
    for out, (k, index) in written.items():
        buf = graph.get_buffer(out)
        if out in removed or not isinstance(buf, ComputedBuffer) or isinstance(buf.layout, MutationLayout):
            continue   # (a mutation's memory is its input's)
        for dep in group.nodes[k].reads:
            src = dep.name
            if src in taken or src == out or src in removed or src in scheduler.output_names:
                continue
            src_buf = graph.get_buffer(src)
            fresh = isinstance(src_buf, ComputedBuffer) or (isinstance(src_buf, ExternKernel) and not may_alias(src_buf))
            readers = scheduler.readers(src)
            viewed = any(isinstance(getattr(r, "node", None), (ExternKernel, MultiOutput)) and may_alias(r.node)
                         for r in readers)   # (an extern step reading it may have returned a view)
            if not fresh or src_buf.layout is None or readers[-1] is not group or viewed:
                continue
            if (src_buf.layout.size, src_buf.layout.stride, src_buf.layout.dtype) != \
                    (buf.layout.size, buf.layout.stride, buf.layout.dtype):
                continue
            reads = [(j, d.index) for j, n in enumerate(group.nodes) for d in n.reads if d.name == src]
            if all(i == index and j <= k for j, i in reads):
                pairs[out] = src
                taken.add(src)
                break
    return pairs


@dataclasses.dataclass
class MemoryPlan:
    steps: list[Step]
    timeline: list[int]         # live bytes while each step runs
    reuse: dict[str, str]       # new buffer → dead buffer whose memory it takes
    frees: dict[int, list[str]]   # step → names to `del` after it
    lifetimes: dict[str, tuple[int, int]]   # buffer → (first step, last step) it is used in

    @staticmethod
    def _key(buf) -> tuple:
        """Memory is interchangeable when the element type and the storage size agree (with
        symbolic sizes: the same expression, so equal for every size); the new buffer views it
        with its own size and strides."""
        lay = buf.layout
        numel = lay.storage_numel()
        return lay.device, lay.dtype, numel if isinstance(numel, int) else sympy.expand(numel)

    @property
    def peak_bytes(self) -> int:
        return max(self.timeline, default=0)

    def __str__(self):
        lines = [f"peak {self.peak_bytes} bytes; {plural(len(self.reuse), 'buffer')} reuse memory"]
        for k, step in enumerate(self.steps):
            reused = [f"{n}<-{self.reuse[n]}" for n in step.allocs if n in self.reuse]
            freed = self.frees.get(k, [])
            lines.append(f"{k:3d} {step.label:14s} live={self.timeline[k]:>10d}"
                         + (f" reuse {', '.join(reused)}" if reused else "")
                         + (f" free {', '.join(freed)}" if freed else ""))
        return "\n".join(lines)


def freeable_input(name: str) -> bool:
    """Is this graph input's memory released when `call` drops it (`args.clear()`, then `del`
    at its last use)? A backward's saved activations are; parameters, user inputs and incoming
    gradients are not (by name, as Inductor's `is_nonfreeable_buffers`, torch/_inductor/utils.py)."""
    return not name.startswith(("primals_", "arg", "tangents_", "fwd_rng_state", "bwd_rng_state"))


def freeable_inputs(gm: torch.fx.GraphModule) -> dict[str, tuple[str, int]]:
    """{graph input: (its storage, the storage's bytes)} for the inputs whose memory `call`
    releases: `freeable_input` by name, and where capture's partitioner labelled a backward's
    activation (`saved_storage`), the forward value whose memory it is. Several inputs may
    share one storage (views of one forward buffer): it is freed after the last of them;
    a view of a forward input (a parameter's transpose) is never freed, so it is left out."""
    found = {}
    for node in gm.graph.find_nodes(op="placeholder"):
        val = node.meta.get("val")
        if not node.users or not freeable_input(node.name) or not isinstance(val, torch.Tensor):
            continue
        storage = node.meta.get("saved_storage", (node.name, val.untyped_storage().nbytes()))
        if storage is not None:
            found[node.name] = (storage[0], _hint(storage[1]))
    return found


def plan_memory(steps: list[Step], get_buffer, keep: set[str], extern_inputs: set[str],
                freeable: dict[str, tuple[str, int]] | None = None) -> MemoryPlan:
    """Lifetimes, frees at last use and pooled reuse for the wrapper's steps. `keep`: the
    graph's outputs; `extern_inputs`: buffers an extern call's result may alias; `freeable`:
    `freeable_inputs`, whose storages are live from the start and counted until the last
    use of the last input viewing them (a backward's saved activations, which make most of
    its peak)."""
    frees: dict[int, list[str]] = {}
    last_use, first = {}, {}
    for k, step in enumerate(steps):
        for n in step.reads | step.defines:
            last_use[n] = k
            first.setdefault(n, k)
    lifetimes = {n: (first[n], last_use[n]) for n in first}
    size = {n: nbytes(get_buffer(n)) for n in first}
    ours = {n for n in first if not isinstance(get_buffer(n), InputBuffer)}
    storages, released = _freeable_storages(freeable, last_use, keep)
    allocated = {n for s in steps for n in s.allocs}
    fresh_extern = {n for s in steps if not s.allocs and not s.may_alias for n in s.defines
                    if get_buffer(n).layout is not None}  # (a tuple result holds no memory)
    lent = {src for st in steps for src in st.inplace.values()}   # memory passed on in place
    inplace_outs = {out for st in steps for out in st.inplace}   # they own their source's memory now
    poolable = (allocated | fresh_extern | inplace_outs) - keep - extern_inputs - lent
    dies = {k: sorted(n for n in steps[k].reads | steps[k].defines
                      if last_use[n] == k and n not in keep) for k in range(len(steps))}
    # 1. every buffer freed right after its last use: the timeline reuse must not exceed
    timeline = []
    live = sum(nb for nb, _ in storages.values())
    for k, step in enumerate(steps):
        live += sum(size[n] for n in step.defines if n not in step.inplace)
        timeline.append(live)   # the step runs with its inputs and outputs alive
        live -= sum(size[n] for n in dies[k] if n in ours and n not in lent) + released.get(k, 0)
    limit = max(timeline, default=0)
    reuse = _pooled_reuse(steps, get_buffer, timeline, limit, size, dies, poolable)
    reused = set(reuse.values())
    for k in range(len(steps)):
        freed = [n for n in dies[k] if n not in reused]
        if freed:
            frees[k] = freed
    return MemoryPlan(steps, timeline, reuse, frees, lifetimes)


def _freeable_storages(freeable, last_use: dict, keep: set[str]) -> tuple[dict, dict]:
    """plan_memory's storages of the `freeable` inputs that the steps read: ({storage: (bytes,
    the step after which it is released)}, {step: the bytes released after it}). A storage
    that an output views is left out: its memory outlives us."""
    storages: dict[str, tuple[int, int]] = {}   # a freeable input's storage → (bytes, step it dies at)
    for n, (storage, nb) in (freeable or {}).items():
        if n in last_use:
            nbytes_, end = storages.get(storage, (nb, -1))
            storages[storage] = (max(nbytes_, nb), math.inf if n in keep else max(end, last_use[n]))
    storages = {s: v for s, v in storages.items() if v[1] != math.inf}   # (an output's memory outlives us)
    released: dict[int, int] = {}
    for nb, end in storages.values():
        released[end] = released.get(end, 0) + nb
    return storages, released


def _pooled_reuse(steps: list[Step], get_buffer, timeline: list[int], limit: int, size: dict,
                  dies: dict, poolable: set[str]) -> dict[str, str]:
    """plan_memory's step 2: {allocated buffer: the dead buffer whose memory it takes}, raising
    `timeline` (in place) over the steps each lender is held over."""
    reuse: dict[str, str] = {}
    # 2. a dead buffer may lend its memory to a later allocation of the same kind, if
    #    keeping it alive until then never lifts the timeline above that peak
    pool: dict[tuple, list[tuple[str, int]]] = {}   # key → (dead buffer, step it died at), oldest first
    for k, step in enumerate(steps):
        for name in step.allocs:
            entries = pool.get(MemoryPlan._key(get_buffer(name)), [])
            while entries:   # oldest first; one that does not fit now never will (the steps it
                old, died = entries.pop(0)   # would be held over only grow, the timeline only rises)
                held = range(died + 1, k)
                if not held or max(timeline[died + 1:k]) + size[old] <= limit:
                    for j in held:
                        timeline[j] += size[old]
                    reuse[name] = old
                    break
        for n in dies[k]:
            if n in poolable:
                pool.setdefault(MemoryPlan._key(get_buffer(n)), []).append((n, k))
    return reuse


def _hint(size) -> int:
    """A size of a meta tensor as an int: a SymInt's traced value, read without a guard (a
    data-dependent one has none: its stand-in)."""
    if not isinstance(size, torch.SymInt):
        return size
    return size.node.hint if size.node.hint is not None else UNBACKED_HINT
