"""What Triton text each `ops.*` call becomes: TritonOverrides, dtypes, literals, indices.

Mirrors `TritonOverrides` and `TritonPrinter` in `torch/_inductor/codegen/triton.py`
(kept in their own file here so triton.py holds only the kernel): each method takes the
operands' Triton text (and the dtype the op computes in) and returns an expression;
`TritonKernel` (triton.py) names the results with CSE. Also the reduction tables: the
initial value of each reduction and how two partial results combine.

Simplified: float16/bfloat16 values are computed in float32 (as Inductor does), and a
handful of ops that differ between torch and Triton (`//`, `%`, `max` of NaN, `pow` of
integers) call the small @triton.jit helpers in triton/runtime.py.
"""
from __future__ import annotations

import functools
import math

import torch
from sympy.printing.str import StrPrinter

from ..codegen.common import compute_dtype
from ..ops_handler import BINARY_OPS, UNARY_OPS

TRITON_TYPE = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}


def accumulator_dtype(reduction_type, dtype, value_dtype):
    """What a reduction accumulates in: sums and products in the compute dtype of the result
    (common.compute_dtype: float32 for float16/bfloat16), any and bools as int32 (Triton
    reduces no int1), the others in the values' dtype."""
    if reduction_type in ("sum", "prod"):
        return compute_dtype(dtype)
    return torch.int32 if reduction_type == "any" or value_dtype == torch.bool else value_dtype


def triton_literal(value, dtype=None) -> str:
    """A Python literal Triton accepts inside a kernel."""
    if isinstance(value, bool) or dtype == torch.bool:
        return "True" if value else "False"
    if dtype is not None and not dtype.is_floating_point:
        return str(int(value))
    if isinstance(value, float) or (dtype is not None and dtype.is_floating_point):
        value = float(value)
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    return str(value)


# --------------------------------------------------------------------------- index printing
class TritonPrinter(StrPrinter):
    """Prints SymPy index expressions as Triton/Python: FloorDiv → `//`, ModularIndexing →
    `// %`. Indices are non-negative, so Triton's truncating `//` is floor division."""

    def _operand(self, expr) -> str:
        """An operand of `//` or `%`: parenthesized unless it is a symbol or a number
        (`ModularIndexing(i1 + 1, 1, 2)` is `((i1 + 1) % 2)`, not `(i1 + 1 % 2)`)."""
        text = self._print(expr)
        atom = expr.is_Symbol or (expr.is_Integer and int(expr) >= 0) or type(expr).__name__ in ("FloorDiv", "ModularIndexing")
        return text if atom else f"({text})"

    def _print_FloorDiv(self, expr):
        return f"({self._operand(expr.args[0])} // {self._operand(expr.args[1])})"

    def _print_ModularIndexing(self, expr):
        base, div, mod = expr.args
        inner = self._operand(base) if div == 1 else f"({self._operand(base)} // {self._operand(div)})"
        return f"({inner} % {self._operand(mod)})"

    # size expressions (symbolic sizes: a stride Max(1, s0 - 2), an offset Mod(1, s0)): ints
    def _print_Mod(self, expr):
        return f"({self._operand(expr.args[0])} % {self._operand(expr.args[1])})"

    _print_PythonMod = _print_Mod

    def _print_Max(self, expr, fn="tl.maximum"):
        first, *rest = expr.args
        text = self._print(first)
        for arg in rest:
            text = f"{fn}({text}, {self._print(arg)})"
        return text

    def _print_Min(self, expr):
        return self._print_Max(expr, "tl.minimum")

    def _print_ClampIndex(self, expr):
        return f"tl.minimum(tl.maximum({self._print(expr.args[0])}, 0), {self._print(expr.args[1])})"

    def _print_Pow(self, expr):
        base, exp = expr.args
        if exp.is_Integer and int(exp) > 0:
            return "*".join([f"({self._print(base)})"] * int(exp))
        raise NotImplementedError(f"index expression {expr}")

    def _print_Rational(self, expr):
        raise NotImplementedError(f"non-integer index expression {expr}")

    # floats of the sizes (ir/sizevars.FLOAT_FUNCTIONS), in float64 as Python computes them
    def _double(self, expr) -> str:
        return repr(float(expr)) if expr.is_Number else f"{self._operand(expr)}.to(tl.float64)"

    def _print_Float(self, expr):   # every digit (StrPrinter gives 15)
        return repr(float(expr))

    def _print_ToFloat(self, expr):
        return self._double(expr.args[0])

    def _print_IntTrueDiv(self, expr):   # 4 / s0: real division
        return f"({self._double(expr.args[0])} / {self._double(expr.args[1])})"

    _print_FloatTrueDiv = _print_IntTrueDiv

    def _print_OpaqueUnaryFn_sqrt(self, expr):
        return f"libdevice.sqrt({self._double(expr.args[0])})"

    def _print_FloatPow(self, expr):
        return f"libdevice.pow({self._double(expr.args[0])}, {self._double(expr.args[1])})"

    def _print_TruncToInt(self, expr, fn="trunc"):   # back to an int size: int(2.5*float(s0))
        return f"libdevice.{fn}({self._print(expr.args[0])}).to(tl.int64)"

    def _print_FloorToInt(self, expr):
        return self._print_TruncToInt(expr, "floor")

    def _print_CeilToInt(self, expr):
        return self._print_TruncToInt(expr, "ceil")


