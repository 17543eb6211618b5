"""Triton code generation: one `@triton.jit` kernel and its launcher per scheduled group.

Mirrors `torch/_inductor/codegen/triton.py` (TritonOverrides, TritonKernel). Like
`CppKernel`, the kernel *is* an ops handler: running a buffer's body under it turns each
`ops.*` call into a line of Triton (`TritonOverrides` holds the expressions, `CSE` names
them). Where C++ walks one element at a time, a Triton program handles a *block*:

    @triton.jit
    def triton_per_fused_sum_0(in_ptr0, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
        xnumel = 8                                 <- prod(ranges), flattened into xindex
        xoffset = tl.program_id(0) * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
        xmask = xindex < xnumel
        i0 = xindex
        rnumel = 33                                <- prod(reduction_ranges): rindex
        rbase = tl.arange(0, RBLOCK)[None, :]
        rindex = rbase                             <- persistent: the whole row at once
        rmask = rindex < rnumel
        r0 = rindex
        tmp0 = tl.load(in_ptr0 + (33*i0 + r0), xmask & rmask, other=0)
        tmp1 = tl.where(xmask & rmask, tmp0, 0.0)
        tmp2 = tl.reduce(tmp1, 1, _sum_combine)[:, None]
        tl.store(out_ptr0 + (i0), tmp2, xmask)

    _launcher_triton_per_fused_sum_0 = Launcher(triton_per_fused_sum_0, (1,), (torch.float32, torch.float32),
                                                XBLOCK=8, RBLOCK=64, num_warps=2)

    def launch_triton_per_fused_sum_0(in_ptr0, out_ptr0):   <- the launcher: tensors, in
        _launcher_triton_per_fused_sum_0(in_ptr0, out_ptr0)     the order of kernel.args.call_names()

Kernels are named as Inductor names them (`Kernel.record`): `triton_per_` (a persistent
reduction), `triton_red_` (looped) or `triton_poi_` (pointwise), then `fused_` and the
kernel's ATen ops, then its number in the graph.

(`Launcher(...)(args)` is `triton_per_fused_sum_0[(1,)](args, XBLOCK=8, ...)` minus the JIT's
per-call dispatch after the first call; from the pointers' dtypes it can also compile
ahead, all of a graph's kernels at once: triton/runtime.py.)

Loop variables (`i0, i1...`, `r0...`) are recovered from the flat index with `//` and `%`;
runs of dimensions an index walks contiguously are merged first, so a contiguous access
prints as `xindex` rather than `8*i0 + i1`. Every value is a `CSEVariable` (common.py)
that carries its dtype (torch's `//`, `%`, max and bools differ from Triton's) and the
block dims it varies along (which masks a load needs, and when a pointer must be widened
to the mask's shape).

A fused group's body is a sequence of blocks, as in CppKernel: `outer` code once per row
block, and `loop` blocks over the reduction ranges. A reduction is *persistent* (RBLOCK =
next_power_of_2(rnumel), everything straight-line) when rnumel <= 4096, else *looped*
(`for roffset in range(...)` with block-shaped accumulators; a block that reads a finished
reduction starts a new loop, as Inductor does for softmax). A looped softmax's max and sum of
exp are one online reduction (triton/softmax.py, `_online_softmax`): one loop, not two. A pointwise group that reads or
writes memory transposed is *tiled* (triton_tiling.py, `tile_split`): its ranges are
cut in two, the second part taking the r dimension and the second grid axis. One whose
store is contiguous along another dim than the last (channels-last) walks its ranges in the
store's order instead, where that makes every access contiguous (`store_order`).

Symbolic sizes (ir/sizevars.py): a kernel is generic in its sizes, as Inductor's are. The
size symbols its code reads are int arguments after its pointers, then `xnumel`/`rnumel`
where they are symbolic; the launcher takes the symbols from the wrapper, computes the
numels and the grid at each call, and `@triton.jit(do_not_specialize=...)` keeps one
compiled variant for every size:

    @triton.jit(do_not_specialize=['s0', 's1', 'xnumel', 'rnumel'])
    def triton_red_fused_sum_0(in_ptr0, out_ptr0, s0, s1, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
        ...
        for roffset in range(0, rnumel, 64):   <- a row of unbounded length is always looped
            ...
            tmp0 = tl.load(in_ptr0 + (r0 + i0*s1), xmask & rmask, other=0)

    def launch_triton_red_fused_sum_0(in_ptr0, out_ptr0, s0, s1):
        xnumel = s0
        rnumel = s1
        _launcher_triton_red_fused_sum_0(in_ptr0, out_ptr0, s0, s1, xnumel, rnumel, grid=(cdiv(xnumel, 8),))

Correctness never rests on the traced sizes: a reduction is persistent only where RBLOCK
covers every size (the ShapeEnv's upper bound of rnumel, e.g. T <= max_seq), indices are
int64 unless every size provably stays below 2**31 (`index_extent`), and block sizes,
which any size is right with, come from the traced sizes (`size_hint`), as Inductor's do.
Groups with symbolic sizes are neither split, tiled nor mix-order (their flat kernel is
right for every size: lowering/reductions.py, triton_tiling.py, ext/mix_order/schedule.py).

Simplified: block sizes come from a small heuristic in codegen/policy.py (with
`max_autotune`, a few are timed); reductions that would run as too few programs are split
in two before codegen (`split_reductions`, lowering/reductions.py, by a simpler rule than
Inductor's), and mix-order ones read their input once (ext/mix_order/kernel.py); no block
pointers, no bounds assertions on indirect indices; size expressions are printed into the
kernel as they are (Inductor precomputes them in the launcher as `ks0, ks1...`).
"""
from __future__ import annotations

