"""The loop nests of a C++ pointwise kernel other than its logical loops in order: loops
reordered by the store's strides, 16 x 16 tiles for a transpose, and values moved out of the
inner loops they do not vary in. The methods of CppKernel (codegen/cpp.py) that write them, a
mixin; the plans themselves (which order, which dims to tile, what moves where) are
codegen/cpp_loops.py's. Mirrors the loop reordering of `torch/_inductor/ir.py` and the tiled
kernel of `torch/_inductor/codegen/cpp.py` (`CppTile2DKernel`).
"""
from __future__ import annotations

import dataclasses

import sympy

from ..ir.sizevars import is_static
from ..virtualized import V
from .common import IndentedBuffer
from .cpp_loops import TILE, Loop, hoist_invariant, loop_plan, merged_dims, tile_buffer_code


class CppTiledLoops:
    """CppKernel's reordered, tiled and hoisted loop nests (see the module docstring)."""

    def pointwise_plan(self):
        """A pointwise kernel's loop plan (cpp_loops.loop_plan), or None."""
        if not self.is_pointwise():
            return None
        return loop_plan(self.itervars, self.ranges, **{f"{k}s": v for k, v in self.access_strides.items()})

    def dims_to_merge(self) -> list[list[int]] | None:
        """After codegen: the runs of loops to merge (cpp_loops.merged_dims) where this
        pointwise kernel transposes (a load contiguous along another dim than its first store)
        and its dims merge, else None (the caller keeps the merged kernel if it tiles). Merged,
        an edge cuts fewer tiles: a channels-last [8, 64, 30, 30] written NCHW tiles H*W = 900
        (56 whole tiles of 16 and one cut) instead of W = 30 (one whole, one cut) per row; with
        W = 6 it tiled nothing."""
        loads, stores = self.access_strides["load"], self.access_strides["store"]
        if not self.is_pointwise() or self.unmerged is not None or not stores or stores[0] is None:
            return None
        inner = {v for v, stride in stores[0].items() if stride == 1}
        if not any(a is not None and any(st == 1 and v not in inner for v, st in a.items()) for a in loads):
            return None   # no load runs along another dim than the store: nothing to tile
        return merged_dims(self.itervars, self.ranges, loads + stores)

    def _hoisted(self, written: list[Loop], depth: int) -> list[list[str]] | None:
        """A pointwise kernel's innermost body, each line in the loop it varies with
        (cpp_loops.hoist_invariant; the last list stays innermost), or None: one loop, or a size
        that is symbolic or 0 (a loop that may not run would have its loads moved out of it). A
        BatchNorm + ReLU over NCHW [8, 64, 32, 32] computed its per-channel sqrt and division in
        every vector of 16 (g++ moved them out of neither the vector loop nor H's): 80 us a
        call on two threads, 19 with them once per (image, channel) row (torch.relu_ of the same
        buffer: 15). Inductor merges H and W into one loop and leaves the motion to g++."""
        if not all(is_static(n) and self.hint(n) > 0 for n in self.ranges):
            return None
        loop_vars = [loop.var for loop in written] + ([str(self.vec.x)] if self.vec else [])
        if len(loop_vars) < 2:
            return None
        lines = [line for block in (self.vec or self).blocks for line in block.body.getvalue().splitlines()]
        return hoist_invariant(lines, loop_vars, max(depth - 1, 0))

    def _tile_loads(self, plan) -> list[Loop]:
        """Each transposed load of a tiled kernel is copied into a local tile first
        (`self.tile_prologue`) and read from there by the body; returns the tile's loops."""
        self.tile_prologue = []
        b = plan.tile[1]
        corner = {v: sympy.Symbol(f"{v}_tile", integer=True, nonnegative=True) for v in plan.tile}
        cut = any(self.hint(self.var_ranges[v]) % TILE for v in plan.tile)   # an edge cuts some tiles short
        seen = set()
        for name, index, strides in self.plain_loads:
            expr = f"{self.args.input(name)}[{self.index(index)}]"
            if expr in seen or not plan.transposed(strides):
                continue
            seen.add(expr)
            corner_index = self.index(sympy.sympify(index).subs(corner))
            lines, element = tile_buffer_code(
                plan, f"tile{len(seen) - 1}", self.buffer_ctype(name), expr,
                f"{self.args.input(name)}[{corner_index}]", strides[b],
                self._whole_tile_reads(name, corner_index, strides[b]) if cut else True)
            self.tile_prologue += lines
            for block in self.blocks:
                block.body = _replaced(block.body, expr, element)
        return plan.loops[-2:]

    def _codegen_tile(self, code, loops: list[Loop], simd: bool):
        """Inside a tile: its transposed loads copied, then its two loops and the body. The
        values that do not vary along the innermost loop are computed once per row of the tile,
        before that loop, and where an edge cuts tiles short the whole ones get their own copy
        of the loops, to a constant 16 (Inductor's tail branch): g++ did neither by itself. A
        channels-last [8, 64, 30, 30] BatchNorm + ReLU written NCHW computed its per-channel
        sqrt and division in every vector: 88 -> 60 us on two threads (Inductor's kernel 56).

            if (i2_tile + 16 <= 900) {                             <- a whole tile
                for (int64_t i1 = i1_tile; i1 < i1_tile + 16; i1 += 1) {
                    auto tmp6 = std::sqrt(mi_add(in_ptr2[i1], 1e-05f));   <- once per channel
                    #pragma omp simd
                    for (int64_t i2 = i2_tile; i2 < i2_tile + 16; i2 += 1) {
                        ...
            } else { ...the same loops to std::min<int64_t>(i2_tile + 16, 900)... }
        """
        code.writelines(self.tile_prologue)
        lines = [line for block in self.blocks for line in block.body.getvalue().splitlines()]   # as splice() sees them
        hoisted, body = hoist_invariant(lines, [loop.var for loop in loops])
        cut = [loop for loop in loops if loop.edge is not None]

        def write(loops):
            outer, inner = loops
            code.writeline(f"for (int64_t {outer.var} = {outer.start}; {outer.var} < {outer.end}; {outer.var} += 1) {{")
            with code.indent():
                code.writelines(hoisted + ["#pragma omp simd"] * simd)
                code.writeline(f"for (int64_t {inner.var} = {inner.start}; {inner.var} < {inner.end}; {inner.var} += 1) {{")
                with code.indent():
                    code.writelines(body)
                code.writeline("}")
            code.writeline("}")
        if not cut:
            return write(loops)
        code.writeline(f"if ({' && '.join(f'{loop.var}_tile + {TILE} <= {loop.edge}' for loop in cut)}) {{")
        with code.indent():
            write([dataclasses.replace(loop, end=f"{loop.var}_tile + {TILE}") for loop in loops])
        code.writeline("} else {")
        with code.indent():
            write(loops)
        code.writeline("}")

    @staticmethod
    def _whole_tile_reads(name, corner_index: str, row_stride) -> str | bool:
        """Where an edge cuts a tile short, the C++ condition under which reading the whole
        16 x 16 tile from `corner_index` still stays inside `name`'s elements (the rows past
        the edge are the next ones' elements, read and never stored). A channels-last
        [8, 64, 30, 30] BatchNorm + ReLU written NCHW, tiled along W, then transposed nearly
        every tile in registers, not only those of the first 16 columns: 551 -> 360 us on one
        thread (merging H and W since leaves one cut tile per 900 columns). False: never."""
        layout = V.graph.get_buffer(name).layout
        if not (is_static(row_stride) and int(row_stride) > 0 and all(map(is_static, (*layout.size, *layout.stride)))
                and all(int(st) >= 0 for st in layout.stride)):
            return False
        return f"({corner_index}) + {(TILE - 1) * int(row_stride) + TILE - 1} < {int(layout.storage_numel())}"


def _replaced(buffer: IndentedBuffer, old: str, new: str) -> IndentedBuffer:
    replaced = IndentedBuffer()
    replaced.lines = [line.replace(old, new) for line in buffer.lines]
    return replaced
