"""C++/OpenMP code generation: one `extern "C"` function per scheduled group of buffers.

Mirrors `torch/_inductor/codegen/cpp.py` (CppOverrides, CppKernel). The kernel is an ops
handler: running a buffer's body under it turns every `ops.*` call into a C++ statement
(`CppOverrides` holds the expression of each op, `CSE` names the results). The loops
around the body come from the buffer's ranges:

    #pragma omp parallel for            <- outer (non-reduction) loops, when big enough
    for (int64_t i0 = 0; i0 < 64; i0 += 1) {
        float acc0 = 0;                  <- reduction prefix
        #pragma omp simd reduction(+:acc0)
        for (int64_t r0 = 0; r0 < 128; r0 += 1) {
            auto tmp0 = in_ptr0[r0 + 128*i0];     <- loads and compute
            acc0 = acc0 + tmp0;
        }
        out_ptr0[i0] = acc0;             <- stores
    }

A column reduction (x.sum(0): loads contiguous along i0, strided along r0) turns the nest
inside out, as Inductor's outer reductions do: tiles of columns, each with an array of
accumulators, the r loops outside and the tile's columns inside (`reduces_columns`).

With symbolic sizes (ir/sizevars.py) the loop bounds and indices print the size symbols,
which the function takes after its pointers (`const int64_t s0`), and whether the loops
run on several threads is an OpenMP `if(s0*64 >= ...)` clause, decided at run time.

Simplified: explicit vectors (Inductor's `at::vec`) only in pointwise float32 kernels whose
loops are not tiled (a reordered nest, channels-last, takes vectors along its new innermost
loop; codegen/cpp_vec.py: each kernel's source says whether, or why not), and the AVX-512
16 x 16 transpose of cpp_prelude.h (cpp_loops.py); elsewhere we write
simd-friendly scalar loops and let the compiler vectorize with -O3 -march=native (`omp simd`;
float exp through the prelude's `mi_expf`, inlined, which has no slow path for the -inf of a
mask; erf, tanh... through glibc's libmvec, runtime/cpp_builder.py), in 512-bit vectors where ATen's kernels use AVX-512
(`vector_width_flags`). Measured with -fopt-info-vec, g++ vectorizes every loop of the
softmax, layer norm, cross-entropy and row-max kernels (a transposing copy: through 16 x 16
tiles, codegen/cpp_loops.py, which also orders a pointwise kernel's loops by its store's
strides); what was slow
was a loop it vectorized badly (a bool `||` reduction: the NaN flag of max/min, now an int
`|`) or not at all (a loop that loads `bool`: an attention mask is read through its byte,
`!= 0`). float16/bfloat16 are loaded as float.
A reduction over a row of 64 or more elements folds into 32 lane accumulators
(`_codegen_lane_loops`): independent chains of vector adds where one accumulator waits on
each add's latency (the layer norm kernel's compute on a cached row: 30 -> 19 us per 64 rows
of 1024 on a 2-core EPYC), as Inductor's vectorised reductions keep several accumulators.
A variance is one Welford reduction (lowering/reductions.var, `_welford`): each lane keeps a
mean and m2, the lanes of a row take one element each per step and so share one count and one
reciprocal (`mi_welford_step`: a division per step of 32, not per element; Inductor keeps a
table of reciprocals), and are folded by halves with Chan's combine after the loop; a column
tile's columns share the count likewise. Without lanes (a short row where forced: the policy
keeps two vectorized sums there) the Welford loop is scalar. No tiling of row reductions, no
cascade (blocked) sums; argmax/argmin stay in the row form. Softmax is the max, then one pass
for exp and its sum, then the multiplication by the sum's reciprocal (`truediv`): the online
reduction (lowering/softmax.py, `mi_online_softmax_combine`) is generated where the policy
asks for it, but the C++ policy does not (a scalar loop with two exps per element measured 6x
slower than the two vectorized passes over a row in cache).
"""
from __future__ import annotations

