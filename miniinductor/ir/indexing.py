"""SymPy index expressions: loop variables, FloorDiv, ModularIndexing, and their simplifier.

Mirrors `torch/_inductor/sizevars.py` and `torch/utils/_sympy/functions.py`. Every load
and store in the loop IR addresses memory with an expression such as
`i0*4096 + ModularIndexing(i1, 64, 12)`; views never copy data, they rewrite these.
`simplify_with_ranges(expr, {i0: 8, i1: 512})` uses the facts `0 <= i < range` to remove
divisions and moduli that cannot change the value. Simplified: symbolic sizes are
simplified less than Inductor does (docs/design_notes.md).
"""
from __future__ import annotations

import functools
import math

import sympy


def index_symbol(prefix: str, i: int) -> sympy.Symbol:
    """Loop variables: `i0, i1...` for outer loops, `r0, r1...` for reduction loops."""
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def index_vars(prefix: str, ranges) -> list[sympy.Symbol]:
    return [index_symbol(prefix, i) for i in range(len(ranges))]


def canonical_vars(n: int) -> list[sympy.Symbol]:
    """c0, c1, ...: the variables the scheduler writes MemoryDeps in (codegen's tiling reuses them)."""
    return [sympy.Symbol(f"c{k}", integer=True, nonnegative=True) for k in range(n)]


class FloorDiv(sympy.Function):
    """floor(base / divisor) for integers."""
    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))


class ModularIndexing(sympy.Function):
    """(base // divisor) % modulus: how a flat index splits into the digits of a shape."""
    nargs = (3,)
    is_integer = True

    @classmethod
    def eval(cls, base, divisor, modulus):
        if base == 0 or modulus == 1:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))


class ClampIndex(sympy.Function):
    """min(max(x, 0), hi): a position that may step outside [0, hi] moved to the nearest one
    inside (a pooling window over the padding reads at the edge; its mask discards the value).
    C prints it in int32 (`mi_clamp_index`, cpp_prelude.h): with the int64 of Min and Max
    around a loop variable g++ left a strided window read scalar, with int32 it gathers."""
    nargs = (2,)
    is_integer = True

    @classmethod
    def eval(cls, x, hi):
        if x.is_Integer and hi.is_Integer:
            return sympy.Integer(min(max(int(x), 0), int(hi)))