import functools
import math
import re

import sympy
import torch

from ..codegen.common import (
    CSE,
    LOW_PRECISION,
    CSEVariable,
    canonical_len,
    compute_dtype,
    innermost_strides,
    is_gather,
    simplified_index,
)
from ..ir.indexing import simplify_with_ranges
from ..ir.sizevars import is_static
from ..ops_handler import BINARY_OPS, UNARY_OPS
from ..virtualized import V
from .helpers import HELPERS
from .overrides import BOOL_RESULT, TRITON_TYPE, TritonOverrides, texpr, triton_literal
from .policy import PERSISTENT_REDUCTION_MAX, reduces_columns
from .program import TritonProgram
from .reduction import reduction


def is_size(expr) -> bool:
    """An integer, or an expression of the graph's size symbols alone (a coefficient that is
    the same for every element of a block)."""
    return expr.is_Integer or (bool(expr.free_symbols) and all(map(V.graph.sizevars.is_size_symbol, expr.free_symbols)))


def index_extent(numel) -> int:
    """How far a kernel's indices may reach, for its choice of int32 or int64 indexing: the
    number, or for a symbolic size not proved below 2**31, 2**31 (int64). Inductor guards
    on 32-bit indexing instead; a guard added while a backward graph is compiled lazily
    would never be checked, so we take the width that is right for every size."""
    if is_static(numel):
        return int(numel)
    sizevars = V.graph.sizevars
    return sizevars.size_hint(numel) if sizevars.statically_known_lt(numel, 2**31) else 2**31