import math

import sympy
import torch

from ..ir.indexing import FloorDiv, ModularIndexing, cexpr, simplify_with_ranges
from ..ir.sizevars import is_static
from ..ops_handler import BINARY_OPS, UNARY_OPS
from ..virtualized import V
from .common import CSEVariable, IndentedBuffer, Kernel, affine_strides, canonical_len, compute_dtype, innermost_strides
from .cpp_loops import Loop
from .cpp_reduction import COLUMN_TILE, WIDE_COLUMN_TILE, CppReductionLoops
from .cpp_tiles import CppTiledLoops

DTYPE_TO_CPP = {
    torch.float32: "float", torch.float64: "double", torch.float16: "uint16_t",
    torch.bfloat16: "uint16_t", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}
#: the type arithmetic happens in (float16/bfloat16 widen to float: common.compute_dtype)
COMPUTE_TYPE = {dtype: DTYPE_TO_CPP[compute_dtype(dtype)] for dtype in DTYPE_TO_CPP}
LOAD_CONVERT = {torch.float16: "mi_half2float", torch.bfloat16: "mi_bf162float"}
STORE_CONVERT = {torch.float16: "mi_float2half", torch.bfloat16: "mi_float2bf16"}


def cpp_constant(value, dtype) -> str:
    ctype = COMPUTE_TYPE[dtype]
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        value = float(value)
        if math.isnan(value):
            return f"std::numeric_limits<{ctype}>::quiet_NaN()"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}std::numeric_limits<{ctype}>::infinity()"
        return repr(value) + ("f" if ctype == "float" else "")
    return f"static_cast<{ctype}>({int(value)}L)"


class CppOverrides:
    """ops name → C++ expression. Arguments are already-named variables. Arithmetic goes
    through the prelude's `mi_*` templates, which keep the operands' type (C++ would compute
    uint8/int8/int16 in int: -x of a uint8 would be negative), as ATen does."""
    add = staticmethod(lambda a, b: f"mi_add({a}, {b})")
    sub = staticmethod(lambda a, b: f"mi_sub({a}, {b})")
    mul = staticmethod(lambda a, b: f"mi_mul({a}, {b})")
    truediv = staticmethod(lambda a, b: f"mi_div({a}, {b})")
    floordiv = staticmethod(lambda a, b: f"mi_floordiv({a}, {b})")
    mod = staticmethod(lambda a, b: f"mi_mod({a}, {b})")
    fmod = staticmethod(lambda a, b: f"mi_fmod({a}, {b})")
    pow = staticmethod(lambda a, b: f"mi_pow({a}, {b})")
    maximum = staticmethod(lambda a, b: f"mi_max({a}, {b})")
    minimum = staticmethod(lambda a, b: f"mi_min({a}, {b})")
    atan2 = staticmethod(lambda a, b: f"std::atan2({a}, {b})")
    hypot = staticmethod(lambda a, b: f"std::hypot({a}, {b})")
    copysign = staticmethod(lambda a, b: f"std::copysign({a}, {b})")
    eq = staticmethod(lambda a, b: f"{a} == {b}")
    ne = staticmethod(lambda a, b: f"{a} != {b}")
    lt = staticmethod(lambda a, b: f"{a} < {b}")
    le = staticmethod(lambda a, b: f"{a} <= {b}")
    gt = staticmethod(lambda a, b: f"{a} > {b}")
    ge = staticmethod(lambda a, b: f"{a} >= {b}")
    logical_and = staticmethod(lambda a, b: f"{a} && {b}")
    logical_or = staticmethod(lambda a, b: f"{a} || {b}")
    logical_xor = staticmethod(lambda a, b: f"static_cast<bool>({a}) != static_cast<bool>({b})")
    bitwise_and = staticmethod(lambda a, b: f"mi_bitwise_and({a}, {b})")
    bitwise_or = staticmethod(lambda a, b: f"mi_bitwise_or({a}, {b})")
    bitwise_xor = staticmethod(lambda a, b: f"mi_bitwise_xor({a}, {b})")
    bitwise_left_shift = staticmethod(lambda a, b: f"mi_shl({a}, {b})")
    bitwise_right_shift = staticmethod(lambda a, b: f"mi_shr({a}, {b})")
    logical_not = staticmethod(lambda x: f"!{x}")
    bitwise_not = staticmethod(lambda x: f"mi_bitwise_not({x})")
    neg = staticmethod(lambda x: f"mi_neg({x})")
    abs = staticmethod(lambda x: f"mi_abs({x})")
    rsqrt = staticmethod(lambda x: f"1 / std::sqrt({x})")
    sigmoid = staticmethod(lambda x: f"1 / (1 + mi_exp(-{x}))")
    relu = staticmethod(lambda x: f"mi_relu({x})")
    reciprocal = staticmethod(lambda x: f"1 / {x}")
    round = staticmethod(lambda x: f"std::nearbyint({x})")
    sign = staticmethod(lambda x: f"mi_sign({x})")
    square = staticmethod(lambda x: f"mi_mul({x}, {x})")
    where = staticmethod(lambda c, a, b: f"{c} ? {a} : {b}")


