"""C++/OpenMP code generation: one `extern "C"` function per scheduled group of buffers.

Codegen phase (a fused group → C++ source). Mirrors `torch/_inductor/codegen/cpp.py`
(CppOverrides, CppKernel). The kernel is an ops handler: running a buffer's body under it
turns every `ops.*` call into a C++ statement (`CppOverrides` holds the expression of each
op, `CSE` names the results). The loops around the body come from the buffer's ranges:
outer loops (`#pragma omp parallel for` when big enough), reduction loops inside them with
scalar accumulators; symbolic sizes are arguments after the pointers (`const int64_t s0`).

Simplified: plain nested loops in the order of the buffer's logical dims, in scalar code
that g++ -O3 vectorizes (docs/design_notes.md); the tiled, vector and Welford forms are
`cpu_fast`'s CppFastKernel, a subclass of this one (miniinductor/ext/cpu_fast/).
"""
from __future__ import annotations

import math

import sympy
import torch

from ..ir.indexing import cexpr, simplify_with_ranges
from ..ir.sizevars import is_static
from ..ops_handler import BINARY_OPS, MULTI_OUTPUT_REDUCTIONS, UNARY_OPS
from ..virtualized import V
from .common import CSEVariable, IndentedBuffer, Kernel, canonical_len, compute_dtype

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