class TritonKernel(TritonProgram):
    """Generates one Triton kernel and its launcher for a fused group: rows over `ranges`
    (flattened into xindex), and blocks over `reduction_ranges` (flattened into rindex):
    `outer` code runs once per block of rows (values shaped [XBLOCK, 1]); a `loop` block runs
    over the reduction ranges -- straight-line over the whole row when the reduction is
    persistent, a `for roffset` loop otherwise."""

    language, loop_kind = "triton", "loop"

    def __init__(self, name: str, ranges, reduction_ranges, config=None, removed_buffers=(), tiled=False,
                 order=None, r_order=None):
        super().__init__(name, ranges, reduction_ranges, config, removed_buffers, cse=CSE(line_template="{var} = {expr}"))
        self.tiled = tiled
        self.xnumel, self.rnumel = math.prod(self.ranges), math.prod(self.reduction_ranges)
        self.is_reduction = bool(self.reduction_ranges)
        # persistent needs RBLOCK >= rnumel for every size: a symbolic row is looped
        # unless the ShapeEnv bounds it (Inductor: statically_known_leq(rnumel, threshold))
        self.persistent = self.is_reduction and not tiled and self._fits_one_block(self.rnumel)
        self.mask_stack: list[tuple[str, frozenset]] = []   # conditions of the enclosing ops.masked, with their dims
        self.helpers: set[str] = set()
        self.spans: dict[str, tuple[str, int, int, bool]] = {}  # merged index variable → definition
        self.used_syms: set[sympy.Symbol] = set()
        self.max_numel = index_extent(self.xnumel * (self.rnumel if self.rnumel != 0 else 1))
        self.load_strides: list[tuple] = []  # (x stride, r stride) of each load: a block-shape hint
        self.gathers = 0                     # loads not vectorised along x (`is_gather`): another hint
        self.acc_count = 0
        self.online_softmax_done: dict[tuple, tuple] = {}   # (block, value) → (max, sum): computed once
        nontrivial = lambda vs, ns: [(v, n) for v, n in zip(vs, ns) if n != 1]  # noqa: E731
        order = order or range(len(self.ranges))   # xindex walks the ranges in this order (outermost first)
        self._x_dims = nontrivial([self.itervars[k] for k in order], [self.ranges[k] for k in order])
        r_order = r_order or range(len(self.reduction_ranges))   # rindex walks Q in this order
        self._r_dims = nontrivial([self.reduction_vars[k] for k in r_order], [self.reduction_ranges[k] for k in r_order])
        self._zero = {v: 0 for v, n in self.var_ranges.items() if n == 1}
        self._source = None

    @staticmethod
    def _fits_one_block(rnumel) -> bool:
        bound = rnumel if is_static(rnumel) else V.graph.sizevars.upper_bound(rnumel)
        return bound is not None and bound <= PERSISTENT_REDUCTION_MAX

    @staticmethod
    def _hint(numel, upper=False) -> int:
        """A size for the block-size heuristics: itself, or a symbolic one's traced value
        (heuristics only: masks and loops read the real size at run time) -- or, `upper`
        for a persistent row, whose RBLOCK must cover every size, its upper bound."""
        if is_static(numel):
            return int(numel)
        return V.graph.sizevars.upper_bound(numel) if upper else V.graph.sizevars.size_hint(numel)

    # ------------------------------------------------------------------ blocks
    def block_kind(self, node) -> str:
        looped = self.is_reduction and (node.is_reduction or canonical_len(node.ranges) > len(self.ranges))
        return "loop" if looped else "outer"

    def starts_new_block(self, kind, reads) -> bool:
        # a node reading a reduction that finishes after this loop needs a loop of its own
        return self.block.kind != kind or (kind == "loop" and bool(reads & self.block.reduced))

    def scoped(self, kind) -> bool:   # names made in a loop die with it
        return kind == "loop" and self.is_reduction and not self.persistent

    def name_prefix(self) -> str:
        return "triton_" + ("red" if self.is_reduction and not self.persistent and not self.tiled
                            else "per" if self.persistent else "poi")

    def _looped(self) -> bool:
        return self.is_reduction and not self.persistent and self._current().kind == "loop"

    # ------------------------------------------------------------------ values
    def _gen(self, expr: str, dtype, dims, buffer=None) -> CSEVariable:
        self._note_helpers(expr)
        return self.cse.generate(self.compute if buffer is None else buffer, expr, dtype, dims)

    def _note_helpers(self, expr: str):
        self.helpers.update(h for h in HELPERS if re.search(rf"\b{h}\b", expr))

    def _info(self, x):
        """(text, dtype, block dims) of an op argument: a CSE variable or a Python scalar."""
        if isinstance(x, CSEVariable):
            return str(x), x.dtype, x.dims
        if isinstance(x, bool):
            return triton_literal(x), torch.bool, frozenset()
        if isinstance(x, int):
            return str(x), None, frozenset()
        if isinstance(x, float):
            return triton_literal(x), None, frozenset()
        if isinstance(x, sympy.Expr):
            return (*self.index(x)[:1], torch.int64, self.index(x)[1])
        raise TypeError(f"not a kernel value: {x!r}")

    def _shape(self, dims) -> str:
        if not self.is_reduction:
            return "[XBLOCK]"
        return {frozenset("x"): "[XBLOCK, 1]", frozenset("r"): "[1, RBLOCK]"}.get(frozenset(dims), "[XBLOCK, RBLOCK]")

    # ------------------------------------------------------------------ the ops handler
    def __getattr__(self, name):
        if name in UNARY_OPS or name in BINARY_OPS:
            return lambda *args: self._pointwise(name, args)
        raise AttributeError(name)

    def _pointwise(self, name, args):
        infos = [self._info(a) for a in args]
        dtypes = [d for _, d, _ in infos if d is not None]
        dtype = functools.reduce(torch.promote_types, dtypes) if dtypes else torch.float32
        expr = getattr(TritonOverrides, name)(*[t for t, _, _ in infos], dtype=dtype)
        dims = frozenset().union(*[d for _, _, d in infos])
        return self._gen(expr, torch.bool if name in BOOL_RESULT else dtype, dims)

    def constant(self, value, dtype):
        cdtype = compute_dtype(dtype)
        return self._gen(f"tl.full([], {triton_literal(value, dtype)}, {TRITON_TYPE[cdtype]})", cdtype, ())

    def index_expr(self, expr, dtype):
        text, dims = self.index(expr)
        cdtype = compute_dtype(dtype)
        if not sympy.sympify(expr).free_symbols - set(self._zero):
            return self._gen(f"tl.full([], {text}, {TRITON_TYPE[cdtype]})", cdtype, ())
        return self._gen(f"({text}).to({TRITON_TYPE[cdtype]})", cdtype, dims)

    def to_dtype(self, x, dtype):
        text, src, dims = self._info(x)
        if src is None:  # a Python number
            return self.constant(x, dtype)
        if dtype == torch.bool:
            return x if src == torch.bool else self._gen(f"{text} != 0", torch.bool, dims)
        if dtype in LOW_PRECISION:  # round as eager would, keep computing in float32
            # integers reach float16/bfloat16 through float32 (exact below 2**24): a direct
            # int -> bfloat16 keeps the bits under Triton's interpreter and on the H100 (Triton 3.6)
            if not src.is_floating_point:
                text = f"{text}.to(tl.float32)"
            return self._gen(f"{self._narrow(text, dtype)}.to(tl.float32)", torch.float32, dims)
        if src == dtype:
            return x
        return self._gen(f"{text}.to({TRITON_TYPE[dtype]})", dtype, dims)

    def _narrow(self, text, dtype) -> str:
        """`text` (float32) as `dtype`: `.to(tl.bfloat16)`, except under Triton's interpreter (a
        CPU graph), whose float32 -> bfloat16 truncates: rounded to nearest even there by hand
        (`_bf16_rtne`), so the CPU's Triton kernels round as the GPU's and eager's do."""
        if dtype == torch.bfloat16 and V.graph.current_device().type == "cpu":
            return f"_bf16_rtne({text})"
        return f"{text}.to({TRITON_TYPE[dtype]})"

    def where(self, cond, a, b):
        (c, _, cd), (x, xt, xd), (y, yt, yd) = self._info(cond), self._info(a), self._info(b)
        dtype = torch.promote_types(xt, yt) if xt is not None and yt is not None else (xt or yt)
        return self._gen(f"tl.where({c}, {x}, {y})", dtype, cd | xd | yd)

    def indirect_indexing(self, x, size):
        text, dtype, dims = self._info(x)
        var = self._gen(f"tl.where({text} < 0, {text} + {self._size(size)}, {text})", dtype, dims)
        return sympy.Symbol(var.name, integer=True, nonnegative=True)

    def masked(self, mask, body, other):
        """`mask ? body() : other`: loads inside the body get `mask` added to theirs (they
        may point out of bounds where it is false), then one tl.where picks the result."""
        mask_text, _, mask_dims = self._info(mask)
        self.mask_stack.append((mask_text, mask_dims))
        try:
            with self.masked_scope():
                result = body()
        finally:
            self.mask_stack.pop()
        text, dtype, dims = self._info(result)
        return self._gen(f"tl.where({mask_text}, {text}, {triton_literal(other, dtype)})", dtype, dims | mask_dims)

    # ------------------------------------------------------------------ indexing
    def index(self, expr) -> tuple[str, frozenset]:
        """A SymPy index → (its Triton text, the block dims it varies along)."""
        expr = self.store_key(expr)
        dims = set()
        for sym in expr.free_symbols:
            if sym in self.var_ranges:
                dims.add("x" if sym in self.itervars else "r")
            elif (var := self.cse.varname_map.get(sym.name)) is not None:  # an indirect index
                dims |= var.dims
        expr = self._merge_dims(expr, self._x_dims, "xindex", "i")
        expr = self._merge_dims(expr, self._r_dims, "rindex", "r")
        self.used_syms |= expr.free_symbols
        self.args.note_sizes(expr)   # size symbols in an index become kernel arguments
        return texpr(expr), frozenset(dims)

    def store_key(self, expr) -> sympy.Expr:
        """The index simplified, size-1 variables set to 0: what index() makes its text from."""
        expr = sympy.sympify(expr)
        if self._zero and expr.free_symbols & set(self._zero):
            expr = expr.subs(self._zero)
        return simplify_with_ranges(expr, self.var_ranges)

    def _merge_dims(self, expr, dims, flat, prefix):
        """Rewrite runs of loop variables that `expr` walks contiguously as one variable:
        with ranges (4, 8, 16), `128*i0 + 16*i1 + i2` → `xindex`; `i0 + 4*i2` stays.
        Only the affine part merges; a variable inside FloorDiv etc. stays itself."""
        if len(dims) < 2:
            return expr
        variables = [v for v, _ in dims]
        expr = sympy.expand(expr)
        coeffs, pinned = {}, set()
        for term in sympy.Add.make_args(expr):
            found = term.free_symbols & set(variables)
            coeff, rest = term.as_independent(*variables, as_Add=False)
            if found and rest in variables and is_size(coeff):
                coeffs[rest] = coeffs.get(rest, 0) + coeff
            else:
                pinned |= found
        runs, run = [], []
        for k, (v, n) in enumerate(dims):
            mergeable = coeffs.get(v, 0) != 0 and v not in pinned
            if run and mergeable and sympy.expand(coeffs[dims[k - 1][0]] - coeffs[v] * n) == 0:
                run.append(k)
            else:
                runs.append(run)
                run = [k] if mergeable else []
        runs = [r for r in runs + [run] if len(r) > 1]
        for run in runs:
            first, last = run[0], run[-1]
            stride = math.prod(n for _, n in dims[last + 1:])
            size = math.prod(n for _, n in dims[first:last + 1])
            whole = first == 0 and last == len(dims) - 1
            name = flat if whole else f"{prefix}{dims[first][0].name[1:]}_{dims[last][0].name[1:]}"
            if not whole:
                self.spans[name] = (flat, stride, size, first == 0)
            sym = sympy.Symbol(name, integer=True, nonnegative=True)
            # (expanded: a symbolic coefficient, `(A + 1)*(B + 1)*i0`, must cancel the terms it came from)
            expr = sympy.expand(expr - sum((coeffs[dims[k][0]] * dims[k][0] for k in run), sympy.Integer(0))) \
                + coeffs[dims[last][0]] * sym
        return expr

    def _pointer(self, ptr, index, need_dims):
        """`ptr + (index)`, widened to the block shape of `need_dims` when the index does
        not vary along all of them (a mask needs a pointer block of its own shape)."""
        text, dims = self.index(index)
        if need_dims - dims:
            itype = "tl.int64" if self._use_int64() else "tl.int32"
            return f"{ptr} + ({text} + tl.full({self._shape(dims | need_dims)}, 0, {itype}))"
        return f"{ptr} + ({text})"

    def _use_int64(self) -> bool:
        return self.max_numel >= 2**31

    def _note_buffer(self, name, index, load=False):
        try:
            self.max_numel = max(self.max_numel, index_extent(V.graph.get_buffer(name).layout.storage_numel()))
        except Exception:  # a buffer without a layout is never loaded directly
            pass
        expr = simplified_index(sympy.sympify(index).subs(self._zero), self.var_ranges)
        x_last = self._x_dims[-1][0] if self._x_dims else None
        self.load_strides.append(innermost_strides(expr, None, x_last, self._r_dims[-1][0] if self._r_dims else None))
        if load and not self.is_reduction:   # (a block-size hint for pointwise kernels only)
            self.gathers += is_gather(expr, x_last)

    @staticmethod
    def _mask_text(dims) -> str:
        return " & ".join(m for d, m in (("x", "xmask"), ("r", "rmask")) if d in dims)

    # ------------------------------------------------------------------ memory
    def load(self, name, index):
        if (stored := self._stored(name, self.index(index)[0])) is not None:
            return stored
        if name in self._current().reduced and self._looped():
            raise NotImplementedError(f"{name} is read inside the loop that reduces it: "
                                      "use codegen_node, which starts a new loop")
        block = self._current()
        if name in self.args.output_buffers and "tl.debug_barrier()" not in block.prefix.lines:
            # written by this program in an earlier block, by other threads: wait for them
            block.prefix.writeline("tl.debug_barrier()")
        self._note_buffer(name, index, load=True)
        dtype = V.graph.get_dtype(name)
        _, dims = self.index(index)
        masks, mask_dims = [self._mask_text(dims)] if dims & {"x", "r"} else [], set(dims)
        for m, m_dims in self.mask_stack:
            masks.append(m)
            mask_dims |= m_dims
        pointer = self._pointer(self.args.input(name), index, frozenset(mask_dims))
        mask = f", {' & '.join(masks)}, other=0" if masks else ""
        cast = ".to(tl.float32)" if dtype in LOW_PRECISION else ""
        return self._gen(f"tl.load({pointer}{mask}){cast}", compute_dtype(dtype), mask_dims)

    def _store_line(self, name, index, value, mask_dims):
        self._note_buffer(name, index)
        dtype = V.graph.get_dtype(name)
        text, vdtype, _ = self._info(value)
        if dtype in LOW_PRECISION and vdtype == torch.float32:
            text = self._narrow(text, dtype)
        elif dtype in LOW_PRECISION or (vdtype is not None and compute_dtype(dtype) != vdtype):
            text = f"{text}.to({TRITON_TYPE[dtype]})"
        self._note_helpers(text)
        mask_dims = frozenset(mask_dims | self.index(index)[1])
        masks = self._mask_text(mask_dims)
        pointer = self._pointer(self.args.output(name), index, mask_dims)
        return f"tl.store({pointer}, {text}{', ' + masks if masks else ''})"

    def store(self, name, index, value):
        self._note_store(name, self.index(index)[0], value,
                         lambda: self._store_line(name, index, value, frozenset("x")))

    def store_reduction(self, name, index, value):   # the result outlives the loop
        if self._looped():   # it finishes after the loop
            self._current().reduced.add(name)
        self._note_store(name, self.index(index)[0], value, lambda: self._store_line(name, index, value, frozenset("x")),
                         self._current().suffix if self._looped() else None, outlives_block=True)

    # ------------------------------------------------------------------ reductions
    def reduction(self, dtype, src_dtype, reduction_type, value):
        return reduction(self, dtype, src_dtype, reduction_type, value)   # (reduction.py)

    def _new_acc(self) -> str:
        self.acc_count += 1
        return f"_acc{self.acc_count - 1}"

    # ------------------------------------------------------------------ block sizes
    def is_outer_reduction(self) -> bool:
        """Summing columns? (codegen/policy.py, `reduces_columns`)"""
        return reduces_columns(self.load_strides)
