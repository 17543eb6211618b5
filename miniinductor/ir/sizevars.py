"""Symbolic sizes: the graph's size symbols (`s0`, `s1`...) and what is known about them.

Mirrors `torch/_inductor/sizevars.py` (`SizeVarAllocator`). Under dynamic shapes Dynamo's
ShapeEnv names each varying size with a SymPy symbol; lowering keeps it, so a buffer's size
is `[s0, 64]`, a loop runs to `s0` and the kernel takes `s0` as an argument. Asked by every
phase after capture: `statically_known_*` (true for every size, correctness may rest on it),
`size_hint` (the traced value: heuristics only) and `guard_equals` (a guard Dynamo checks).
Simplified: no replacements or precomputed sizes. A static graph has a `SizeVarAllocator()`
without a ShapeEnv, whose sizes are all ints. More (unbacked sizes): docs/design_notes.md.
"""
from __future__ import annotations

import sympy
import torch
import torch.utils._sympy.functions as torch_sympy
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ..virtualized import V

MAX_MIN = (sympy.Max, sympy.Min, torch_sympy.Max, torch_sympy.Min)   # SymPy's and torch's own
#: how a ShapeEnv writes a float of the sizes (a SymFloat): `sym_float(s1)` is ToFloat(s1),
#: `4 / s0` IntTrueDiv(4, s0), `sym_float(s0) / 2` FloatTrueDiv, `sym_sqrt` OpaqueUnaryFn_sqrt,
#: `x ** -0.5` FloatPow; every printer gives each double arithmetic, never C's integer division
FLOAT_FUNCTIONS = (torch_sympy.ToFloat, torch_sympy.IntTrueDiv, torch_sympy.FloatTrueDiv,
                   torch_sympy.OpaqueUnaryFn_sqrt, torch_sympy.FloatPow)
UNBACKED_HINT = 8192   # a data-dependent size's stand-in for heuristics (Inductor's unbacked_symint_fallback)


class SymbolicUnsupported(Exception):
    """This graph cannot be compiled generic in its sizes (yet): the caller compiles it once
    per concrete shape instead (capture/specialize.py). The message says which op and why."""


def as_expr(x):
    """A size as the compiler keeps it: an int, or a SymPy expression of the size symbols
    (a SymInt's own expression: reading it does not guard, unlike `int(x)`); a SymFloat
    likewise: a float, or an expression such as `ToFloat(s1)` (see FLOAT_FUNCTIONS)."""
    if isinstance(x, (torch.SymInt, torch.SymFloat)):
        x = x.node.expr
    if isinstance(x, sympy.Basic):
        if x.has(*MAX_MIN) and V.has_graph():   # contiguous strides hold Max(1, s0)
            x = V.graph.sizevars.simplify(x)
        return int(x) if x.is_Integer else float(x) if x.is_Float else x
    return x


def is_float_expr(x) -> bool:
    """Is `x` an expression of the sizes whose value is a float (a SymFloat's)? (Not an int
    made of one: TruncToInt(2.5*ToFloat(s0)), interpolate's output size.)"""
    return isinstance(x, sympy.Basic) and not x.is_integer and x.has(sympy.Float, *FLOAT_FUNCTIONS)


def as_exprs(sizes) -> list:
    return [as_expr(s) for s in sizes]


def size_hint(x) -> int:
    """`x` as an int: itself, or the current graph's traced value of it (heuristics only)."""
    if isinstance(x, int):
        return x
    return V.graph.sizevars.size_hint(x)


def is_static(x) -> bool:
    return isinstance(x, int) or (isinstance(x, sympy.Basic) and x.is_Integer)


def shape_env_of(example_inputs, gm=None):
    """Dynamo's ShapeEnv, read from the inputs' symbolic sizes, or else from the sizes of
    `gm`'s values (a graph with static inputs whose ops make data-dependent sizes u0, u1...);
    None for a static graph."""
    values = list(example_inputs) + ([n.meta.get("val") for n in gm.graph.nodes] if gm is not None else [])
    for x in values:
        items = [x] if isinstance(x, torch.SymInt) else list(x.shape) + list(x.stride()) \
            if isinstance(x, torch.Tensor) and x.layout == torch.strided else []
        for s in items:
            if isinstance(s, torch.SymInt) and not s.node.expr.is_Integer:
                return s.node.shape_env
    return None


