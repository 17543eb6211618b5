"""The loop nests of a C++ pointwise kernel other than its logical loops in order: loops
reordered by the store's strides, 16 x 16 tiles for a transpose, and values moved out of the
inner loops they do not vary in. The functions of CppFastKernel (kernel.py) that write them,
each taking the kernel; the plans themselves (which order, which dims to tile, what moves
where) are loops.py's. Mirrors the loop reordering of `torch/_inductor/ir.py` and the tiled
kernel of `torch/_inductor/codegen/cpp.py` (`CppTile2DKernel`).
"""
from __future__ import annotations

import dataclasses

import sympy

from ...codegen.common import IndentedBuffer
from ...ir.sizevars import is_static
from ...virtualized import V
from .loops import TILE, Loop, hoist_invariant, tile_buffer_code


def hoisted(kernel, written: list[Loop], depth: int) -> list[list[str]] | None:
    """A pointwise kernel's innermost body, each line in the loop it varies with
    (loops.hoist_invariant; the last list stays innermost), or None: one loop, or a size
    that is symbolic or 0 (a loop that may not run would have its loads moved out of it). A
    BatchNorm + ReLU over NCHW [8, 64, 32, 32] computed its per-channel sqrt and division in
    every vector of 16 (g++ moved them out of neither the vector loop nor H's): several times
    slower on two threads than with them once per (image, channel) row (then close to
    torch.relu_ of the same buffer). Inductor merges H and W into one loop and leaves the
    motion to g++."""
    if not all(is_static(n) and kernel.hint(n) > 0 for n in kernel.ranges):
        return None
    loop_vars = [loop.var for loop in written] + ([str(kernel.vec.x)] if kernel.vec else [])
    if len(loop_vars) < 2:
        return None
    lines = [line for block in (kernel.vec or kernel).blocks for line in block.body.getvalue().splitlines()]
    return hoist_invariant(lines, loop_vars, max(depth - 1, 0))


def tile_loads(kernel, plan) -> tuple[list[str], list[Loop]]:
    """Each transposed load of a tiled kernel is copied into a local tile first and read from
    there by the body (its blocks are rewritten so); returns (the lines that copy the tiles,
    the tile's two loops)."""
    prologue = []
    b = plan.tile[1]
    corner = {v: sympy.Symbol(f"{v}_tile", integer=True, nonnegative=True) for v in plan.tile}
    cut = any(kernel.hint(kernel.var_ranges[v]) % TILE for v in plan.tile)   # an edge cuts some tiles short
    seen = set()
    for name, index, strides in kernel.plain_loads:
        expr = f"{kernel.args.input(name)}[{kernel.index(index)}]"
        if expr in seen or not plan.transposed(strides):
            continue
        seen.add(expr)
        corner_index = kernel.index(sympy.sympify(index).subs(corner))
        lines, element = tile_buffer_code(
            plan, f"tile{len(seen) - 1}", kernel.buffer_ctype(name), expr,
            f"{kernel.args.input(name)}[{corner_index}]", strides[b],
            whole_tile_reads(name, corner_index, strides[b]) if cut else True)
        prologue += lines
        for block in kernel.blocks:
            block.body = _replaced(block.body, expr, element)
    return prologue, plan.loops[-2:]


def codegen_tile(kernel, code, prologue: list[str], loops: list[Loop], simd: bool):
    """Inside a tile: its transposed loads copied (`prologue`), then its two loops and the
    body. The values that do not vary along the innermost loop are computed once per row of
    the tile, before that loop, and where an edge cuts tiles short the whole ones get their
    own copy of the loops, to a constant 16 (Inductor's tail branch): g++ did neither by
    itself, and a channels-last [8, 64, 30, 30] BatchNorm + ReLU written NCHW computed its
    per-channel sqrt and division in every vector (once per row: close to Inductor's kernel).

        if (i2_tile + 16 <= 900) {                             <- a whole tile
            for (int64_t i1 = i1_tile; i1 < i1_tile + 16; i1 += 1) {
                auto tmp6 = std::sqrt(mi_add(in_ptr2[i1], 1e-05f));   <- once per channel
                #pragma omp simd
                for (int64_t i2 = i2_tile; i2 < i2_tile + 16; i2 += 1) {
                    ...
        } else { ...the same loops to std::min<int64_t>(i2_tile + 16, 900)... }
    """
    code.writelines(prologue)
    lines = [line for block in kernel.blocks for line in block.body.getvalue().splitlines()]   # as splice() sees them
    hoisted_lines, body = hoist_invariant(lines, [loop.var for loop in loops])
    cut = [loop for loop in loops if loop.edge is not None]

    def write(loops):
        outer, inner = loops
        code.writeline(f"for (int64_t {outer.var} = {outer.start}; {outer.var} < {outer.end}; {outer.var} += 1) {{")
        with code.indent():
            code.writelines(hoisted_lines + ["#pragma omp simd"] * simd)
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


def whole_tile_reads(name, corner_index: str, row_stride) -> str | bool:
    """Where an edge cuts a tile short, the C++ condition under which reading the whole
    16 x 16 tile from `corner_index` still stays inside `name`'s elements (the rows past
    the edge are the next ones' elements, read and never stored). A channels-last
    [8, 64, 30, 30] BatchNorm + ReLU written NCHW, tiled along W, then transposed nearly
    every tile in registers, not only those of the first 16 columns, and ran faster on one
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
