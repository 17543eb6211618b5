"""The loop nests of a C++ reduction: the row's accumulators folded into lanes, column
tiles for a reduction down columns, Welford's shared counts, and the OpenMP pragmas. The
methods of CppKernel (codegen/cpp.py) that write them, a mixin. Mirrors the outer ("column")
reductions and the several vector accumulators of `torch/_inductor/codegen/cpp.py`.
"""
from __future__ import annotations

import math

from ..ir.sizevars import is_static

#: columns per tile of an outer reduction (CppKernel.reduces_columns): accumulators per thread;
#: the wide tile where every thread still gets one (x.sum(0) of [2048, 2048] on 2 threads: a row's
#: 256 B at a stride of 8 KB took 389 us, its 1 KB 190-210: the prefetchers stream longer runs)
COLUMN_TILE, WIDE_COLUMN_TILE = 64, 256
#: accumulators per reduction of a row (CppKernel._codegen_lane_loops): 4 AVX2 or 2 AVX-512 vectors of floats
LANES = 32


class CppReductionLoops:
    """CppKernel's reduction loop nests (see the module docstring)."""

    def _codegen_column_tile(self, code):
        """One tile of columns: an array of accumulators per reduction, the reduction loops
        outside and the tile's columns inside (contiguous loads, vectorizable), then the
        finished values, their stores and the epilogue, column by column:

            float acc0_tile[64]; ...                              <- each thread its own
            for (int64_t r0 = 0; r0 < 2048; r0 += 1) {
                #pragma omp simd
                for (int64_t i0 = i0_tile; i0 < i0_end; i0 += 1) {
                    auto& acc0 = acc0_tile[i0 - i0_tile];
                    acc0 = acc0 + in_ptr0[i0 + 2048*r0];
        """
        x, block = self.itervars[-1], self.blocks[0]
        accs = [var for op, acc in block.omp_reductions for var in _state(op, acc)]
        tile = self.column_tile
        code.writeline(f"const int64_t {x}_end = std::min<int64_t>({x}_tile + {tile}, {self.size(self.ranges[-1])});")
        code.writelines(f"{self.accumulators[acc][0]} {acc}_tile[{tile}];" for acc in accs)
        code.writeline(f"for (int64_t t = 0; t < {tile}; t += 1) {{ "
                       + " ".join(f"{acc}_tile[t] = {self.accumulators[acc][1]};" for acc in accs) + " }")
        code.writelines(f"int64_t {acc}_weight = 0;" for acc in _welfords(block))   # the tile's columns share it
        tile_loop = f"for (int64_t {x} = {x}_tile; {x} < {x}_end; {x} += 1) {{"
        bind = [f"auto& {acc} = {acc}_tile[{x} - {x}_tile];" for acc in accs]
        for var, size in zip(self.reduction_vars, self.reduction_ranges):
            code.writeline(f"for (int64_t {var} = 0; {var} < {self.size(size)}; {var} += 1) {{")
            code._indent += 1
        code.writelines([*self._welford_steps(block, ""), "#pragma omp simd", tile_loop])
        with code.indent():
            code.writelines(bind)
            code.splice(block.body)
        code.writeline("}")
        for _ in self.reduction_ranges:
            code._indent -= 1
            code.writeline("}")
        code.writeline(tile_loop)
        with code.indent():
            code.writelines(bind)
            code.splice(block.suffix)
            for epilogue in self.blocks[1:]:
                code.splice(epilogue.body)
        code.writeline("}")

    def _codegen_block(self, code, block):
        if block.kind == "outer":
            code.splice(block.body)
            return
        code.splice(block.prefix)
        lanes = self._uses_lanes(block)
        if lanes:
            code.writelines(self._lane_arrays(block))
        for k, (var, size) in enumerate(zip(self.reduction_vars, self.reduction_ranges)):
            if lanes and k == len(self.reduction_ranges) - 1:
                self._codegen_lane_loops(code, block, var, size)
                break
            code.writelines(self._inner_pragmas(block, k))
            code.writeline(f"for (int64_t {var} = 0; {var} < {self.size(size)}; {var} += 1) {{")
            code._indent += 1
        else:
            code.writelines(self._welford_steps(block, ""))
            code.splice(block.body)
        for _ in self.reduction_ranges[:-1] if lanes else self.reduction_ranges:
            code._indent -= 1
            code.writeline("}")
        for op, acc in block.omp_reductions if lanes else []:   # fold the lanes into the accumulator
            if op == "welford":
                code.writeline(f"mi_welford_fold_lanes<{self.accumulators[f'{acc}_mean'][0]}, {LANES}>({acc}_mean_lanes, "
                               f"{acc}_m2_lanes, {acc}_weight_lanes, {acc}_mean, {acc}_m2, {acc}_weight);")
                continue
            combined = f"std::{op}<{self.accumulators[acc][0]}>({acc}, {acc}_lanes[t])" if op in ("max", "min") \
                else f"{acc} {op} {acc}_lanes[t]"
            code.writeline(f"for (int64_t t = 0; t < {LANES}; t += 1) {{ {acc} = {combined}; }}")
        code.splice(block.suffix)

    def _uses_lanes(self, block) -> bool:
        """Fold the row's reductions into LANES accumulators each (below)? For foldable
        reductions over an innermost reduction loop of at least 2 * LANES steps, run on one
        thread (a lane array outside an `omp parallel for` would be shared)."""
        if not (block.omp_reductions and self.reduction_ranges and self.hint(self.reduction_ranges[-1]) >= 2 * LANES):
            return False
        if _welfords(block):   # no clause folds it, no loop of it runs in parallel: lanes, or a scalar loop
            return not block.has_argreduction and all(op for op, _ in block.omp_reductions)
        pragmas = [self._inner_pragmas(block, k) for k in range(len(self.reduction_ranges))]
        return (pragmas[-1][:1] == [f"#pragma omp simd{self._reduction_clause(block)}"]
                and not any("parallel" in p for ps in pragmas for p in ps))

    def _lane_arrays(self, block) -> list[str]:
        arrays = [f"{self.accumulators[acc][0]} {acc}_lanes[{LANES}]; for (int64_t t = 0; t < {LANES}; t += 1) "
                  f"{{ {acc}_lanes[t] = {self.accumulators[acc][1]}; }}"
                  for op, name in block.omp_reductions for acc in _state(op, name)]
        return arrays + [f"int64_t {acc}_weight_lanes = 0;" for acc in _welfords(block)]   # the lanes share it

    def _welford_steps(self, block, lanes: str) -> list[str]:
        """Before each step of a loop holding Welford updates: count the step, in `{acc}_weight`
        or (`lanes` "_lanes") the lanes' shared count, and take its reciprocal."""
        return [f"const auto {acc}_rweight = mi_welford_step<{self.accumulators[f'{acc}_mean'][0]}>({acc}_weight{lanes});"
                for acc in _welfords(block)]

    def _codegen_lane_loops(self, code, block, var, size):
        """The innermost reduction loop in steps of LANES, each step's element t folded into
        lane t of each accumulator: LANES independent chains of adds (8 floats per AVX2
        register, 4 registers; 16 per AVX-512 register, 2) where one accumulator waits on the latency of each add
        (Inductor's C++ reductions use several vector accumulators too). Then the tail, into the
        accumulator itself; the lanes are folded into it after the loops:

            float acc0_lanes[32]; for (...) { acc0_lanes[t] = 0; }
            for (int64_t r0_lanes = 0; r0_lanes < 1024; r0_lanes += 32) {
                #pragma omp simd
                for (int64_t r0 = r0_lanes; r0 < r0_lanes + 32; r0 += 1) {
                    auto& acc0 = acc0_lanes[r0 - r0_lanes];
                    acc0 = acc0 + in_ptr0[1024*i0 + r0];
        """
        n = self.size(size)
        full = str(self.hint(size) // LANES * LANES) if is_static(size) else f"(({n}) / {LANES} * {LANES})"
        code.writeline(f"for (int64_t {var}_lanes = 0; {var}_lanes < {full}; {var}_lanes += {LANES}) {{")
        with code.indent():
            code.writelines([*self._welford_steps(block, "_lanes"), "#pragma omp simd",
                             f"for (int64_t {var} = {var}_lanes; {var} < {var}_lanes + {LANES}; {var} += 1) {{"])
            with code.indent():
                code.writelines(f"auto& {acc} = {acc}_lanes[{var} - {var}_lanes];"
                                for op, name in block.omp_reductions for acc in _state(op, name))
                code.splice(block.body)
            code.writeline("}")
        code.writeline("}")
        if full == n:
            return
        code.writelines(self._inner_pragmas(block, len(self.reduction_ranges) - 1))
        code.writeline(f"for (int64_t {var} = {full}; {var} < {n}; {var} += 1) {{")
        with code.indent():
            code.writelines(self._welford_steps(block, ""))
            code.splice(block.body)
        code.writeline("}")

    @staticmethod
    def _reduction_clause(block) -> str:
        return "".join(f" reduction({op}:{acc})" for op, acc in block.omp_reductions)

    def _inner_pragmas(self, block, k) -> list[str]:
        """With no outer loop, the first inner loop runs in parallel; the innermost gets
        `omp simd` (which, for a reduction, allows reassociating the sum)."""
        if block.has_argreduction or any(op in (None, "welford") for op, _ in block.omp_reductions):
            return []
        clause = self._reduction_clause(block)
        big = math.prod(map(self.hint, self.reduction_ranges)) >= self.config.parallel_min_numel
        when = self._parallel_if(self.reduction_ranges)
        if k == 0 and not self.ranges and (big or when):
            return [f"#pragma omp parallel for{clause}{when}"]
        if k == len(self.reduction_ranges) - 1:
            return [f"#pragma omp simd{clause}"]
        return []


def _state(op, acc) -> list[str]:
    """The variables of an accumulator that lanes and column tiles keep one of each: a Welford
    one's mean and m2 (their count is shared: `_welfords`)."""
    return [f"{acc}_mean", f"{acc}_m2"] if op == "welford" else [acc]


def _welfords(block) -> list[str]:
    return [acc for op, acc in block.omp_reductions if op == "welford"]
