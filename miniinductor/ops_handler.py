"""Every op a loop body may call, listed once, and the handlers that only *look* at a body.

Mirrors `torch/_inductor/ops_handler.py` (the `OpsHandler` protocol) and the
`KernelFormatterHandler` / `ReadWrites` recording in `torch/_inductor/dependencies.py`.
A handler is any object with a method per op below: `PrintHandler` prints a body,
`RecordingHandler` records which buffers it loads and stores, at which index (codegen/*
emits C++/Triton, ir/interpreter.py evaluates with torch).
"""
from __future__ import annotations

import dataclasses
import itertools

import sympy

UNARY_OPS = (
    "abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan "
    "sinh cosh tanh asinh acosh atanh erf erfc lgamma sigmoid relu floor ceil trunc round "
    "sign reciprocal logical_not bitwise_not isnan isinf signbit square"
).split()
BINARY_OPS = (
    "add sub mul truediv floordiv mod fmod pow maximum minimum atan2 hypot copysign "
    "eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or "
    "bitwise_xor bitwise_left_shift bitwise_right_shift"
).split()
#: ops with their own signatures (see the methods of PrintHandler)
SPECIAL_OPS = (
    "load store reduction store_reduction constant index_expr to_dtype "
    "indirect_indexing masked where"
).split()
ALL_OPS = UNARY_OPS + BINARY_OPS + SPECIAL_OPS
REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "online_softmax_reduce", "welford_reduce")
#: reductions that give several values at once, each stored by its own buffer (a Reduction
#: with an `output_index`), in one pass: "online_softmax_reduce" → (row max, sum of
#: exp(x - max)); "welford_reduce" → (mean, m2: the sum of squared deviations from the mean;
#: Inductor's third output, the weight, is left out: a row's count is its length)
MULTI_OUTPUT_REDUCTIONS = {"online_softmax_reduce": 2, "welford_reduce": 2}


def _fmt(x):
    if isinstance(x, sympy.Expr):
        return str(x)
    return repr(x) if isinstance(x, str) and not x.startswith("tmp") else str(x)


class PrintHandler:
    """Records a body as numbered lines: `tmp0 = ops.load('arg0_1', i0 + 4*i1)`."""

    def __init__(self):
        self.lines = []
        self._count = itertools.count()

    def _emit(self, text):
        name = f"tmp{next(self._count)}"
        self.lines.append(f"{name} = {text}")
        return name

    def __getattr__(self, name):
        if name not in UNARY_OPS and name not in BINARY_OPS:
            raise AttributeError(name)
        return lambda *args: self._emit(f"ops.{name}({', '.join(map(_fmt, args))})")

    def load(self, name, index):
        return self._emit(f"ops.load({name!r}, {index})")

    def store(self, name, index, value, mode=None):   # mode "atomic_add": name[index] += value (ext/scatter)
        self.lines.append(f"ops.store({name!r}, {index}, {value}{'' if mode is None else f', mode={mode!r}'})")

    def reduction(self, dtype, src_dtype, reduction_type, value):
        name = self._emit(f"ops.reduction({reduction_type!r}, {value}, dtype={dtype})")
        n = MULTI_OUTPUT_REDUCTIONS.get(reduction_type)
        return tuple(f"{name}[{k}]" for k in range(n)) if n else name

    def store_reduction(self, name, index, value):
        self.lines.append(f"ops.store_reduction({name!r}, {index}, {value})")

    def constant(self, value, dtype):
        return self._emit(f"ops.constant({value!r}, {dtype})")

    def index_expr(self, expr, dtype):
        return self._emit(f"ops.index_expr({expr}, {dtype})")

    def to_dtype(self, x, dtype):
        return self._emit(f"ops.to_dtype({x}, {dtype})")

    def indirect_indexing(self, x, size):
        var = self._emit(f"ops.indirect_indexing({x}, {size})")
        return sympy.Symbol(var, integer=True)

    def masked(self, mask, body, other):
        self.lines.append(f"# masked by {mask}:")
        return self._emit(f"ops.masked({mask}, {body()}, {other!r})")

    def where(self, cond, a, b):
        return self._emit(f"ops.where({cond}, {a}, {b})")


@dataclasses.dataclass(frozen=True)
class MemoryDep:
    """One buffer accessed at `index`, a SymPy expression of loop variables whose sizes
    are `ranges` ((variable, size) pairs; empty for whole-buffer extern accesses)."""
    name: str
    index: sympy.Expr
    ranges: tuple = ()

    def __str__(self):
        sizes = ", ".join(f"{v}<{n}" for v, n in self.ranges)
        return f"MemoryDep({self.name!r}, {self.index}{'; ' + sizes if sizes else ''})"


class RecordingHandler:
    """Runs a body and keeps only what it reads and writes (its MemoryDeps) and how many
    ops it runs; values are placeholders, so nothing is formatted (this runs often)."""

    def __init__(self):
        self.reads: list[MemoryDep] = []
        self.writes: list[MemoryDep] = []
        self.op_count = 0
        self.op_names: list[str] = []
        self._indirect = itertools.count()

    def __getattr__(self, name):
        if name not in ALL_OPS:
            raise AttributeError(name)

        def record(*args):
            self.op_count += 1
            self.op_names.append(name)
            return "tmp"
        return record

    def load(self, name, index):
        self.reads.append(MemoryDep(name, index))
        return "tmp"

    def store(self, name, index, value, mode=None):
        self.writes.append(MemoryDep(name, index))

    store_reduction = store

    def reduction(self, dtype, src_dtype, reduction_type, value):
        self.op_count += 1
        self.op_names.append("reduction")
        n = MULTI_OUTPUT_REDUCTIONS.get(reduction_type)
        return ("tmp",) * n if n else "tmp"

    def indirect_indexing(self, x, size):
        return sympy.Symbol(f"indirect{next(self._indirect)}", integer=True)

    def masked(self, mask, body, other):
        return body()