for _name in ("exp2 expm1 log log2 log10 log1p sqrt sin cos tan asin acos atan sinh cosh tanh "
              "asinh acosh atanh erf erfc lgamma floor ceil trunc isnan isinf signbit").split():
    setattr(CppOverrides, _name, staticmethod(lambda x, _f=_name: f"std::{_f}({x})"))
CppOverrides.exp = staticmethod(lambda x: f"mi_exp({x})")   # the prelude's: vectorizes, no slow path

REDUCTION_INIT = {"sum": "0", "prod": "1", "any": "false"}
REDUCTION_COMBINE = {
    "sum": "{acc} = {acc} + {value};", "prod": "{acc} = {acc} * {value};",
    "any": "{acc} = {acc} || {value};",
}
OMP_REDUCTION_OP = {"sum": "+", "prod": "*", "any": "||"}


def reduction_init(reduction_type, ctype):
    if reduction_type in ("max", "argmax"):
        return f"-std::numeric_limits<{ctype}>::infinity()" if ctype in ("float", "double") \
            else f"std::numeric_limits<{ctype}>::lowest()"
    if reduction_type in ("min", "argmin"):
        return f"std::numeric_limits<{ctype}>::infinity()" if ctype in ("float", "double") \
            else f"std::numeric_limits<{ctype}>::max()"
    return REDUCTION_INIT[reduction_type]


