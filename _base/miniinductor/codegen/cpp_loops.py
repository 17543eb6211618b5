"""The loop nest of a C++ pointwise kernel: in which order its loops run, and 2-D tiles for
transposes. Used by CppKernel.codegen_loops (codegen/cpp.py).

A pointwise kernel's body computes one element from its index alone, so its loops may run
in any order. By default they run in the order of the buffer's logical dims (N, C, H, W),
which walks memory in order only for a contiguous store. Two cases were slow
(channels-last [8, 64, 32, 32], two threads):

  * a channels-last store (C has stride 1): the innermost loop, W, stepped 64 floats per
    element on both sides (relu of a channels-last tensor: 1.2 ms; Inductor 0.24 ms).
    `loop_plan` orders the loops by the first store's strides, largest outside, so that
    the innermost loop is the one the store is contiguous along.
  * a transpose (a load contiguous along another dim than the store, e.g. a channels-last
    convolution's output read by a kernel that writes NCHW): one side strides whatever the
    order (1.2-1.5 ms for BatchNorm + ReLU so; Inductor 0.36 ms). The two dims, `a` (the
    load's contiguous one) and the store's innermost `b`, are cut into TILE x TILE tiles: the
    loops walk the tiles (the inner of the two along the dim where the transpose's strided
    side moves least: `_tiles_along_a`); in each, every transposed load is first copied into a local array
    (`tile_buffer_code`: `mi_transpose_16x16`, or a scalar loop), then `a` and `b` run over
    the tile, `b` innermost (`omp simd`: the array read and the store both contiguous).
    BatchNorm + ReLU: 0.21 ms.

Mirrors the loop-order choice of `torch/_inductor/ir.py` (`ComputedBuffer.simplify_and_reorder`,
`pick_loop_order`: loops sorted by the strides of the buffer's reads and writes) and the
tiled kernel of `torch/_inductor/codegen/cpp.py` (`CppTile2DKernel`, `transpose_mxn`).
Simplified: only pointwise kernels with static sizes whose stores are affine in the loop
variables (a store through an index read from memory keeps the default order); the order
follows the first store alone (Inductor weighs every access); one pair of tiled dims per
kernel, 16 x 16; float32 tiles are transposed in registers (with AVX-512) where the tile is
whole, or wherever reading it whole stays inside the input (else, and for other dtypes: a
scalar copy loop); stores are never staged through a tile. A transposing kernel's adjacent
dims that every access walks as one (`merged_dims`, Inductor's `_simplify_loops`) are merged
first -- by generating the kernel again over the merged loops (compile_fx.generate_kernel) --
so that fewer tiles are cut: H and W of a [N, C, 30, 30] image tile as 900, not as 30.
Inside a tile, the body's values that do not vary along `b` are computed once per row
(`hoist_invariant`), and whole tiles loop to a constant 16 (CppKernel._codegen_tile).
"""
from __future__ import annotations

import dataclasses
import re

from ..ir.sizevars import is_static

#: the side of a transposing kernel's tiles: 16 floats, one 64-byte cache line
TILE = 16


@dataclasses.dataclass
class Loop:
    var: str
    start: str
    end: str
    step: int
    trips: int     # iterations (for the parallel pragma's heuristic)
    edge: int | None = None   # a loop inside a tile that the dim's edge cuts short: the dim's size


@dataclasses.dataclass
class LoopPlan:
    loops: list[Loop]        # outermost first; a tiled plan ends with the two loops inside a tile
    tile: tuple | None = None   # (a, b): the dims tiled, `b` innermost

    def outer(self) -> list[Loop]:
        return self.loops[:-2] if self.tile else self.loops

    def transposed(self, strides) -> bool:
        """Does an access with `strides` run along `a` and stride along `b` (read it tile by tile)?"""
        a, b = self.tile or (None, None)
        return self.tile is not None and transposes(strides, a, b)


def transposes(strides, a, b) -> bool:
    """Does an access with `strides` (None: irregular) run along `a` and stride along `b`?"""
    return strides is not None and strides.get(a) == 1 and abs(strides.get(b, 0)) > 1