@functools.lru_cache(maxsize=4096)
def texpr(expr) -> str:
    return TritonPrinter().doprint(expr)


# --------------------------------------------------------------------------- TritonOverrides
def _is_float(dtype):
    return dtype is None or dtype.is_floating_point


class TritonOverrides:
    """ops name → Triton expression. Arguments are already-named variables; `dtype` is the
    type they compute in (after promotion). Where Triton's operators differ from torch's
    (integer division, %, NaN in max, bools), the dtype picks the right spelling."""

    # -- arithmetic
    @staticmethod
    def add(a, b, dtype):
        return f"{a} | {b}" if dtype == torch.bool else f"{a} + {b}"

    sub = staticmethod(lambda a, b, dtype: f"{a} - {b}")
    mul = staticmethod(lambda a, b, dtype: f"{a} & {b}" if dtype == torch.bool else f"{a} * {b}")

    @staticmethod
    def truediv(a, b, dtype):
        # the lowering uses truediv on integers for C-style truncating division
        return f"{a} / {b}" if _is_float(dtype) else f"{a} // {b}"

    @staticmethod
    def floordiv(a, b, dtype):
        return f"_floordiv_float({a}, {b})" if _is_float(dtype) else f"_floordiv_int({a}, {b})"

    mod = staticmethod(lambda a, b, dtype: f"_python_mod({a}, {b})")
    fmod = staticmethod(lambda a, b, dtype: f"{a} % {b}")  # fmod for floats, C % for ints

    @staticmethod
    def pow(a, b, dtype):
        return f"libdevice.pow({a}, {b})" if _is_float(dtype) else f"_pow_int({a}, {b})"

    @staticmethod
    def maximum(a, b, dtype):
        if dtype == torch.bool:
            return f"{a} | {b}"
        return f"tl.where(({a} != {a}) | ({a} > {b}), {a}, {b})" if _is_float(dtype) else f"tl.maximum({a}, {b})"

    @staticmethod
    def minimum(a, b, dtype):
        if dtype == torch.bool:
            return f"{a} & {b}"
        return f"tl.where(({a} != {a}) | ({a} < {b}), {a}, {b})" if _is_float(dtype) else f"tl.minimum({a}, {b})"

    atan2 = staticmethod(lambda a, b, dtype: f"libdevice.atan2({a}, {b})")
    hypot = staticmethod(lambda a, b, dtype: f"libdevice.hypot({a}, {b})")
    copysign = staticmethod(lambda a, b, dtype: f"libdevice.copysign({a}, {b})")

    # -- comparisons and logic (results are bool: tl.int1)
    eq = staticmethod(lambda a, b, dtype: f"{a} == {b}")
    ne = staticmethod(lambda a, b, dtype: f"{a} != {b}")
    lt = staticmethod(lambda a, b, dtype: f"{a} < {b}")
    le = staticmethod(lambda a, b, dtype: f"{a} <= {b}")
    gt = staticmethod(lambda a, b, dtype: f"{a} > {b}")
    ge = staticmethod(lambda a, b, dtype: f"{a} >= {b}")

    @staticmethod
    def _truth(x, dtype):
        return x if dtype == torch.bool else f"({x} != 0)"

    logical_and = staticmethod(lambda a, b, dtype: f"{TritonOverrides._truth(a, dtype)} & {TritonOverrides._truth(b, dtype)}")
    logical_or = staticmethod(lambda a, b, dtype: f"{TritonOverrides._truth(a, dtype)} | {TritonOverrides._truth(b, dtype)}")
    logical_xor = staticmethod(lambda a, b, dtype: f"{TritonOverrides._truth(a, dtype)} ^ {TritonOverrides._truth(b, dtype)}")
    logical_not = staticmethod(lambda x, dtype: f"{x} == 0")
    bitwise_and = staticmethod(lambda a, b, dtype: f"{a} & {b}")
    bitwise_or = staticmethod(lambda a, b, dtype: f"{a} | {b}")
    bitwise_xor = staticmethod(lambda a, b, dtype: f"{a} ^ {b}")

    @staticmethod
    def bitwise_left_shift(a, b, dtype):
        # ATen: by a negative amount or by the bit width or more, 0 (in Triton: undefined)
        return f"tl.where(({b} >= 0) & ({b} < {torch.iinfo(dtype).bits}), {a} << {b}, 0)"

    @staticmethod
    def bitwise_right_shift(a, b, dtype):
        # ATen: out of range, the sign fill (signed) or 0 (unsigned)
        bits = torch.iinfo(dtype).bits
        if dtype.is_signed:
            return f"{a} >> tl.where(({b} < 0) | ({b} > {bits - 1}), {bits - 1}, {b})"
        return f"tl.where({b} < {bits}, {a} >> {b}, 0)"

    @staticmethod
    def bitwise_not(x, dtype):
        if dtype == torch.bool:
            return f"{x} == 0"
        if dtype == torch.uint8:   # the interpreter's ~ builds -1 as a uint8 NumPy array: an error in NumPy 2
            return f"(~{x}.to(tl.int32)).to(tl.uint8)"
        return f"~{x}"

    # -- unary math
    neg = staticmethod(lambda x, dtype: f"-{x}")
    abs = staticmethod(lambda x, dtype: x if dtype == torch.bool else f"tl.abs({x})")
    square = staticmethod(lambda x, dtype: f"{x} * {x}")
    reciprocal = staticmethod(lambda x, dtype: f"1.0 / {x}")
    relu = staticmethod(lambda x, dtype: f"tl.where({x} < 0, 0, {x})")  # keeps NaN
    sigmoid = staticmethod(lambda x, dtype: f"1.0 / (1.0 + libdevice.exp(-{x}))")

    @staticmethod
    def sign(x, dtype):
        if dtype == torch.bool:
            return x
        t = TRITON_TYPE.get(dtype, "tl.float32")
        return f"({x} > 0).to({t}) - ({x} < 0).to({t})"  # sign(NaN) is 0, as in eager

    @staticmethod
    def isnan(x, dtype):
        return f"{x} != {x}"  # always False for integers

    @staticmethod
    def isinf(x, dtype):
        return f'tl.abs({x}) == float("inf")' if _is_float(dtype) else f"{x} != {x}"

    @staticmethod
    def signbit(x, dtype):
        if dtype == torch.float64:
            return f"{x}.to(tl.int64, bitcast=True) < 0"
        if _is_float(dtype):
            return f"{x}.to(tl.int32, bitcast=True) < 0"
        return f"{x} < 0"


