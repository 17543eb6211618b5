"""Memory planning for the wrapper: buffer lifetimes, frees at last use, and reuse.

Mirrors `torch/_inductor/codegen/memory_planning.py` and the `AllocateLine` /
`FreeIfNotReusedLine` / `ReuseLine` logic of `codegen/wrapper.py`. The wrapper runs a
list of steps (a kernel or an extern call); each step reads and defines buffers. We:

  * compute each buffer's last use; after it, the buffer is dead;
  * put a dead buffer that we allocated ourselves in a pool keyed by (size, stride, dtype);
    a later allocation with the same key takes it (`buf7 = buf3  # reuse`) instead of
    asking the allocator again; a pooled buffer nobody takes is deleted where it died;
  * never pool graph inputs, outputs, or buffers handed to an extern call whose schema
    says its result may alias an input (a view of them may still be alive); outputs of
    the other extern calls (mm, bmm...) are fresh tensors and are pooled like ours;
  * record the live bytes after every step, so the plan's peak can be compared with
    eager's (estimated the same way from the ATen graph, op by op, see `eager_peak_bytes`).

In place (decided with the kernel, `compile_fx.inplace_buffers`): a C++ kernel may write an
output straight over an input that dies in it, read only at the same index; the kernel
then takes one `in_out_ptr` for both (so `__restrict__` still holds) and the wrapper binds
`out = src`. Simplified: no pool across graphs; Triton kernels do not write in place.
"""
from __future__ import annotations

import dataclasses
import math

import torch


@dataclasses.dataclass
class Step:
    label: str                 # "kernel3" or "extern buf5"
    allocs: list[str]          # buffers this step allocates itself (empty_strided)
    reads: set[str]
    defines: set[str]
    may_alias: bool = False    # an extern call whose output may be a view of an input
    inplace: dict = dataclasses.field(default_factory=dict)  # output → input whose memory it takes


def nbytes(buf) -> int:
    lay = buf.layout
    return lay.storage_numel() * lay.dtype.itemsize if lay is not None else 0


class MemoryPlan:
    def __init__(self, steps: list[Step], get_buffer, keep: set[str], extern_inputs: set[str]):
        self.steps = steps
        self.reuse: dict[str, str] = {}           # new buffer → dead buffer whose memory it takes
        self.frees: dict[int, list[str]] = {}     # step → names to `del` after it
        self.lifetimes: dict[str, tuple[int, int]] = {}
        last_use, first = {}, {}
        for k, step in enumerate(steps):
            for n in step.reads | step.defines:
                last_use[n] = k
                first.setdefault(n, k)
        self.lifetimes = {n: (first[n], last_use[n]) for n in first}
        size = {n: nbytes(get_buffer(n)) for n in first}
        ours = {n for n in first if not _is_input(get_buffer(n))}
        allocated = {n for s in steps for n in s.allocs}
        fresh_extern = {n for s in steps if not s.allocs and not s.may_alias for n in s.defines
                        if get_buffer(n).layout is not None}  # (a tuple result holds no memory)
        lent = {src for st in steps for src in st.inplace.values()}   # memory passed on in place
        inplace_outs = {out for st in steps for out in st.inplace}   # they own their source's memory now
        poolable = (allocated | fresh_extern | inplace_outs) - keep - extern_inputs - lent
        dies = {k: sorted(n for n in steps[k].reads | steps[k].defines
                          if last_use[n] == k and n not in keep) for k in range(len(steps))}
        # 1. every buffer freed right after its last use: the timeline reuse must not exceed
        self.timeline = []
        live = 0
        for k, step in enumerate(steps):
            live += sum(size[n] for n in step.defines if n not in step.inplace)
            self.timeline.append(live)   # the step runs with its inputs and outputs alive
            live -= sum(size[n] for n in dies[k] if n in ours and n not in lent)
        limit = self.peak_bytes
        # 2. a dead buffer may lend its memory to a later allocation of the same kind, if
        #    keeping it alive until then never lifts the timeline above that peak
        pool: list[tuple[str, int]] = []            # (dead buffer, step it died at)
        for k, step in enumerate(steps):
            for name in step.allocs:
                key = self._key(get_buffer(name))
                for entry in pool:
                    old, died = entry
                    held = range(died + 1, k)
                    if self._key(get_buffer(old)) == key and all(self.timeline[j] + size[old] <= limit for j in held):
                        for j in held:
                            self.timeline[j] += size[old]
                        self.reuse[name] = old
                        pool.remove(entry)
                        break
            pool += [(n, k) for n in dies[k] if n in poolable]
        reused = set(self.reuse.values())
        for k in range(len(steps)):
            freed = [n for n in dies[k] if n not in reused]
            if freed:
                self.frees[k] = freed

    @staticmethod
    def _key(buf):
        """Memory is interchangeable when the element type and the storage size agree;
        the new buffer views it with its own size and strides."""
        lay = buf.layout
        return lay.device, lay.dtype, lay.storage_numel()

    @property
    def peak_bytes(self) -> int:
        return max(self.timeline, default=0)

    def __str__(self):
        lines = [f"peak {self.peak_bytes} bytes; {len(self.reuse)} buffers reuse memory"]
        for k, step in enumerate(self.steps):
            reused = [f"{n}<-{self.reuse[n]}" for n in step.allocs if n in self.reuse]
            freed = self.frees.get(k, [])
            lines.append(f"{k:3d} {step.label:14s} live={self.timeline[k]:>10d}"
                         + (f" reuse {', '.join(reused)}" if reused else "")
                         + (f" free {', '.join(freed)}" if freed else ""))
        return "\n".join(lines)


def _is_input(buf) -> bool:
    from ..ir.nodes import InputBuffer
    return isinstance(buf, InputBuffer)


def eager_peak_bytes(gm: torch.fx.GraphModule) -> int:
    """Peak bytes of intermediates if the ATen graph ran op by op, each op allocating its
    outputs and each tensor freed after its last user (a view keeps its base alive).
    Composite ops that eager runs as one kernel appear here decomposed, so this slightly
    overstates eager; it is the baseline our plan must not exceed."""
    nodes = list(gm.graph.nodes)
    root, size, end = {}, {}, {}
    for k, node in enumerate(nodes):
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        tensors = [v for v in (val if isinstance(val, (list, tuple)) else [val]) if isinstance(v, torch.Tensor)]
        base = node.all_input_nodes[0] if getattr(node.target, "is_view", False) and node.all_input_nodes else None
        root[node] = root.get(base, None) if base is not None else node
        if root[node] is node:
            size[node] = sum(math.prod(t.shape) * t.dtype.itemsize for t in tensors)
            end[node] = k
    for k, node in enumerate(nodes):
        for inp in node.all_input_nodes:
            r = root.get(inp)
            if r is not None:
                end[r] = len(nodes) if node.op == "output" else max(end.get(r, k), k)
    live = peak = 0
    for k, node in enumerate(nodes):
        live += size.get(node, 0)
        peak = max(peak, live)
        live -= sum(size[r] for r in size if end.get(r, k) == k)
    return peak
