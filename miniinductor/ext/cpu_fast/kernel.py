"""Extension `cpu_fast`'s C++ kernel: CppFastKernel, the core's CppKernel (codegen/cpp.py)
with the fast forms of its loops. It writes the same body, node by node, and then other
loop nests around it:

* a pointwise kernel's loops in the store's memory order, and 16 x 16 tiles for a transpose
  (loops.py plans them, tiles.py writes them), over merged dims where every access walks
  them as one (`regenerate`); values that do not vary in an inner loop are moved out of it
  (loops.hoist_invariant);
* explicit vectors (Inductor's `at::vec`) in pointwise float32 kernels whose loops are not
  tiled (a reordered nest, channels-last, takes vectors along its new innermost loop): a
  twin kernel on vectors follows every node (vec.py); each kernel's source says whether it
  has them, or why not;
* a reduction over a row of 64 or more elements folds into 32 lane accumulators
  (reduction.codegen_lane_loops): independent chains of vector adds where one accumulator
  waits on each add's latency, as Inductor's vectorised reductions keep several
  accumulators; a column reduction (x.sum(0): loads contiguous along i0, strided along r0)
  turns the nest inside out, as Inductor's outer reductions do: tiles of columns, each with
  an array of accumulators, the r loops outside and the tile's columns inside
  (`reduces_columns`, reduction.codegen_column_tile);
* a variance is one Welford reduction (lowering/reductions.var, `_welford`, where the policy
  this extension patches asks for it): each lane keeps a mean and m2, the lanes of a row take
  one element each per step and so share one count and one reciprocal (`mi_welford_step`: a
  division per step of 32, not per element; Inductor keeps a table of reciprocals), and are
  folded by halves with Chan's combine after the loop; a column tile's columns share the
  count likewise. Without lanes (a short row where forced: the policy keeps two vectorized
  sums there) the Welford loop is scalar;
* softmax's online reduction (triton/softmax.py, `mi_online_softmax_combine`) is generated
  where the policy asks for it, but the C++ policy does not (a scalar loop with two exps per
  element measured several times slower than the two vectorized passes over a row in cache).

Measured with -fopt-info-vec, g++ vectorizes every loop of the softmax, layer norm,
cross-entropy and row-max kernels, and a transposing copy through the 16 x 16 tiles.
Mirrors `torch/_inductor/codegen/cpp.py` (CppKernelProxy choosing among CppKernel,
CppVecKernel and CppTile2DKernel; outer reductions). Simplified: no tiling of row
reductions, no cascade (blocked) sums; argmax/argmin stay in the row form.
"""
from __future__ import annotations

import math

import torch

from ...codegen.common import CSEVariable, affine_strides, innermost_strides
from ...codegen.cpp import COMPUTE_TYPE, CppKernel, reduction_init
from ...ir.indexing import FloorDiv, ModularIndexing
from ...ir.sizevars import is_static
from ...ops_handler import MULTI_OUTPUT_REDUCTIONS
from ...runtime.cpp_builder import vector_lanes
from ...virtualized import V
from . import reduction, tiles
from .loops import Loop, loop_plan, merged_dims
from .vec import with_vector_twin