#: unary float functions computed by libdevice (accurate to an ulp or two, like eager)
LIBDEVICE_UNARY = {
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf", "erfc": "erfc",
    "lgamma": "lgamma", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "nearbyint",
}
for _name, _fn in LIBDEVICE_UNARY.items():
    if _name in ("floor", "ceil", "trunc", "round"):  # integers are already integral
        setattr(TritonOverrides, _name, staticmethod(
            lambda x, dtype, _f=_fn: f"libdevice.{_f}({x})" if _is_float(dtype) else x))
    else:
        setattr(TritonOverrides, _name, staticmethod(lambda x, dtype, _f=_fn: f"libdevice.{_f}({x})"))

BOOL_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
               "logical_not", "isnan", "isinf", "signbit"}
assert all(hasattr(TritonOverrides, op) for op in UNARY_OPS + BINARY_OPS)


# --------------------------------------------------------------------------- reductions
def reduction_identity(reduction_type, dtype):
    """The value an element adds nothing with: a masked-off element of the reduction."""
    if reduction_type in ("sum", "any"):
        return 0
    if reduction_type == "prod":
        return 1
    largest = reduction_type in ("min", "argmin")
    if dtype == torch.bool:
        return largest
    if dtype.is_floating_point:
        return math.inf if largest else -math.inf
    info = torch.iinfo(dtype)
    return info.max if largest else info.min


def reduction_init(reduction_type, dtype) -> str:
    return triton_literal(reduction_identity(reduction_type, dtype), dtype)


#: persistent form: the block-shaped masked values → one value per row ([XBLOCK, 1])
REDUCE_ROW = {
    "sum": "tl.reduce({v}, 1, _sum_combine)[:, None]",
    "prod": "tl.reduce({v}, 1, _prod_combine)[:, None]",
    "max": "tl.reduce({v}, 1, _max_combine)[:, None]",
    "min": "tl.reduce({v}, 1, _min_combine)[:, None]",
}
#: looped form: fold one chunk into the block-shaped accumulator
COMBINE = {
    "sum": "{acc} + {v}", "prod": "{acc} * {v}", "max": "_max_combine({acc}, {v})",
    "min": "_min_combine({acc}, {v})",
}