def bounds(expr, ranges) -> tuple[int, int] | None:
    """Inclusive (lo, hi) of `expr` when each variable v lies in [0, ranges[v]), or None."""
    if expr.is_Integer:
        return int(expr), int(expr)
    if expr.is_Symbol:
        known = expr in ranges and _is_int(ranges[expr])
        return (0, int(ranges[expr]) - 1) if known else None
    if expr.is_Add or expr.is_Mul:
        parts = [bounds(a, ranges) for a in expr.args]
        if any(p is None for p in parts):
            return None
        lo, hi = parts[0]
        for plo, phi in parts[1:]:
            if expr.is_Add:
                lo, hi = lo + plo, hi + phi
            else:
                corners = (lo * plo, lo * phi, hi * plo, hi * phi)
                lo, hi = min(corners), max(corners)
        return lo, hi
    if isinstance(expr, FloorDiv) and expr.args[1].is_Integer:
        b, d = bounds(expr.args[0], ranges), int(expr.args[1])
        return None if b is None else (b[0] // d, b[1] // d)
    if isinstance(expr, ModularIndexing) and expr.args[2].is_Integer:
        return 0, int(expr.args[2]) - 1
    if isinstance(expr, ClampIndex) and expr.args[1].is_Integer:
        hi, b = int(expr.args[1]), bounds(expr.args[0], ranges)
        return (0, hi) if b is None else (min(max(b[0], 0), hi), min(max(b[1], 0), hi))
    return None


def _is_int(x) -> bool:
    return isinstance(x, int) or getattr(x, "is_Integer", False)


def _coeff_func(term):
    """c*f → (c, f) with f a FloorDiv or ModularIndexing and c the rest (a number, or a
    product with size symbols); (term's numeric coefficient, rest) otherwise."""
    for f in sympy.Mul.make_args(term):
        if isinstance(f, (FloorDiv, ModularIndexing)):
            return term / f, f
    return term.as_coeff_Mul()


def _split_divisible(base, divisor):
    """base = divisor*quotient + rest, where quotient gathers the terms divisible by divisor."""
    quotient, rest = sympy.Integer(0), sympy.Integer(0)
    for term in sympy.Add.make_args(sympy.expand(base)):
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % divisor == 0:
            quotient += term / divisor
        else:
            rest += term
    return quotient, rest


def _factor_out(base, divisor, ranges):
    """base = g*A + B with g | divisor and 0 <= B < g  →  (g, A), else None.
    Then floor(base / divisor) == floor(A / (divisor/g)): B can never carry."""
    terms = sympy.Add.make_args(sympy.expand(base))
    for g in sorted({math.gcd(int(t.as_coeff_Mul()[0]), divisor) for t in terms
                     if t.as_coeff_Mul()[0].is_Integer}, reverse=True):
        if g <= 1:
            continue
        big = [t for t in terms if t.as_coeff_Mul()[0].is_Integer and int(t.as_coeff_Mul()[0]) % g == 0]
        small = sympy.Add(*[t for t in terms if t not in big])
        b = bounds(small, ranges)
        if b is not None and 0 <= b[0] and b[1] < g:
            return g, sympy.Add(*big) / g
    return None


def _join_terms(expr):
    """c*m*FloorDiv(x, d*m) + c*ModularIndexing(x, d, m) → c*FloorDiv(x, d), and the same
    with ModularIndexing(x, d*m, n) in place of the FloorDiv: digits put back together."""
    terms = list(sympy.Add.make_args(expr))
    for t1 in terms:
        c1, f1 = _coeff_func(t1)
        for t2 in terms:
            c2, f2 = _coeff_func(t2)
            if t1 is t2 or not isinstance(f2, ModularIndexing) or not isinstance(f1, (FloorDiv, ModularIndexing)):
                continue
            x, d, m = f2.args
            if f1.args[0] != x or f1.args[1] != d * m or sympy.expand(c1 - c2 * m) != 0:
                continue
            joined = FloorDiv(x, d) if isinstance(f1, FloorDiv) else ModularIndexing(x, d, m * f1.args[2])
            rest = [t for t in terms if t is not t1 and t is not t2]
            return _join_terms(sympy.Add(*rest, c2 * joined))
    return expr


def simplify_with_ranges(expr, ranges: dict) -> sympy.Expr:
    """Rewrite FloorDiv/ModularIndexing using `0 <= v < ranges[v]`; leaves the rest alone."""
    if not isinstance(expr, sympy.Expr) or expr.is_Atom:
        return expr
    if expr.is_Add:  # join digits before simplifying them apart
        joined = _join_terms(expr)
        if joined != expr:
            return simplify_with_ranges(joined, ranges)
    args = [simplify_with_ranges(a, ranges) for a in expr.args]
    if isinstance(expr, (FloorDiv, ModularIndexing)) and not all(_is_int(a) for a in args[1:]):
        return expr.func(*args)   # by a symbolic size: only _join_terms simplifies it
    if isinstance(expr, FloorDiv):
        base, divisor = args[0], int(args[1])
        factored = _factor_out(base, divisor, ranges)
        if factored is not None:
            return simplify_with_ranges(FloorDiv(factored[1], divisor // factored[0]), ranges)
        quotient, rest = _split_divisible(base, divisor)
        b = bounds(rest, ranges)
        if b is not None and 0 <= b[0] and b[1] < divisor:
            return quotient
        return quotient + FloorDiv(rest, divisor)
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = args[0], int(args[1]), int(args[2])
        factored = _factor_out(base, divisor, ranges)
        if factored is not None:
            return simplify_with_ranges(ModularIndexing(factored[1], divisor // factored[0], modulus), ranges)
        if divisor == 1:  # (g*A + B) % m == g*(A % (m/g)) + B  when g | m and 0 <= B < g
            split = _factor_out(base, modulus, ranges)
            if split is not None:
                g, a = split
                b = sympy.expand(base - g * a)
                return simplify_with_ranges(g * ModularIndexing(a, 1, modulus // g) + b, ranges)
        quotient, rest = _split_divisible(base, divisor * modulus)  # whole laps vanish
        b = bounds(rest, ranges)
        if b is not None and 0 <= b[0] and b[1] < divisor * modulus:
            return simplify_with_ranges(FloorDiv(rest, divisor), ranges)
        return ModularIndexing(rest, divisor, modulus)
    if expr.is_Add:
        joined = _join_terms(sympy.Add(*args))
        if joined != sympy.Add(*args):
            return simplify_with_ranges(joined, ranges)
        return joined
    return expr.func(*args)


@functools.lru_cache(maxsize=None)
def _c_float_printer():
    """SymPy's C99 printer, with the floats of the sizes (sizevars.FLOAT_FUNCTIONS) in double as
    Python computes them; ToFloat(s0) prints itself (its `_ccode`): `(double)(s0)`. The base
    class of CIndexPrinter (`_c_printer`)."""
    from sympy.printing.c import C99CodePrinter

    class CFloatPrinter(C99CodePrinter):
        def _double(self, expr):
            return f"static_cast<double>({self._print(expr)})"

        def _print(self, expr, **kwargs):   # (torch's IntTrueDiv._ccode is C's integer division)
            if type(expr).__name__ == "IntTrueDiv":
                return self._print_FloatTrueDiv(expr)
            return super()._print(expr, **kwargs)

        def _print_FloatTrueDiv(self, expr):   # 4 / s0: real division
            return f"({self._double(expr.args[0])} / {self._double(expr.args[1])})"

        def _print_OpaqueUnaryFn_sqrt(self, expr):
            return f"std::sqrt({self._double(expr.args[0])})"

        def _print_FloatPow(self, expr):
            return f"std::pow({self._double(expr.args[0])}, {self._double(expr.args[1])})"
    return CFloatPrinter


@functools.lru_cache(maxsize=None)
def _c_printer():
    class CIndexPrinter(_c_float_printer()):
        """Prints index expressions as C: FloorDiv → `/`, ModularIndexing → `/ %`.
        Index values are non-negative (indirect indices are wrapped first), so C's
        truncating division agrees with floor division."""

        def _print_FloorDiv(self, expr):
            return f"(({self._print(expr.args[0])}) / {self._atom(expr.args[1])})"

        def _print_ModularIndexing(self, expr):
            base, div, mod = self._print(expr.args[0]), self._atom(expr.args[1]), self._atom(expr.args[2])
            inner = f"({base})" if div == "1" else f"(({base}) / {div})"
            return f"({inner} % {mod})"

        def _atom(self, expr):   # a divisor or modulus: a symbolic one (32*s0) in parentheses
            text = self._print(expr)
            return text if expr.is_Atom else f"({text})"

        def _print_Integer(self, expr):
            return f"{int(expr)}L" if abs(int(expr)) >= 2**31 else str(int(expr))

        def _print_ClampIndex(self, expr):
            return f"mi_clamp_index(static_cast<int32_t>({self._print(expr.args[0])}), {self._print(expr.args[1])})"

        def _print_Max(self, expr):   # torch's strides hold Max(1, s0): integers, not fmax
            return self._minmax("max", expr.args)

        def _print_Min(self, expr):
            return self._minmax("min", expr.args)

        def _minmax(self, f, args):   # by value (cpp_prelude.h): std::max's reference kept g++ from vectorising
            first, *rest = args
            return self._print(first) if not rest else \
                f"mi_index_{f}({self._print(first)}, {self._minmax(f, rest)})"

        def _print_Pow(self, expr):   # s0**2 (symbolic sizes) → (s0*s0): integer arithmetic
            base, exp = expr.args
            if exp.is_Integer and exp > 0:
                return "(" + "*".join([self.parenthesize(base, 100)] * int(exp)) + ")"
            return super()._print_Pow(expr)

    return CIndexPrinter()


@functools.lru_cache(maxsize=4096)
def cexpr(expr) -> str:
    return _c_printer().doprint(expr)


@functools.lru_cache(maxsize=None)
def _py_printer():
    from sympy.printing.pycode import PythonCodePrinter

    class PyIndexPrinter(PythonCodePrinter):
        """Prints size expressions as Python (the wrapper's `s0*16`, `s0 // 2`)."""

        def _print_FloorDiv(self, expr):
            return f"(({self._print(expr.args[0])}) // ({self._print(expr.args[1])}))"

        def _print_ModularIndexing(self, expr):
            base, div, mod = (self._print(a) for a in expr.args)
            return f"((({base}) // ({div})) % ({mod}))"

        def _print_ToFloat(self, expr):   # floats of the sizes (sizevars.FLOAT_FUNCTIONS)
            return f"float({self._print(expr.args[0])})"

        def _print_IntTrueDiv(self, expr):
            return "(({}) / ({}))".format(*map(self._print, expr.args))

        _print_FloatTrueDiv = _print_IntTrueDiv

        def _print_OpaqueUnaryFn_sqrt(self, expr):
            return f"math.sqrt({self._print(expr.args[0])})"

        def _print_FloatPow(self, expr):
            return "(({}) ** ({}))".format(*map(self._print, expr.args))

        def _print_TruncToInt(self, expr):   # back to an int size: int(2.5*float(s0))
            return f"int({self._print(expr.args[0])})"

        def _print_FloorToInt(self, expr):
            return f"math.floor({self._print(expr.args[0])})"

        def _print_CeilToInt(self, expr):
            return f"math.ceil({self._print(expr.args[0])})"

    return PyIndexPrinter()


def pexpr(expr) -> str:
    """A size (int or SymPy expression) as Python source."""
    return str(expr) if isinstance(expr, int) else _py_printer().doprint(expr)


def _pairwise(on_ints, method, bound):
    """max or min of two operands, each an int or a torch integer tensor."""
    def pick(a, b):
        if not hasattr(a, "clamp"):
            a, b = b, a
        if not hasattr(a, "clamp"):
            return on_ints(a, b)
        return getattr(a, method)(b) if hasattr(b, "clamp") else a.clamp(**{bound: b})
    return pick


_pairwise_max, _pairwise_min = _pairwise(max, "maximum", "min"), _pairwise(min, "minimum", "max")


def evaluate(expr, env: dict):
    """Evaluate an index expression with Python ints or torch integer tensors in `env`."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return env[expr]
    args = [evaluate(a, env) for a in expr.args]
    if expr.is_Add:
        return functools.reduce(lambda a, b: a + b, args)
    if expr.is_Mul:
        return functools.reduce(lambda a, b: a * b, args)
    if isinstance(expr, FloorDiv):
        return args[0] // args[1]
    if isinstance(expr, ModularIndexing):
        return (args[0] // args[1]) % args[2]
    if isinstance(expr, sympy.Max):
        return functools.reduce(_pairwise_max, args)
    if isinstance(expr, sympy.Min):
        return functools.reduce(_pairwise_min, args)
    if isinstance(expr, ClampIndex):
        return _pairwise_min(_pairwise_max(args[0], 0), args[1])
    raise NotImplementedError(f"cannot evaluate index {expr}")