class SizeVarAllocator:
    def __init__(self, shape_env=None):
        self.shape_env = shape_env

    @property
    def symbolic(self) -> bool:
        return self.shape_env is not None

    @property
    def var_to_val(self) -> dict:
        """Each size symbol's traced value (the hint)."""
        env = self.shape_env
        if env is None:
            return {}
        return env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val

    def is_size_symbol(self, s) -> bool:
        return s in self.var_to_val or self.is_unbacked(s)

    @staticmethod
    def is_unbacked(s) -> bool:
        """A data-dependent size (u0, u1...: nonzero's count, an `.item()`), known only once the
        op that makes it has run: the wrapper binds it from that op's result."""
        return isinstance(s, sympy.Symbol) and bool(free_unbacked_symbols(s))

    def free_symbols(self, expr) -> set[sympy.Symbol]:
        """The size symbols `expr` reads (not loop variables, not indirect indices)."""
        if self.shape_env is None or not isinstance(expr, sympy.Basic):
            return set()
        return {s for s in expr.free_symbols if self.is_size_symbol(s)}

    def simplify(self, expr):
        """`expr` with each Max/Min that the ShapeEnv's facts decide replaced by its winner."""
        def decide(e):
            better = sympy.Le if type(e).__name__ == "Max" else sympy.Ge
            for a in e.args:
                if all(self.statically_known_true(better(b, a)) for b in e.args if b is not a):
                    return a
            return e
        return expr.replace(lambda e: isinstance(e, MAX_MIN), decide)

    def size_hint(self, expr) -> int:
        """The value traced with: for heuristics only."""
        if isinstance(expr, int):
            return expr
        expr = sympy.sympify(expr)
        if not expr.is_Integer and self.shape_env is not None:
            expr = expr.xreplace(self.var_to_val)
            expr = expr.xreplace({u: UNBACKED_HINT for u in expr.free_symbols if self.is_unbacked(u)})
        return int(expr)

    def upper_bound(self, expr) -> int | None:
        """The largest value `expr` takes for any size the graph accepts (the ShapeEnv's
        ranges: `mark_dynamic(x, 0, max=64)` bounds s0), or None when it is unbounded."""
        expr = sympy.sympify(expr)
        if expr.is_Integer or self.shape_env is None:
            return int(expr) if expr.is_Integer else None
        upper = self.shape_env.bound_sympy(expr).upper
        return int(upper) if upper.is_Integer else None

    def statically_known_true(self, cond) -> bool:
        cond = sympy.sympify(cond)
        if cond in (sympy.true, sympy.false):
            return bool(cond)
        if self.shape_env is None:
            return False
        return self.shape_env._maybe_evaluate_static(cond) == sympy.true

    def statically_known_equals(self, a, b) -> bool:
        return self.statically_known_true(sympy.Eq(sympy.sympify(a), sympy.sympify(b)))

    def statically_known_leq(self, a, b) -> bool:
        return self.statically_known_true(sympy.Le(sympy.sympify(a), sympy.sympify(b)))

    def statically_known_lt(self, a, b) -> bool:
        return self.statically_known_true(sympy.Lt(sympy.sympify(a), sympy.sympify(b)))

    def guard_equals(self, a, b):
        """`a`, relying on a == b: proved, or added to the ShapeEnv as a guard; raises
        SymbolicUnsupported when the traced sizes already disagree."""
        if self.statically_known_equals(a, b):
            return a
        if self.shape_env is None or self.size_hint(a) != self.size_hint(b):
            raise SymbolicUnsupported(f"{a} == {b} does not hold")
        self.shape_env.evaluate_expr(sympy.Eq(sympy.sympify(a), sympy.sympify(b)), hint=True)
        return a
