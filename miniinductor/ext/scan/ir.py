"""The scan IR node: an inclusive prefix combine along one dim (cumsum, cumprod, logcumsumexp).

Mirrors `ir.Scan` of `torch/_inductor/ir.py`: a `Scan` is a `Loops` node over the output's
ranges whose `inner_fn(index)` reads the input element at `index` (pointwise producers are
inlined into it, as into a reduction), plus the dim it scans and its combine function.
Unlike a reduction it is never inlined: `make_scan` stores it at once into a `ScanBuffer`,
which the scheduler turns into a `ScanSchedulerNode` (passes.NODE_KINDS) and which the scan
kernels (cpp.py, triton.py) compute alone.

Simplified: Inductor's Scan takes several values and a combine function of tuples (which
cummax's (value, index) pairs need); here one value and a named combine (`SCAN_TYPES`).
For its memory dependencies the scheduler reads a scan like a pointwise node (element i
read, element i written): right for ordering and lifetimes, wrong for fusion, which
`scan_fusion` (__init__.py) therefore refuses.
"""
from __future__ import annotations

import dataclasses

import torch

from ...ir.indexing import index_vars
from ...ir.nodes import ComputedBuffer, Layout, Loops, StorageBox, contiguous_strides
from ...scheduler.scheduler import SchedulerNode
from ...virtualized import V, ops

#: scan type → (the value it starts from, torch's function of the same scan)
SCAN_TYPES = {
    "sum": (0, torch.cumsum),
    "prod": (1, torch.cumprod),
    "logsumexp": (float("-inf"), torch.logcumsumexp),
}


@dataclasses.dataclass
class Scan(Loops):
    scan_dim: int = 0
    scan_type: str = "sum"

    def _extra_repr(self):
        return f", scan {self.scan_type!r} along dim {self.scan_dim}"

    def make_loader(self):
        raise AssertionError("a scan is stored (make_scan) before anything reads it")

    def _print_body(self, handler):
        value = self.inner_fn(index_vars("i", self.ranges))
        handler.lines.append(f"return scan({self.scan_type!r}, dim={self.scan_dim}, {value})")

    def store_output(self, name, indexer, index, rindex=None):
        """Element `index` of the input stored at `index`: the scheduler's view of the node
        (kernels call `inner_fn` themselves). Under the IR interpreter (every index at
        once, as tensors) the scan itself is applied, so that it evaluates right too."""
        value = self.inner_fn(index)
        handler = V.ops
        if type(handler).__name__ == "InterpreterHandler":
            value = self._interpret(value)
        return ops.store(name, indexer(index), value)

    def _interpret(self, value):
        value = torch.as_tensor(value).broadcast_to([int(n) for n in self.ranges])
        return SCAN_TYPES[self.scan_type][1](value, self.scan_dim)


class ScanBuffer(ComputedBuffer):
    """A stored `Scan`: its own kind of buffer, so that the scheduler makes a ScanSchedulerNode."""


class ScanSchedulerNode(SchedulerNode):
    """A scan's node: loops as a pointwise node's (its whole range), computed by a kernel of
    its own (`is_scan`: the fusion rules leave it alone; `keeps_own_kernel`: so do the combo kernels)."""
    is_scan = True
    keeps_own_kernel = "a scan (ext/scan: a kernel of its own kind)"

    @property
    def scan(self) -> Scan:
        return self.node.data


def make_scan(x, dim: int, scan_type: str, dtype: torch.dtype, stride=None) -> StorageBox:
    """`x` scanned along `dim` with `scan_type`, in and out as `dtype` (float16/bfloat16
    accumulate in float32 in the kernels): a ScanBuffer, stored with `stride` (eager's) or
    contiguous."""
    size = x.get_size()
    load = x.make_loader()

    def inner_fn(index):
        value = load(index)
        return value if x.get_dtype() == dtype else ops.to_dtype(value, dtype)
    scan = Scan(x.get_device(), dtype, inner_fn, list(size), scan_dim=dim, scan_type=scan_type)
    layout = Layout(x.get_device(), dtype, list(size), list(stride) if stride is not None else contiguous_strides(size))
    return StorageBox(V.graph.register_buffer(ScanBuffer(None, layout, scan)))