def loop_plan(itervars, ranges, loads, stores) -> LoopPlan | None:
    """The loops of a pointwise kernel over `ranges` whose accesses have the strides `loads`
    and `stores` (lists of `affine_strides`, None for an irregular one); None: the default
    order (symbolic sizes, an irregular store, or nothing to change)."""
    if not stores or any(s is None for s in stores) or not all(map(is_static, ranges)):
        return None
    size = {v: int(n) for v, n in zip(itervars, ranges)}
    moving = [v for v in itervars if size[v] > 1]
    if not moving:
        return None
    # by the first store's strides, largest outside (sorted() is stable: ties keep their order)
    order = sorted(moving, key=lambda v: -abs(stores[0][v]))
    inner = order[-1]
    tiled = _tile_dim(inner, order, [a for a in loads + stores[1:] if a is not None], size)
    if order == moving and tiled is None:
        return None
    step = {v: TILE if tiled is not None and v in (tiled, inner) else 1 for v in itervars}
    if tiled is not None and (load := _tiles_along_a(tiled, inner, loads, stores[0])) is not None:
        order = sorted(moving, key=lambda v: -abs(load.get(v, 0)))   # `a` innermost: its stride is 1
    # the dims of size 1 and 0 outside: a body may name a size-1 dim's variable, and an empty
    # dim's loop (run 0 times) must still declare its variable, which the body's indices name
    loops = [Loop(f"{v}_tile" if step[v] > 1 else str(v), "0", str(size[v]), step[v], -(-size[v] // step[v]))
             for v in [v for v in itervars if size[v] <= 1] + order]
    if tiled is None:
        return LoopPlan(loops)
    for v in (tiled, inner):
        end = f"{v}_tile + {TILE}" if size[v] % TILE == 0 else f"std::min<int64_t>({v}_tile + {TILE}, {size[v]})"
        loops.append(Loop(str(v), f"{v}_tile", end, 1, TILE, None if size[v] % TILE == 0 else size[v]))
    return LoopPlan(loops, (tiled, inner))


def merged_dims(itervars, ranges, accesses) -> list[list[int]] | None:
    """Runs of adjacent loops that every access walks as one loop (Inductor's
    `_simplify_loops`): dims k and k + 1 merge where each access's stride along k is
    size[k + 1] times its stride along k + 1 ([N, C, H, W] read channels-last and written
    NCHW: H and W, 30 x 30 -> 900). The groups of dims, or None: nothing merges, an access
    is not affine, or a size is symbolic."""
    if not accesses or any(a is None for a in accesses) or not all(map(is_static, ranges)):
        return None
    groups = [[0]] if itervars else []
    for k in range(1, len(itervars)):
        u, v = itervars[k - 1], itervars[k]
        if all(a.get(u, 0) == int(ranges[k]) * a.get(v, 0) for a in accesses):
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups if any(len(g) > 1 for g in groups) else None


def _tiles_along_a(a, b, loads, store) -> dict | None:
    """The transposed load (the first) whose memory order the loops should take, the tiles walked
    along `a` (its contiguous dim), or None: keep the store's order, the tiles along `b`. Taken
    where the store strides along `a` less than a transposed load strides along `b`: the next tile's strided side
    then moves by 16 short rows, not 16 long ones, and the load is read in long runs. [8, 64,
    32, 32] on two threads (Inductor's tiles walk H*W innermost both ways): NCHW -> channels-last
    0.061 ms with C's tiles innermost, 0.043 with W's (Inductor 0.036-0.046); BatchNorm + ReLU
    channels-last -> NCHW 0.066 ms with H*W's tiles innermost, 0.076 with C's (Inductor 0.084).
    With C's tiles inside H's loop (not outside it, as now), the copy measured as fast alone but
    slowed the convolution after it by 0.03-0.1 ms (each channel's page read 128 bytes at a
    time)."""
    transposed = [ld for ld in loads if transposes(ld, a, b)]
    return transposed[0] if transposed and abs(store.get(a, 0)) < max(abs(ld[b]) for ld in transposed) else None


def _tile_dim(inner, order, accesses, size):
    """The dim to tile with `inner`: one that an access is contiguous along while it strides
    along `inner` (a transpose), both at least TILE / 2 long; None if there is none."""
    for strides in accesses:
        for v in order[:-1]:
            if transposes(strides, v, inner) and min(size[v], size[inner]) >= TILE // 2:
                return v
    return None


def tile_buffer_code(plan: LoopPlan, name: str, ctype: str, load: str, corner: str, row_stride: int,
                     full: bool | str) -> tuple[list[str], str]:
    """A transposed load read tile by tile (Inductor's `transpose_mxn` into a local buffer):
    (the lines that copy the tile's elements of `load` into the local array `name`; what the
    body then reads instead of `load`). The body's loop along `b` then reads the array
    contiguously and vectorizes; g++ does not vectorize it while it gathers from memory (a
    scalar BatchNorm + ReLU: 1.2 ms, 0.55 with the tile copied by a scalar loop). A full
    float tile is transposed by `mi_transpose_16x16` (cpp_prelude.h) from `corner`, its first
    element, whose rows (along `b`) are `row_stride` apart: every tile where `full` is True,
    those where the C++ condition `full` holds where it is a string (the loops' edges cut
    the others, which the scalar loop copies), none where it is False."""
    a_loop, b_loop = plan.loops[-2:]
    a, b = a_loop.var, b_loop.var
    element = f"{name}[{TILE} * ({a} - {a}_tile) + ({b} - {b}_tile)]"
    lines = [f"alignas(64) {ctype} {name}[{TILE} * {TILE}];"]
    transpose = f"mi_transpose_16x16(&{corner}, {row_stride}, {name});"
    scalar = [f"for (int64_t {b} = {b_loop.start}; {b} < {b_loop.end}; {b} += 1) {{",
              f"    for (int64_t {a} = {a_loop.start}; {a} < {a_loop.end}; {a} += 1) {{",
              f"        {element} = {load};", "    }", "}"]
    if full is False or ctype != "float":
        return lines + scalar, element
    if full is True:
        return lines + [transpose], element
    return lines + [f"if ({full}) {{", f"    {transpose}", "} else {"] + [f"    {line}" for line in scalar] + ["}"], element


ASSIGNMENT = re.compile(r"auto (tmp\d+) = (.*);")


def hoist_invariant(lines: list[str], loop_vars: list[str], first: int = 0) -> list[list[str]]:
    """The innermost body `lines` of a loop nest over `loop_vars` (outermost first), each line
    moved out to the outermost loop inside which all it reads is defined (loop-invariant code
    motion): `levels[k]` go inside loop k before loop k + 1 opens, `levels[-1]` stay innermost;
    none above loop `first` (the last of a `collapse`d group: those loops nest perfectly). A
    line moves only if it is one `auto tmpN = ...;` at the body's top level (not inside an
    `ops.masked` lambda, whose loads may fall outside) naming no buffer the kernel writes
    (`out_ptr`, `in_out_ptr`: a store in the loop may change it); the rest keep their order.
    The caller makes sure every inner loop runs at least once (else a moved load would run
    where none did)."""
    last = len(loop_vars) - 1
    levels: list[list[str]] = [[] for _ in loop_vars]
    level_of: dict[str, int] = {}
    depth = 0
    for line in lines:
        text = line.strip()
        found = ASSIGNMENT.fullmatch(text) if depth == 0 else None
        depth += text.count("{") - text.count("}")
        if found and not re.search(r"out_ptr", found[2]):
            named = [k for k, v in enumerate(loop_vars) if re.search(rf"\b{v}\b", found[2])]
            level = max([first, *named, *(level_of.get(t, last) for t in re.findall(r"\btmp\d+\b", found[2]))])
            level_of[found[1]] = level
            levels[level].append(text if level < last else line)
        else:
            levels[last].append(line)
            level_of.update(dict.fromkeys(re.findall(r"auto (tmp\d+)", line), last))
    return levels