class CppKernel(CppTiledLoops, CppReductionLoops, Kernel):
    """Generates one C++ function for a fused group: outer loops over `ranges`, then one
    block after another, each looping over `reduction_ranges` or not at all: `outer` (runs
    once per outer iteration) or `loop` (a loop over the reduction ranges, computing values
    per element and folding some into accumulators declared in `prefix`, stored in `suffix`).
    As Triton's looped kernels, one loop holds per-element nodes and the reductions that read
    them (softmax's exp(x - max), stored, and its sum: one pass over the row, not two); only a
    node reading a reduction that this loop finishes opens the next."""

    language, loop_kind = "cpp", "loop"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.accumulators: dict[str, tuple[str, str]] = {}   # name → (C++ type, initial value)
        self.reduction_loads: list[tuple] = []               # (x stride, r stride) of each load
        self.multi_output_done: dict[tuple, tuple] = {}      # (block, type, value) → its outputs: computed once
        self.access_strides = {"load": [], "store": []}      # a pointwise kernel's, for its loop order (cpp_loops.py)
        self.plain_loads: list[tuple] = []                   # (buffer, index, strides): may be read tile by tile
        self.masked_depth = 0                                # inside an ops.masked body (its loads may be out of bounds)
        self.vec = None   # the body on explicit vectors: a CppVecKernel (codegen/cpp_vec.py, with_vector_twin)
        self.vec_reason: str | None = "not made with_vector_twin"   # or why there is none
        self.vec_along = None   # where it may have one: var → (twin, why not), for a reordered nest
        self.nodes_seen: list = []   # (a reordered nest's twin follows them again: vector_twin_along)
        self.unmerged = None   # (groups of the group's dims, their sizes): loops merged (compile_fx.cpp_kernel)

    def codegen_node(self, node):
        super().codegen_node(node)
        self.nodes_seen.append(node)
        if self.vec is not None and (reason := self.vec.mirror(node)):   # the twin cannot follow
            self.vec, self.vec_reason = None, reason

    # ------------------------------------------------------------------ blocks
    def block_kind(self, node) -> str:
        if node.is_reduction or (self.reduction_ranges and canonical_len(node.ranges) > len(self.ranges)):
            return "loop"   # a reduction, or a per-element node of the row
        return "outer"

    def starts_new_block(self, kind, reads) -> bool:
        return self.block.kind != kind or (kind == "loop" and bool(reads & self.block.reduced))

    def scoped(self, kind) -> bool:
        return kind != "outer"   # names made inside the loop die with it

    # ------------------------------------------------------------------ the ops handler
    def __getattr__(self, name):
        if name in UNARY_OPS or name in BINARY_OPS:
            template = getattr(CppOverrides, name)
            return lambda *args: self.cse.generate(self.compute, template(*args))
        raise AttributeError(name)

    def index(self, expr) -> str:
        return cexpr(self.args.note_sizes(simplify_with_ranges(sympy.sympify(expr), self.var_ranges)))

    def size(self, size) -> str:
        """A loop bound or size as C: `64`, or `s0` (a kernel argument)."""
        return str(size) if is_static(size) else cexpr(self.args.note_sizes(size))

    def hint(self, size) -> int:
        """The traced value of a size, for heuristics (how many threads, simd or not)."""
        return V.graph.sizevars.size_hint(size) if V.has_graph() else int(size)

    store_key = index

    def load(self, name, index):
        text = self.index(index)
        if (stored := self._stored(name, text)) is not None:
            return stored
        if self._current().kind == "loop" and self.itervars and self.reduction_vars:
            self.reduction_loads.append(innermost_strides(index, self.var_ranges, self.itervars[-1],
                                                          self.reduction_vars[-1]))
        self._note_strides("load", index)
        dtype = V.graph.get_dtype(name)
        expr = f"{self.args.input(name)}[{text}]"
        if not self.masked_depth and dtype != torch.bool and name not in self.args.output_buffers:
            self.plain_loads.append((name, index, self.access_strides["load"][-1] if not self.reduction_ranges else None))
        if dtype == torch.bool:   # read as its byte: g++ leaves a loop that loads `bool` scalar (an attention mask)
            expr = f"(reinterpret_cast<const uint8_t*>({self.args.input(name)})[{text}] != 0)"
        if dtype in LOAD_CONVERT:
            expr = f"{LOAD_CONVERT[dtype]}({expr})"
        return self.cse.generate(self.compute, expr)

    def _store_line(self, name, index, value):
        dtype = V.graph.get_dtype(name)
        value = f"{STORE_CONVERT[dtype]}({value})" if dtype in STORE_CONVERT else value
        return f"{self.args.output(name)}[{self.index(index)}] = {value};"

    def store(self, name, index, value):
        self._note_strides("store", index)
        self._note_store(name, self.index(index), value, lambda: self._store_line(name, index, value))

    def _note_strides(self, kind, index):
        if not self.reduction_ranges:
            self.access_strides[kind].append(affine_strides(index, self.itervars, self.var_ranges))

    def store_reduction(self, name, index, value):   # the accumulator outlives the loop
        self.block.reduced.add(name)
        self._note_store(name, self.index(index), value, lambda: self._store_line(name, index, value),
                         self.block.suffix, outlives_block=True)

    def constant(self, value, dtype):
        return self.cse.generate(self.compute, cpp_constant(value, dtype))

    def index_expr(self, expr, dtype):
        return self.cse.generate(self.compute, f"static_cast<{COMPUTE_TYPE[dtype]}>({self.index(expr)})")

    def to_dtype(self, x, dtype):
        return self.cse.generate(self.compute, f"static_cast<{COMPUTE_TYPE[dtype]}>({x})")

    def where(self, cond, a, b):
        return self.cse.generate(self.compute, CppOverrides.where(cond, a, b))

    def truediv(self, a, b):
        """Inside a row's loop, a division by a float reduction of the row (softmax's sum) is a
        multiplication by its reciprocal, which g++ then computes once per row: a vector divide
        per element made the [4096, 1024] softmax kernel ~15% slower. ATen's softmax multiplies
        by the reciprocal too; the result may differ from a division in the last bit."""
        acc = self.accumulators.get(str(b))
        if acc is not None and acc[0] in ("float", "double") and self._current().kind == "loop":
            return self.cse.generate(self.compute, f"mi_mul({a}, 1 / {b})")
        return self.cse.generate(self.compute, CppOverrides.truediv(a, b))

    def indirect_indexing(self, x, size):
        var = self.cse.generate(self.compute, f"static_cast<int64_t>({x} < 0 ? {x} + {self.size(size)} : {x})")
        return sympy.Symbol(var.name, integer=True, nonnegative=True)

    def masked(self, mask, body, other):
        """`mask ? body() : other`, with body's loads inside a lambda so that they only run
        where the mask holds (padding and cat read out of bounds otherwise)."""
        lambda_var = self.cse.newvar()
        outer = self.compute
        self.compute = IndentedBuffer()
        self.masked_depth += 1   # (its loads are not copied tile by tile: they may fall outside)
        with self.cse.scope(), self.masked_scope():
            result = body()
        self.masked_depth -= 1
        inner = self.compute
        self.compute = outer
        outer.writeline(f"auto {lambda_var} = [&] {{")
        with outer.indent():
            outer.splice(inner)
            outer.writeline(f"return {result};")
        outer.writeline("};")
        other_expr = str(other).lower() if isinstance(other, bool) else (
            f"decltype({lambda_var}())({cpp_constant(other, torch.float64)})"
            if isinstance(other, float) else f"decltype({lambda_var}())({other})")
        return self.cse.generate(outer, f"{mask} ? {lambda_var}() : {other_expr}")

    def reduction(self, dtype, src_dtype, reduction_type, value):
        block = self.block
        acc = f"acc{sum(len(b.prefix.lines) for b in self.blocks)}"
        ctype = COMPUTE_TYPE[dtype if reduction_type not in ("argmax", "argmin") else src_dtype]
        if (found := self.multi_output_done.get((id(block), reduction_type, str(value)))) is not None:
            return found   # the other buffer of a two-output reduction this loop computes already
        if reduction_type == "online_softmax_reduce":
            found = self._online_softmax(block, acc, ctype, value)
        elif reduction_type == "welford_reduce":
            found = self._welford(block, acc, ctype, value)
        if found is not None:
            self.multi_output_done[(id(block), reduction_type, str(value))] = found
            return found
        self._declare(block, ctype, acc, reduction_init(reduction_type, ctype))
        if reduction_type in ("argmax", "argmin"):
            block.has_argreduction = True
            self._declare(block, "int64_t", f"{acc}_index", "0")
            better = ">" if reduction_type == "argmax" else "<"
            linear = sum((r * math.prod(self.reduction_ranges[k + 1:]) for k, r in enumerate(self.reduction_vars)),
                         sympy.Integer(0))
            self.compute.writeline(f"if ({acc} == {acc} && ({value} != {value} || {value} {better} {acc})) "
                                   f"{{ {acc} = {value}; {acc}_index = {self.size(linear)}; }}")
            return CSEVariable(f"{acc}_index")
        if reduction_type in ("max", "min"):
            # OpenMP's max/min clauses vectorize but drop NaN; a separate flag keeps it. The flag
            # is an int folded with `|`: a bool `||` reduction is not vectorized (3x slower).
            self._declare(block, "int", f"{acc}_nan", "0")
            self.compute.writeline(f"{acc} = std::{reduction_type}<{ctype}>({acc}, {value}); "
                                   f"{acc}_nan = {acc}_nan | ({value} != {value});")
            block.suffix.writeline(f"if ({acc}_nan) {acc} = std::numeric_limits<{ctype}>::quiet_NaN();")
            block.omp_reductions += [(reduction_type, acc), ("|", f"{acc}_nan")]
            return CSEVariable(acc)
        self.compute.writeline(REDUCTION_COMBINE[reduction_type].format(acc=acc, value=value))
        block.omp_reductions.append((OMP_REDUCTION_OP.get(reduction_type), acc))
        return CSEVariable(acc)

    def _online_softmax(self, block, acc, ctype, value):
        """(row max, sum of exp(x - max)) in one pass over the row (lowering/softmax.py), once
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
        from the loop around the body (`_welford_steps`): the LANES lanes of a row
        (`_codegen_lane_loops`) or a tile's columns each take one element per step, so they share
        one count and one division, and the update vectorizes. No OpenMP clause folds the state:
        the lanes are folded by Chan's combine (`mi_welford_fold_lanes`); without lanes the loop
        is scalar."""
        self._declare(block, ctype, f"{acc}_mean", "0")
        self._declare(block, ctype, f"{acc}_m2", "0")
        block.prefix.writeline(f"int64_t {acc}_weight = 0;")
        self.compute.writeline(f"mi_welford_update({acc}_mean, {acc}_m2, {value}, {acc}_rweight);")
        block.omp_reductions.append(("welford", acc))
        return CSEVariable(f"{acc}_mean"), CSEVariable(f"{acc}_m2")

    def _declare(self, block, ctype, acc, init):
        block.prefix.writeline(f"{ctype} {acc} = {init};")
        self.accumulators[acc] = (ctype, init)

    # ------------------------------------------------------------------ the loop nest
    def _parallel_pragma(self, sizes) -> tuple[str, int]:
        """`#pragma omp parallel for` over enough leading loops (of `sizes` trips) to feed the threads."""
        total = math.prod(map(self.hint, self.ranges)) * max(math.prod(map(self.hint, self.reduction_ranges)), 1)
        when = self._parallel_if(self.ranges + self.reduction_ranges)
        if not sizes or (not when and total < self.config.parallel_min_numel):
            return "", 0
        depth, work = 0, 1
        while depth < len(sizes) and work < 64:
            work *= self.hint(sizes[depth])
            depth += 1
        collapse = f" collapse({depth})" if depth > 1 else ""
        return f"#pragma omp parallel for{collapse}{when}", depth

    def _parallel_if(self, sizes) -> str:
        """` if(s0*64 >= 16384)`: with symbolic sizes, whether threads pay off is decided at
        run time (an OpenMP `if` clause); "" for static sizes (decided here)."""
        if all(map(is_static, sizes)):
            return ""
        return f" if({self.size(math.prod(sizes))} >= {self.config.parallel_min_numel})"

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

    def buffer_ctype(self, name) -> str:
        """The C++ type of buffer `name`'s elements."""
        return DTYPE_TO_CPP[V.graph.get_dtype(name)]

    def params(self) -> list[str]:
        """The C parameters: the pointers of `args`, inputs const."""
        params = [f"const {self.buffer_ctype(n)}* __restrict__ {p}"
                  for n, p in self.args.input_buffers.items() if n not in self.args.output_buffers]
        params += [f"{self.buffer_ctype(n)}* __restrict__ {p}"
                   for n, p in self.args.output_buffers.items()]
        return params + [f"const int64_t {s}" for s in self.args.size_names()]   # sizes: s0, s1...

    def codegen(self) -> str:
        return c_function(self.name, self.codegen_loops, self.params)

    def node_indices(self, node):
        """With merged loops, each of the group's dims is recovered from its merged loop
        (`FloorDiv`, `ModularIndexing`: the indices then simplify back to one term in it)."""
        if self.unmerged is None:
            return super().node_indices(node)
        groups, sizes = self.unmerged
        dims = []
        for var, group in zip(self.itervars, groups):
            inner, digits = 1, []
            for k in reversed(group):
                digits.append(FloorDiv(var, inner) if k == group[0] else ModularIndexing(var, inner, sizes[k]))
                inner *= sizes[k]
            dims += reversed(digits)
        return node.index_for(dims, self.reduction_vars)

    def is_pointwise(self) -> bool:
        """No reduction: every block runs once per outer iteration (its loops may be reordered)."""
        return not self.reduction_ranges and all(b.kind == "outer" for b in self.blocks)

    def codegen_loops(self, code):
        """The loop nest and its blocks (a combo kernel runs several in one function). A
        pointwise kernel's loops may be reordered or tiled (cpp_loops.loop_plan)."""
        columns = self.reduces_columns()
        only_outer = all(b.kind == "outer" for b in self.blocks)
        plan = self.pointwise_plan()
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
            wide = self.hint(n) >= WIDE_COLUMN_TILE * torch.get_num_threads()
            self.column_tile = WIDE_COLUMN_TILE if wide else COLUMN_TILE
            loops[-1] = Loop(f"{x}_tile", "0", self.size(n), self.column_tile, -(-self.hint(n) // self.column_tile))
        if self.vec:   # ... or vectors (and a tail), which the threads share only if it is the only loop
            loops[-1] = Loop(str(x), "0", self.size(n), self.vec.lanes, -(-self.hint(n) // self.vec.lanes))
        code.writeline(f"// explicit vectors (cpp_vec.py): {'no, ' + self.vec_reason if self.vec_reason else 'yes'}")
        pragma, depth = self._parallel_pragma([loop.trips for loop in (loops[:-1] if self.vec and len(loops) > 1 else loops)])
        tile_loops = self._tile_loads(plan) if plan and plan.tile else []   # after its transposed loads are copied
        # (the twin writes the innermost loops; _codegen_tile the two inside a tile)
        written = loops[:-1] if self.vec else loops
        levels = self._hoisted(written, depth) if only_outer and not (columns or tile_loops) else None
        for k, loop in enumerate(written):
            if k == 0 and pragma:
                code.writeline(pragma)
            elif k == len(loops) - 1 and only_outer and k >= depth and not tile_loops:
                code.writeline("#pragma omp simd")
            code.writeline(f"for (int64_t {loop.var} = {loop.start}; {loop.var} < {loop.end}; {loop.var} += {loop.step}) {{")
            code._indent += 1
            if levels and k < len(levels) - 1:
                code.writelines(levels[k])
        if columns:
            self._codegen_column_tile(code)
        elif self.vec:
            self.vec.codegen_innermost(code, pragma if len(loops) == 1 else "", levels[-1] if levels else None)
        elif tile_loops:
            self._codegen_tile(code, tile_loops, simd=only_outer)
        elif levels:
            code.writelines(levels[-1])
        for block in [] if columns or self.vec or tile_loops or levels else self.blocks:
            self._codegen_block(code, block)
        for _ in written:
            code._indent -= 1
            code.writeline("}")

def c_function(name: str, write_body, params) -> str:
    """`extern "C" void name(params) { body }`. The body is written first: its loops note the
    size symbols that `params()` then lists after the pointers."""
    body = IndentedBuffer()
    with body.indent():
        write_body(body)
    code = IndentedBuffer()
    code.writeline(f'extern "C" void {name}({", ".join(params())}) {{')
    code.splice(body)
    code.writeline("}")
    return code.getvalue()
