"""The Triton scan kernel: a block of rows per program, `tl.associative_scan` along the row.

Mirrors the scan of `torch/_inductor/codegen/triton.py` (`TritonKernel.scan`, which calls
`tl.associative_scan` with a generated combine function). A row that fits one block
(rnumel <= PERSISTENT_REDUCTION_MAX) is loaded, scanned and stored whole; for a float32
[8192, 4096] cumsum of the last dim:

    @triton.jit
    def triton_per_fused_cumsum_0(in_ptr0, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
        xnumel = 8192
        xoffset = tl.program_id(0) * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
        xmask = xindex < xnumel
        rnumel = 4096
        rbase = tl.arange(0, RBLOCK)[None, :]
        rindex = rbase
        rmask = rindex < rnumel
        tmp0 = tl.load(in_ptr0 + (rindex + 4096*xindex), xmask & rmask, other=0)
        tmp1 = tl.associative_scan(tmp0, 1, _sum_combine)
        tl.store(out_ptr0 + (rindex + 4096*xindex), tmp1, xmask & rmask)

A longer row is scanned RBLOCK elements at a time in the `for roffset` loop of a looped
reduction, each block's scan combined with the running value of the row (`carry`, [XBLOCK,
1]), which then becomes the block's last element. Lanes past the end of the row load 0: a
scan reads only to its left, so they change no stored element (and the carry after the last
block is not read). float16/bfloat16 scan in float32 and round each output at the store; a
scan along another dim than the last is the same kernel with strided loads.

Simplified: XBLOCK and num_warps from a fixed rule (`scan_block_sizes`), no autotuning but
max_autotune's neighbours; Inductor also splits very long scans across programs
(`SplitScan`, a decoupled look-back), which this does not.
"""
from __future__ import annotations

import torch

from ...codegen.common import compute_dtype
from ...triton.helpers import HELPERS
from ...triton.kernel import TritonKernel
from ...triton.overrides import TRITON_TYPE, triton_literal
from ...triton.runtime import next_power_of_2
from ...virtualized import V
from .cpp import scan_index, split_ranges
from .ir import SCAN_TYPES

#: elements a program scans at a time (XBLOCK * RBLOCK) when rows are short
SCAN_BLOCK_NUMEL = 4096
#: RBLOCK of a looped scan (rows longer than one block)
LOOPED_RBLOCK = 1024
#: the most warps a scan program gets
MAX_WARPS = 4

HELPERS["_logsumexp_combine"] = '''
@triton.jit
def _logsumexp_combine(a, b):
    # log(exp(a) + exp(b)), as eager's _log_add_exp_helper: NaN propagates; two equal
    # infinities (both -inf: nothing summed yet) give that infinity
    nan = (a != a) | (b != b)
    lo = tl.where(nan, a + b, tl.minimum(a, b))
    hi = tl.where(nan, a + b, tl.maximum(a, b))
    finite = (lo == lo) & (lo != float("inf")) & (lo != float("-inf"))
    return tl.where((lo != hi) | finite, hi + libdevice.log1p(libdevice.exp(lo - hi)), hi)
'''
COMBINE_FN = {"sum": "_sum_combine", "prod": "_prod_combine", "logsumexp": "_logsumexp_combine"}


def scan_block_sizes(rnumel: int, xnumel: int, persistent: bool) -> dict:
    """A persistent scan: RBLOCK covers the row, XBLOCK rows fill SCAN_BLOCK_NUMEL, a warp per
    256 elements, at most MAX_WARPS; a looped one: one row a program, LOOPED_RBLOCK at a time.
    (H200, rows of 4096 with softmax's reductions in the kernel: 16 warps were well below copy
    bandwidth, 4 and 8 near it: docs/journal/2026-11-28-gpu-scans.md.)"""
    if not persistent:
        return {"XBLOCK": 1, "RBLOCK": LOOPED_RBLOCK, "num_warps": 4}
    rblock = next_power_of_2(max(rnumel, 1))
    xblock = min(next_power_of_2(max(xnumel, 1)), max(1, SCAN_BLOCK_NUMEL // rblock))
    return {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": max(1, min(MAX_WARPS, xblock * rblock // 256))}


class ScanTritonKernel(TritonKernel):
    def __init__(self, name, scan, config):
        super().__init__(name, *split_ranges(scan), config)

    def node_indices(self, node):
        if not getattr(node, "is_scan", False):   # a reduction of the rows before the scan
            return super().node_indices(node)
        return scan_index(node.scan, self.itervars, self.reduction_vars[0]), []

    def block_sizes(self) -> dict:
        return scan_block_sizes(self._hint(self.rnumel, upper=self.persistent), self._hint(self.xnumel), self.persistent)

    def codegen_node(self, node):
        if not getattr(node, "is_scan", False):
            return super().codegen_node(node)
        scan = node.scan
        self._open_block("loop")
        index, _ = self.node_indices(node)
        dtype = compute_dtype(scan.dtype)
        ttype, combine = TRITON_TYPE[dtype], COMBINE_FN[scan.scan_type]
        init = triton_literal(SCAN_TYPES[scan.scan_type][0], dtype)
        self.helpers.add(combine)
        with V.set_ops_handler(self):
            text, vdtype, dims = self._info(scan.inner_fn(index))
            if vdtype != dtype:
                text = f"{text}.to({ttype})"
            if dims != frozenset("xr"):
                text = f"tl.broadcast_to({text}, [XBLOCK, RBLOCK])"
            scanned = self._gen(f"tl.associative_scan({text}, 1, {combine})", dtype, "xr")
            if not self.persistent:
                scanned = self._carry(scanned, combine, init, ttype)
            self.store(node.get_name(), node.node.layout.make_indexer()(index), scanned)
        self.block.written.add(node.get_name())

    def _carry(self, scanned, combine, init, ttype):
        """A looped scan: this block combined with the running value of the row, which then
        becomes the block's last element (picked by a sum of one nonzero lane: exact)."""
        carry = self._new_acc()
        self.block.prefix.writeline(f"{carry} = tl.full([XBLOCK, 1], {init}, {ttype})")
        out = self._gen(f"{combine}({carry}, {scanned})", scanned.dtype, "xr")
        zero = "0" if scanned.dtype in (torch.int64, torch.int32) else "0.0"
        self.helpers.add("_sum_combine")   # (tl.reduce: tl.sum is a @triton.jit function, helpers.py says why not)
        self.compute.writeline(f"{carry} = tl.reduce(tl.where(rbase == RBLOCK - 1, {out}, {zero}), 1, _sum_combine)[:, None]")
        return out