class CppFastKernel(CppKernel):
    """CppKernel with reordered, tiled and hoisted pointwise loops, explicit vectors, lane and
    column-tiled reductions, Welford and online-softmax reductions (see the module docstring).
    While the body is generated it notes what the loop plans read: each access's strides."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reduction_loads: list[tuple] = []               # (x stride, r stride) of each load
        self.multi_output_done: dict[tuple, tuple] = {}      # (block, type, value) → its outputs: computed once
        self.access_strides = {"load": [], "store": []}      # a pointwise kernel's, for its loop order (loops.py)
        self.plain_loads: list[tuple] = []                   # (buffer, index, strides): may be read tile by tile
        self.masked_depth = 0                                # inside an ops.masked body (its loads may be out of bounds)
        self.vec = None   # the body on explicit vectors: a CppVecKernel (vec.py, with_vector_twin)
        self.vec_reason: str | None = "not made with_vector_twin"   # or why there is none
        self.vec_along = None   # where it may have one: var → (twin, why not), for a reordered nest
        self.nodes_seen: list = []   # (a reordered nest's twin follows them again: vector_twin_along)
        self.unmerged = None   # (groups of the group's dims, their sizes): loops merged (fast_kernel)
        self.reduction_strides: list = []   # each access's strides along the reduction loops
        self.runmerged = None  # the same for the reduction's dims

    def codegen_node(self, node):
        super().codegen_node(node)
        self.nodes_seen.append(node)
        if self.vec is not None and (reason := self.vec.mirror(node)):   # the twin cannot follow
            self.vec, self.vec_reason = None, reason

    # ------------------------------------------------------------------ what the loop plans read
    def load(self, name, index):
        if self._stored(name, self.index(index)) is None:
            self._note_load(name, index)
        return super().load(name, index)

    def _note_load(self, name, index):
        """A load from memory: its (x, r) strides in a row's loop (`reduces_columns`), its
        strides along the loops (`pointwise_plan`), and whether a tile may copy it."""
        if self._current().kind == "loop" and self.itervars and self.reduction_vars:
            self.reduction_loads.append(innermost_strides(index, self.var_ranges, self.itervars[-1],
                                                          self.reduction_vars[-1]))
        self._note_strides("load", index)
        self.args.input(name)   # (an input written in place becomes an output here)
        if not self.masked_depth and V.graph.get_dtype(name) != torch.bool and name not in self.args.output_buffers:
            self.plain_loads.append((name, index, self.access_strides["load"][-1] if not self.reduction_ranges else None))

    def store(self, name, index, value):
        self._note_strides("store", index)
        super().store(name, index, value)

    def _note_strides(self, kind, index):
        if not self.reduction_ranges:
            self.access_strides[kind].append(affine_strides(index, self.itervars, self.var_ranges))
        else:   # (affine in every loop variable; the reduction's strides kept)
            strides = affine_strides(index, [*self.itervars, *self.reduction_vars], self.var_ranges)
            self.reduction_strides.append(strides and {r: strides[r] for r in self.reduction_vars})

    def masked(self, mask, body, other):
        def counted():
            self.masked_depth += 1   # (its loads are not copied tile by tile: they may fall outside)
            try:
                return body()
            finally:
                self.masked_depth -= 1
        return super().masked(mask, counted, other)

    # ------------------------------------------------------------------ one-pass reductions
    def reduction(self, dtype, src_dtype, reduction_type, value):
        if reduction_type not in MULTI_OUTPUT_REDUCTIONS:
            return super().reduction(dtype, src_dtype, reduction_type, value)
        key = (id(self.block), reduction_type, str(value))
        if key not in self.multi_output_done:   # else the other buffer of one this loop computes already
            one_pass = self._online_softmax if reduction_type == "online_softmax_reduce" else self._welford
            self.multi_output_done[key] = one_pass(self.block, self._next_accumulator(), COMPUTE_TYPE[dtype], value)
        return self.multi_output_done[key]

    def _online_softmax(self, block, acc, ctype, value):
        """(row max, sum of exp(x - max)) in one pass over the row (triton/softmax.py), once
        per loop for the two buffers that store it. No OpenMP clause folds the pair: the loop
        runs on one thread, without `omp simd`."""
        self._declare(block, ctype, f"{acc}_max", reduction_init("max", ctype))
        self._declare(block, ctype, f"{acc}_sum", "0")
        self.compute.writeline(f"mi_online_softmax_combine({acc}_max, {acc}_sum, {value});")
        block.omp_reductions.append((None, acc))
        return CSEVariable(f"{acc}_max"), CSEVariable(f"{acc}_sum")

    def _welford(self, block, acc, ctype, value):
        """(mean, m2) in one pass over the row (lowering/reductions.var; Inductor's
        `welford_reduce`), once per loop for the two buffers that store it. Per element
        `mi_welford_update(mean, m2, x, 1/n)`; the count n and its reciprocal `{acc}_rweight` come
        from the loop around the body (reduction.welford_steps): the LANES lanes of a row
        (reduction.codegen_lane_loops) or a tile's columns each take one element per step, so they
        share one count and one division, and the update vectorizes. No OpenMP clause folds the
        state: the lanes are folded by Chan's combine (`mi_welford_fold_lanes`); without lanes the
        loop is scalar."""
        self._declare(block, ctype, f"{acc}_mean", "0")
        self._declare(block, ctype, f"{acc}_m2", "0")
        block.prefix.writeline(f"int64_t {acc}_weight = 0;")
        self.compute.writeline(f"mi_welford_update({acc}_mean, {acc}_m2, {value}, {acc}_rweight);")
        block.omp_reductions.append(("welford", acc))
        return CSEVariable(f"{acc}_mean"), CSEVariable(f"{acc}_m2")

    def _inner_pragmas(self, block, k) -> list[str]:
        if any(op == "welford" for op, _ in block.omp_reductions):   # no OpenMP clause folds its state
            return []
        return super()._inner_pragmas(block, k)

    # ------------------------------------------------------------------ the loop plans
    def reduces_columns(self) -> bool:
        """Loop over the reduction outside the innermost output loop (Inductor's C++ "outer
        reduction"), in tiles of COLUMN_TILE or WIDE_COLUMN_TILE columns? Yes for one reduction block followed by
        `outer` blocks only, foldable reductions (not argmax/argmin), and a load that walks
        memory in order along the innermost output index but strides along the reduction (a
        column sum). A row load beside it (x.sum(0) fused with x.amax(1)) still reuses each
        cache line over the next reduction steps. Each output folds its values in order, as
        before; only the loops around them move."""
        if not any(x == 1 and r not in (0, 1) for x, r in self.reduction_loads):
            return False
        block, *rest = self.blocks
        return (block.kind == "loop" and not block.has_argreduction and all(b.kind == "outer" for b in rest)
                and all(op for op, _ in block.omp_reductions))

    def node_indices(self, node):
        """With merged loops, each of the group's dims is recovered from its merged loop
        (`FloorDiv`, `ModularIndexing`: the indices then simplify back to one term in it)."""
        if self.unmerged is None and self.runmerged is None:
            return super().node_indices(node)
        index = _unmerge(self.itervars, self.unmerged) if self.unmerged else self.itervars
        rindex = self.reduction_vars
        if self.runmerged:   # the reduction's dims, merged in the loops' (memory) order, put back in theirs
            rgroups, sizes, perm = self.runmerged
            rindex = [None] * len(perm)
            for k, dim in zip(perm, _unmerge(self.reduction_vars, (rgroups, sizes))):
                rindex[k] = dim
        return node.index_for(index, rindex)

    def is_pointwise(self) -> bool:
        """No reduction: every block runs once per outer iteration (its loops may be reordered)."""
        return not self.reduction_ranges and all(b.kind == "outer" for b in self.blocks)

    def pointwise_plan(self):
        """A pointwise kernel's loop plan (loops.loop_plan), or None."""
        if not self.is_pointwise():
            return None
        return loop_plan(self.itervars, self.ranges, **{f"{k}s": v for k, v in self.access_strides.items()})

    def dims_to_merge(self) -> list[list[int]] | None:
        """After codegen: the runs of loops to merge (loops.merged_dims) where this
        pointwise kernel transposes (a load contiguous along another dim than its first store)
        and its dims merge, else None (`regenerate` keeps the merged kernel if it tiles). Merged,
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

    def dims_to_widen(self) -> tuple | None:
        """After codegen: the runs of loops to merge where the innermost loop (of a pointwise
        kernel, or of a reduction) is short and not a whole number of vectors, and merging
        lengthens it: W = 28 of an NCHW conv output ran 16 floats in a vector and 12 in the
        scalar tail per row, H*W = 784 runs 49 vectors; an instance norm over 6x6x6 reduced
        rows of 6. A reduction's dims are also taken in memory order (a channels-last sum over
        C, H and W walked C, its stride-1 dim, outermost), but for an argmax or argmin, whose
        answer among equal values is the first. (pointwise groups, (reduction runs, their
        order)), or None."""
        if self.unmerged is not None or self.runmerged is not None:
            return None
        if self.is_pointwise():
            loads, stores = self.access_strides["load"], self.access_strides["store"]
            if not stores or not _short(self.ranges):
                return None
            groups = merged_dims(self.itervars, self.ranges, loads + stores)
            return (groups, None) if groups and len(groups[-1]) > 1 else None
        strides = self.reduction_strides   # (none: a reduction of a constant, div's gradient of a rounding)
        if not self.reduction_ranges or not strides or not all(strides) or self.reduces_columns():
            return None
        perm = _memory_order(self.reduction_strides, self.reduction_vars)
        if any(b.has_argreduction for b in self.blocks):   # (the first of equal values: order matters)
            perm = list(range(len(self.reduction_ranges)))
        ranges = [self.reduction_ranges[p] for p in perm]
        rvars = [self.reduction_vars[p] for p in perm]
        if not all(map(is_static, ranges)):
            return None
        rgroups = merged_dims(rvars, ranges, self.reduction_strides) if _short(ranges) else None
        if perm == sorted(perm) and not (rgroups and len(rgroups[-1]) > 1):
            return None
        return None, (rgroups or [[k] for k in range(len(perm))], perm)

    def regenerate(self, group, ctx, generate):
        """The kernel to keep, once generated (compile_fx.generate_kernel asks): one that tiles
        a transpose is generated again by `generate` over merged loops where its accesses allow
        (`dims_to_merge`), and the merged one kept if it still tiles; one with a short innermost
        loop, or a reduction out of memory order, is generated again with its loops merged or
        reordered (`dims_to_widen`); else this one."""
        merged = None
        if groups := self.dims_to_merge():
            merged = generate(fast_kernel(group, ctx.config, groups))
            if (plan := merged.pointwise_plan()) is not None and plan.tile is not None:
                return merged
        if widen := self.dims_to_widen():
            same = merged is not None and widen[1] is None and merged.unmerged[0] == widen[0]
            return merged if same else generate(fast_kernel(group, ctx.config, *widen))
        return self

    # ------------------------------------------------------------------ the loop nest
    def codegen_loops(self, code):
        """The loop nest and its blocks (a combo kernel runs several in one function). A
        pointwise kernel's loops may be reordered or tiled (loops.loop_plan)."""
        columns = self.reduces_columns()
        only_outer = all(b.kind == "outer" for b in self.blocks)
        plan = self.pointwise_plan()
        # (the generated comments still name these modules as codegen/cpp_loops.py and cpp_vec.py)
        if plan and plan.tile:
            self.vec, self.vec_reason = None, "its loops are tiled (cpp_loops.py)"
        elif plan and self.vec_along:   # reordered: vectors along the new innermost loop
            self.vec, self.vec_reason = self.vec_along(plan.loops[-1].var)
        loops = plan.outer() if plan else [Loop(str(var), "0", self.size(size), 1, self.hint(size))
                                           for var, size in zip(self.itervars, self.ranges)]
        x, n = self.itervars[-1] if self.itervars else None, self.ranges[-1] if self.ranges else None
        if self.vec:
            x, n = self.vec.x, self.vec.n
        if columns:   # the innermost output loop walks tiles of columns
            wide = self.hint(n) >= reduction.WIDE_COLUMN_TILE * torch.get_num_threads()
            self.column_tile = reduction.WIDE_COLUMN_TILE if wide else reduction.COLUMN_TILE
            loops[-1] = Loop(f"{x}_tile", "0", self.size(n), self.column_tile, -(-self.hint(n) // self.column_tile))
        if self.vec:   # ... or vectors (and a tail), which the threads share only if it is the only loop
            loops[-1] = Loop(str(x), "0", self.size(n), self.vec.lanes, -(-self.hint(n) // self.vec.lanes))
        code.writeline(f"// explicit vectors (cpp_vec.py): {'no, ' + self.vec_reason if self.vec_reason else 'yes'}")
        pragma, depth = self._parallel_pragma([loop.trips for loop in (loops[:-1] if self.vec and len(loops) > 1 else loops)])
        prologue, tile_loops = tiles.tile_loads(self, plan) if plan and plan.tile else ([], [])   # (the blocks then read the tiles)
        # (the twin writes the innermost loops; tiles.codegen_tile the two inside a tile)
        written = loops[:-1] if self.vec else loops
        levels = tiles.hoisted(self, written, depth) if only_outer and not (columns or tile_loops) else None
        for k, loop in enumerate(written):
            if k == 0 and pragma:
                code.writeline(pragma)
            elif k == len(loops) - 1 and only_outer and k >= depth and not tile_loops:
                code.writeline("#pragma omp simd")
            code.writeline(f"for (int64_t {loop.var} = {loop.start}; {loop.var} < {loop.end}; {loop.var} += {loop.step}) {{")
            code._indent += 1
            if levels and k < len(levels) - 1:
                code.writelines(levels[k])
        self._codegen_innermost(code, columns, pragma if len(loops) == 1 else "", levels, prologue, tile_loops, only_outer)
        for _ in written:
            code._indent -= 1
            code.writeline("}")

    def _codegen_innermost(self, code, columns, pragma, levels, prologue, tile_loops, only_outer):
        """Inside the loops written: a tile of columns, the twin's vector loop and its tail,
        the two loops of a tile, the hoisted body's innermost lines, or the blocks."""
        if columns:
            reduction.codegen_column_tile(self, code)
        elif self.vec:
            self.vec.codegen_innermost(code, pragma, levels[-1] if levels else None)
        elif tile_loops:
            tiles.codegen_tile(self, code, prologue, tile_loops, simd=only_outer)
        elif levels:
            code.writelines(levels[-1])
        else:
            for block in self.blocks:
                reduction.codegen_block(self, code, block)


def fast_kernel(group, config, groups=None, rgroups=None) -> CppFastKernel:
    """The C++ kernel of `group` (extension cpu_fast's kernel kind); with `groups`, its loops
    run over those merged runs of its dims (dims walked as one, loops.merged_dims), with
    `rgroups` = (runs, order) its reduction's loops over runs of its reduction dims taken in
    that order (memory order); the nodes' indices recovered from them."""
    if groups is None and rgroups is None:
        return with_vector_twin(CppFastKernel(group.kernel_name, group.R, group.Q, config))
    rq = [group.Q[k] for k in rgroups[1]] if rgroups else group.Q
    kernel = CppFastKernel(group.kernel_name, _merged(group.R, groups), _merged(rq, rgroups and rgroups[0]), config)
    kernel.unmerged = (groups, [int(n) for n in group.R]) if groups else None
    kernel.runmerged = (rgroups[0], [int(n) for n in rq], rgroups[1]) if rgroups else None
    return with_vector_twin(kernel)


def _memory_order(strides: list[dict], rvars) -> list[int]:
    """The reduction dims from the largest stride to the smallest (each dim's largest over the
    accesses; ties keep their order): walked so, the innermost loop reads memory in a run."""
    largest = [max(abs(s[v]) for s in strides) for v in rvars]
    return sorted(range(len(rvars)), key=lambda k: -largest[k])


def _merged(ranges, groups) -> list:
    """The loops' sizes, each run of `groups` (static sizes) as one."""
    return list(ranges) if not groups else [math.prod(int(ranges[k]) for k in g) for g in groups]


def _short(ranges) -> bool:
    """Is the innermost loop static and not a whole number of vectors?"""
    return bool(ranges) and is_static(ranges[-1]) and int(ranges[-1]) % vector_lanes() != 0


def _unmerge(variables, unmerged) -> list:
    """Each original dim's index, from the merged loops' variables."""
    groups, sizes = unmerged
    dims = []
    for var, group in zip(variables, groups):
        inner, digits = 1, []
        for k in reversed(group):
            digits.append(FloorDiv(var, inner) if k == group[0] else ModularIndexing(var, inner, sizes[k]))
            inner *= sizes[k]
        dims += reversed(digits)
    return dims