class CppKernel(Kernel):
    """Generates one C++ function for a fused group: outer loops over `ranges`, then one
    block after another, each looping over `reduction_ranges` or not at all: `outer` (runs
    once per outer iteration) or `loop` (a loop over the reduction ranges, computing values
    per element and folding some into accumulators declared in `prefix`, stored in `suffix`);
    only a node reading a reduction that this loop finishes opens the next."""

    language, loop_kind = "cpp", "loop"
    #: a part of a combo kernel (codegen/combo.py) runs inside the combo's `omp parallel`
    #: region: its loops are shared out by an orphaned `omp for ... nowait` instead
    in_parallel_region = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.accumulators: dict[str, tuple[str, str]] = {}   # name → (C++ type, initial value)

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
        dtype = V.graph.get_dtype(name)
        expr = f"{self.args.input(name)}[{text}]"
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
        self._note_store(name, self.index(index), value, lambda: self._store_line(name, index, value))

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
        multiplication by its reciprocal, which g++ then computes once per row (a vector divide
        per element made the softmax kernel measurably slower). ATen's softmax multiplies by the
        reciprocal too; the result may differ from a division in the last bit."""
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
        with self.cse.scope(), self.masked_scope():
            result = body()
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
        if reduction_type in MULTI_OUTPUT_REDUCTIONS:   # (welford_reduce, online_softmax_reduce)
            raise NotImplementedError(
                f"{reduction_type}: the plain C++ kernel has no one-pass form of it; the C++ policy asks for "
                "one only with extension cpu_fast on, whose kernel (ext/cpu_fast) writes it")
        block, acc = self.block, self._next_accumulator()
        ctype = COMPUTE_TYPE[dtype if reduction_type not in ("argmax", "argmin") else src_dtype]
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
            # is an int folded with `|`: a bool `||` reduction is not vectorized.
            self._declare(block, "int", f"{acc}_nan", "0")
            self.compute.writeline(f"{acc} = std::{reduction_type}<{ctype}>({acc}, {value}); "
                                   f"{acc}_nan = {acc}_nan | ({value} != {value});")
            block.suffix.writeline(f"if ({acc}_nan) {acc} = std::numeric_limits<{ctype}>::quiet_NaN();")
            block.omp_reductions += [(reduction_type, acc), ("|", f"{acc}_nan")]
            return CSEVariable(acc)
        self.compute.writeline(REDUCTION_COMBINE[reduction_type].format(acc=acc, value=value))
        block.omp_reductions.append((OMP_REDUCTION_OP.get(reduction_type), acc))
        return CSEVariable(acc)

    def _next_accumulator(self) -> str:
        """The name of a new accumulator: `acc` and how many lines the blocks' prefixes hold."""
        return f"acc{sum(len(b.prefix.lines) for b in self.blocks)}"

    def _declare(self, block, ctype, acc, init):
        block.prefix.writeline(f"{ctype} {acc} = {init};")
        self.accumulators[acc] = (ctype, init)

    # ------------------------------------------------------------------ the loop nest
    def _parallel_pragma(self, sizes) -> tuple[str, int]:
        """`#pragma omp parallel for` over enough leading loops (of `sizes` trips) to feed the
        threads (`omp for ... nowait` in a combo kernel's region: `in_parallel_region`)."""
        total = math.prod(map(self.hint, self.ranges)) * max(math.prod(map(self.hint, self.reduction_ranges)), 1)
        when = self._parallel_if(self.ranges + self.reduction_ranges)
        if not sizes or (not when and total < self.config.parallel_min_numel):
            return "", 0
        depth, work = 0, 1
        while depth < len(sizes) and work < 64:
            work *= self.hint(sizes[depth])
            depth += 1
        collapse = f" collapse({depth})" if depth > 1 else ""
        if self.in_parallel_region:
            return f"#pragma omp for{collapse}{when} nowait", depth
        return f"#pragma omp parallel for{collapse}{when}", depth

    def _parallel_if(self, sizes) -> str:
        """` if(s0*64 >= 16384)`: with symbolic sizes, whether threads pay off is decided at
        run time (an OpenMP `if` clause); "" for static sizes (decided here)."""
        if all(map(is_static, sizes)):
            return ""
        return f" if({self.size(math.prod(sizes))} >= {self.config.parallel_min_numel})"

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

    def codegen_loops(self, code):
        """The loop nest and its blocks (a combo kernel runs several in one function): one loop
        per dim of `ranges`, in order, the first ones shared out among the threads; in a
        kernel without reductions the innermost gets `omp simd`."""
        only_outer = all(b.kind == "outer" for b in self.blocks)
        pragma, depth = self._parallel_pragma([self.hint(n) for n in self.ranges])
        for k, (var, size) in enumerate(zip(self.itervars, self.ranges)):
            if k == 0 and pragma:
                code.writeline(pragma)
            elif k == len(self.ranges) - 1 and only_outer and k >= depth:
                code.writeline("#pragma omp simd")
            code.writeline(f"for (int64_t {var} = 0; {var} < {self.size(size)}; {var} += 1) {{")
            code._indent += 1
        for block in self.blocks:
            self._codegen_block(code, block)
        for _ in self.ranges:
            code._indent -= 1
            code.writeline("}")

    def _codegen_block(self, code, block):
        """An `outer` block's body, or a `loop` block: its accumulators, the loops over the
        reduction ranges around its body, then what stores the finished reductions."""
        if block.kind == "outer":
            code.splice(block.body)
            return
        code.splice(block.prefix)
        for k, (var, size) in enumerate(zip(self.reduction_vars, self.reduction_ranges)):
            code.writelines(self._inner_pragmas(block, k))
            code.writeline(f"for (int64_t {var} = 0; {var} < {self.size(size)}; {var} += 1) {{")
            code._indent += 1
        code.splice(block.body)
        for _ in self.reduction_ranges:
            code._indent -= 1
            code.writeline("}")
        code.splice(block.suffix)

    @staticmethod
    def _reduction_clause(block) -> str:
        return "".join(f" reduction({op}:{acc})" for op, acc in block.omp_reductions)

    def _inner_pragmas(self, block, k) -> list[str]:
        """With no outer loop, the first inner loop runs in parallel; the innermost gets
        `omp simd` (which, for a reduction, allows reassociating the sum). None where no
        OpenMP clause can fold an accumulator (argmax/argmin)."""
        if block.has_argreduction or any(op is None for op, _ in block.omp_reductions):
            return []
        clause = self._reduction_clause(block)
        big = math.prod(map(self.hint, self.reduction_ranges)) >= self.config.parallel_min_numel
        when = self._parallel_if(self.reduction_ranges)
        if k == 0 and not self.ranges and (big or when):
            return [f"#pragma omp parallel for{clause}{when}"]
        if k == len(self.reduction_ranges) - 1:
            return [f"#pragma omp simd{clause}"]
        return []


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
