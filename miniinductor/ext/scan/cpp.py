"""The C++ scan kernel: the outer dims in parallel, a sequential loop along the scan dim
carrying the running value.

Mirrors the scan of `torch/_inductor/codegen/cpp.py` (its `scan` method, a loop-carried
accumulator) and ATen's `cpu_cum_base_kernel`. For `torch.cumsum(x, 1)` of a float32 [64, 512]:

    extern "C" void cpp_fused_cumsum_0(const float* __restrict__ in_ptr0, float* __restrict__ out_ptr0) {
        #pragma omp parallel for
        for (int64_t i0 = 0; i0 < 64; i0 += 1) {
            float acc0 = 0.0f;                        <- the running value of row i0
            for (int64_t r0 = 0; r0 < 512; r0 += 1) {  <- no `omp simd`: each step reads the last
                auto tmp0 = in_ptr0[512*i0 + r0];
                acc0 = acc0 + tmp0;
                out_ptr0[512*i0 + r0] = acc0;
            }
        }
    }

A `ScanCppKernel` is a CppKernel whose reduction range is the scan dim: its loop nest, OpenMP
pragma over the outer loops, loads (pointwise producers inlined), conversions and stores
are the core's; it adds the carried accumulator and leaves out the inner loop's pragmas.

Simplified: float32 accumulates in float (eager's CPU kernel accumulates it in double: the
last bits of long rows differ); a scan along a dim other than the last walks memory
strided in its inner loop (Inductor's vectorised kernel keeps a vector of accumulators).
"""
from __future__ import annotations

import sympy

from ...codegen.common import CSEVariable
from ...codegen.cpp import COMPUTE_TYPE, CppKernel, cpp_constant
from ...virtualized import V
from .ir import SCAN_TYPES

#: scan type → the C++ statement folding value v into the accumulator
COMBINE = {
    "sum": "{acc} = {acc} + {v};",
    "prod": "{acc} = {acc} * {v};",
    # ATen's _log_add_exp_helper(v, acc): NaN propagates, two equal infinities stay
    "logsumexp": ("{{ auto lo = std::isnan({acc}) ? {acc} : std::min({v}, {acc}); "
                  "auto hi = std::isnan({acc}) ? {acc} : std::max({v}, {acc}); "
                  "{acc} = (lo != hi || std::isfinite(lo)) ? hi + std::log1p(std::exp(lo - hi)) : {v}; }}"),
}


def scan_index(scan, outer_vars, scan_var) -> list:
    """The input's full index: the outer loop variables in order, `scan_var` at the scan dim
    (0 for a dim of one element)."""
    outer = iter(outer_vars)
    index = [scan_var if d == scan.scan_dim else next(outer) for d in range(len(scan.ranges))]
    return [sympy.Integer(0) if n == 1 else i for i, n in zip(index, scan.ranges)]


def split_ranges(scan):
    """(the outer ranges, [the scan dim's size])."""
    return [n for d, n in enumerate(scan.ranges) if d != scan.scan_dim], [scan.ranges[scan.scan_dim]]


class ScanCppKernel(CppKernel):
    def __init__(self, name, scan, config):
        super().__init__(name, *split_ranges(scan), config)
        self.scan_blocks = []   # (the reductions' blocks before it keep their pragmas)

    def node_indices(self, node):
        if not getattr(node, "is_scan", False):   # a reduction of the rows before the scan
            return super().node_indices(node)
        return scan_index(node.scan, self.itervars, self.reduction_vars[0]), []

    def codegen_node(self, node):
        if not getattr(node, "is_scan", False):
            return super().codegen_node(node)
        scan = node.scan
        self._open_block("loop")
        self.scan_blocks.append(self.block)
        acc = self._next_accumulator()
        self._declare(self.block, COMPUTE_TYPE[scan.dtype], acc, cpp_constant(SCAN_TYPES[scan.scan_type][0], scan.dtype))
        index, _ = self.node_indices(node)
        with V.set_ops_handler(self):
            value = scan.inner_fn(index)
            self.compute.writeline(COMBINE[scan.scan_type].format(acc=acc, v=value))
            self.store(node.get_name(), node.node.layout.make_indexer()(index), CSEVariable(acc))
        self.block.written.add(node.get_name())

    def _inner_pragmas(self, block, k) -> list[str]:
        if block in self.scan_blocks or not self.ranges:
            return []   # each step reads the step before: neither `omp simd` nor threads
        return super()._inner_pragmas(block, k)
