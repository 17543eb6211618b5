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

Simplified: no in-place reuse of a kernel's own input (the C++ kernels take `__restrict__`
pointers, so an output may not alias an input), and no pool across graphs.
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


def nbytes(buf) -> int:
    lay = buf.layout
    return lay.storage_numel() * lay.dtype.itemsize if lay is not None else 0


class MemoryPlan:
    def __init__(self, steps: list[Step], get_buffer, keep: set[str], extern_inputs: set[str]):
        self.steps = steps
        self.reuse: dict[str, str] = {}           # new buffer → dead buffer whose memory it takes
        self.frees: dict[int, list[str]] = {}     # step → names to `del` after it
        self.timeline: list[int] = []             # live bytes after each step
        self.lifetimes: dict[str, tuple[int, int]] = {}
        last_use, first = {}, {}
        for k, step in enumerate(steps):
            for n in step.reads | step.defines:
                last_use[n] = k
                first.setdefault(n, k)
        allocated = {n for s in steps for n in s.allocs}
        fresh_extern = {n for s in steps if not s.allocs and not s.may_alias for n in s.defines
                        if get_buffer(n).layout is not None}  # (a tuple result holds no memory)
        poolable = (allocated | fresh_extern) - keep - extern_inputs
        pool: dict[tuple, list[str]] = {}
        pooled_at: dict[str, int] = {}
        live = 0
        for k, step in enumerate(steps):
            for name in step.allocs:
                key = self._key(get_buffer(name))
                if pool.get(key):
                    self.reuse[name] = pool[key].pop()
                    pooled_at.pop(self.reuse[name])
                else:
                    live += nbytes(get_buffer(name))
            for name in step.defines - set(step.allocs):
                live += nbytes(get_buffer(name))  # extern outputs: ATen allocates them
            self.timeline.append(live)   # the step runs with its inputs and outputs alive
            for name in sorted(step.reads | step.defines):
                if last_use[name] != k or name in keep:
                    continue
                if name in poolable:
                    pool.setdefault(self._key(get_buffer(name)), []).append(name)
                    pooled_at[name] = k
                else:
                    self.frees.setdefault(k, []).append(name)
                    live -= nbytes(get_buffer(name)) if self._ours(name, get_buffer) else 0
        for name, k in pooled_at.items():      # never taken: free where it died
            self.frees.setdefault(k, []).append(name)
        self._fix_timeline(pooled_at, get_buffer)
        for name in first:
            self.lifetimes[name] = (first[name], last_use[name])

    @staticmethod
    def _ours(name, get_buffer) -> bool:
        from ..ir.nodes import InputBuffer
        return not isinstance(get_buffer(name), InputBuffer)

    def _fix_timeline(self, pooled_at, get_buffer):
        """Buffers left in the pool were freed after their last step: take them off there."""
        for name, k in pooled_at.items():
            for j in range(k + 1, len(self.timeline)):
                self.timeline[j] -= nbytes(get_buffer(name))

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
