"""Evaluate loop IR with torch tensors: a reference value for any buffer, no codegen.

Mirrors nothing in Inductor directly (its closest cousin is the accuracy minifier's
"run the IR" mode): it is the fourth reading of an `inner_fn` -- printed, analysed,
compiled, and here *interpreted*. `InterpreterHandler` runs a body once for all indices at
once: each loop variable is bound to an `arange` tensor shaped to broadcast along its own
dimension, so `ops.load(name, i0*8 + i1)` becomes a gather from the buffer's memory.

    values = run_graph(graph, [x, y])      # every buffer of a GraphLowering, in order

Simplified: it allocates everything and runs in eager PyTorch, so it is slow and meant for
tests and debugging; float16/bfloat16 math happens in those dtypes (codegen uses float32).
"""
from __future__ import annotations

import sympy
import torch

from ..ops_handler import BINARY_OPS, UNARY_OPS
from ..virtualized import V
from .indexing import FloorDiv, ModularIndexing, evaluate, index_vars
from .nodes import ComputedBuffer, ExternKernel, InputBuffer, MultiOutput, ReinterpretView

TORCH_OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "floordiv": torch.floor_divide,
    "mod": torch.remainder, "fmod": torch.fmod, "pow": torch.pow, "maximum": torch.maximum,
    "minimum": torch.minimum, "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "bitwise_left_shift": torch.bitwise_left_shift, "bitwise_right_shift": torch.bitwise_right_shift,
    "relu": torch.relu, "round": torch.round, "square": torch.square, "lgamma": torch.lgamma,
}
REDUCE = {
    "sum": lambda v: v.sum(-1), "prod": lambda v: v.prod(-1), "max": lambda v: v.amax(-1),
    "min": lambda v: v.amin(-1), "argmax": lambda v: v.argmax(-1), "argmin": lambda v: v.argmin(-1),
    "any": lambda v: v.any(-1),
}


def flat_storage(t: torch.Tensor) -> torch.Tensor:
    """A 1-d view of the memory `t` spans, starting at its first element."""
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    return t.as_strided((span,), (1,))


class InterpreterHandler:
    def __init__(self, memory: dict[str, torch.Tensor], env: dict):
        self.memory, self.env = memory, env   # buffer name → tensor; symbol → index tensor
        self._masks: list = []                # the conditions of the ops.masked we are inside
        self.reduce_shape = None

    def __getattr__(self, name):
        if name in TORCH_OPS:
            return TORCH_OPS[name]
        if name in UNARY_OPS or name in BINARY_OPS:
            return getattr(torch, name)
        raise AttributeError(name)

    def _index(self, index):
        return torch.as_tensor(evaluate(sympy.sympify(index), self.env))

    def load(self, name, index):
        flat = flat_storage(self.memory[name])
        index = sympy.sympify(index)
        self._check_digits(name, index)
        idx = self._index(index)
        if self._masks:  # inside ops.masked: positions that are masked off may be out of bounds
            idx = idx.clamp(0, max(flat.numel() - 1, 0))
        return flat[idx] if flat.numel() else torch.zeros(idx.shape, dtype=flat.dtype)

    def _check_digits(self, name, index):
        """Codegen prints FloorDiv/ModularIndexing as C's `/` and `%` (Triton's `//` and
        `%`), which truncate toward zero: right only when the base is >= 0. A load whose
        base goes negative where it happens (its mask is on) would read the wrong address
        on a GPU -- or outside the buffer -- while floor semantics here read a valid one."""
        for digit in index.atoms(FloorDiv, ModularIndexing):
            negative = self._index(digit.args[0]) < 0
            for mask in self._masks:
                negative = negative & torch.as_tensor(mask, dtype=torch.bool)
            if bool(negative.any()):
                raise AssertionError(f"load of {name} at {index}: {digit.args[0]} < 0 where the load happens")

    def store(self, name, index, value, mode=None):
        flat = flat_storage(self.memory[name])   # (a constant index or value is a CPU tensor)
        idx, value = torch.broadcast_tensors(self._index(index).to(flat.device),
                                             torch.as_tensor(value).to(flat.device))
        flat.index_put_((idx.reshape(-1),), value.reshape(-1).to(flat.dtype), accumulate=mode == "atomic_add")

    store_reduction = store

    def truediv(self, a, b):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        if a.dtype.is_floating_point or b.dtype.is_floating_point:
            return torch.div(a, b)
        return torch.div(a, b, rounding_mode="trunc")  # C semantics, as in the C++ kernels

    def rsqrt(self, x):
        return torch.rsqrt(x)

    def sign(self, x):
        return torch.sign(x)

    def reciprocal(self, x):
        return torch.reciprocal(x)

    def constant(self, value, dtype):
        return torch.tensor(value, dtype=dtype)

    def index_expr(self, expr, dtype):
        return self._index(expr).to(dtype)

    def to_dtype(self, x, dtype):
        return torch.as_tensor(x).to(dtype)

    def where(self, cond, a, b):
        return torch.where(cond, a, b)

    def indirect_indexing(self, x, size):
        symbol = sympy.Symbol(f"indirect{len(self.env)}", integer=True)
        self.env[symbol] = torch.where(x < 0, x + size, x).long()
        return symbol

    def masked(self, mask, body, other):
        self._masks.append(mask)
        try:
            value = torch.as_tensor(body())
        finally:
            self._masks.pop()
        return torch.where(mask, value, torch.tensor(other, dtype=value.dtype))

    def reduction(self, dtype, src_dtype, reduction_type, value):
        value = torch.as_tensor(value).broadcast_to(self.reduce_shape)
        n_outer = len(self.reduce_shape) - self._n_reduction
        value = value.reshape(*self.reduce_shape[:n_outer], -1)   # [*ranges, prod(reduction_ranges)]
        if value.shape[-1] == 0 and reduction_type in ("max", "min"):
            raise RuntimeError("max/min of an empty reduction")
        if reduction_type in ("sum", "prod") and dtype.is_floating_point:
            value = value.to(dtype)
        if reduction_type == "online_softmax_reduce":   # (max, sum of exp(x - max)); max -inf: exp(x)
            m = value.amax(-1, keepdim=True)
            s = torch.exp(value - torch.where(m == float("-inf"), 0.0, m)).sum(-1)
            return m.squeeze(-1).to(dtype), s.to(dtype)
        if reduction_type == "welford_reduce":   # (mean, m2), here in two passes
            mean = value.mean(-1, keepdim=True)
            return mean.squeeze(-1).to(dtype), (value - mean).square().sum(-1).to(dtype)
        return REDUCE[reduction_type](value).to(dtype)


def _bind(ranges, device=None) -> tuple[list, dict]:
    """Loop variables as sympy symbols and, for each, an arange broadcast along its dim."""
    symbols = index_vars("i", ranges)
    env = {}
    for k, (sym, n) in enumerate(zip(symbols, ranges)):
        shape = [1] * len(ranges)
        shape[k] = n
        env[sym] = torch.arange(n, device=device).reshape(shape)
    return symbols, env


def evaluate_buffer(buf: ComputedBuffer, memory: dict[str, torch.Tensor]) -> torch.Tensor:
    """Allocate `buf` with its layout and run its body for every index; return it."""
    lay = buf.layout
    out = torch.empty_strided(lay.size, lay.stride, dtype=lay.dtype, device=lay.device)
    memory[buf.get_name()] = out
    target = getattr(buf, "target", None)   # ext/scatter's: stores into a copy of `target`, over its source's loops
    if target is not None:
        out.copy_(memory[target])
    ranges, rranges = buf.data.ranges if target is not None else buf.get_size(), buf.get_reduction_ranges()
    symbols, env = _bind(list(ranges) + list(rranges), lay.device)
    handler = InterpreterHandler(memory, env)
    handler.reduce_shape, handler._n_reduction = list(ranges) + list(rranges), len(rranges)
    outer, inner = symbols[:len(ranges)], symbols[len(ranges):]
    with V.set_ops_handler(handler):
        if rranges:
            _store_reduction(buf, handler, outer, inner)
        else:
            buf.store_body(outer, [])
    return out


def _store_reduction(buf, handler, outer, inner):
    data = buf.data
    value = data.inner_fn(outer, inner)
    acc = handler.reduction(data.dtype, data.src_dtype, data.reduction_type, value)
    if data.output_index is not None:
        acc = acc[data.output_index]
    full_index = buf.layout.make_indexer()(outer)
    outer_env = {k: v for k, v in handler.env.items() if k not in inner}
    idx = torch.as_tensor(evaluate(sympy.sympify(full_index), outer_env))
    if idx.dim() > len(outer):
        idx = idx.reshape(idx.shape[:len(outer)])
    flat = flat_storage(handler.memory[buf.get_name()])
    idx, acc = torch.broadcast_tensors(idx.to(flat.device), acc.to(flat.device))
    flat[idx.reshape(-1)] = acc.reshape(-1).to(flat.dtype)


def _arg(value, memory):
    if isinstance(value, ReinterpretView):
        lay = value.layout
        base = memory[value.get_name()]
        return base.as_strided(lay.size, lay.stride, base.storage_offset() + lay.offset)
    if hasattr(value, "get_name") and value.get_name() in memory:
        return memory[value.get_name()]
    if isinstance(value, (list, tuple)):
        return type(value)(_arg(v, memory) for v in value)
    return value


def runs_as_aten(buf) -> bool:
    """Whether `run_extern` computes `buf`: an ExternKernel, a MultiOutput, or an extension's
    buffer that names the ATen call computing its value (`op`, `args`, `kwargs`: a GEMM template)."""
    return isinstance(buf, (ExternKernel, MultiOutput)) or hasattr(buf, "op")


def run_extern(buf, memory: dict[str, torch.Tensor]) -> torch.Tensor:
    """Run an ExternKernel's ATen call (or another `runs_as_aten` buffer's, or pick a MultiOutput's item) on tensors in `memory`."""
    if isinstance(buf, MultiOutput):
        return memory[buf.parent.get_name()][buf.index]
    return buf.op(*_arg(list(buf.args), memory), **{k: _arg(v, memory) for k, v in buf.kwargs.items()})


def run_graph(graph, inputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Evaluate every buffer of a lowered graph; return {buffer name: tensor}."""
    memory = dict(zip(graph.graph_input_names, inputs))
    memory.update(graph.constants)
    with V.set_graph_handler(graph):
        for buf in graph.buffers:
            if isinstance(buf, ComputedBuffer):
                evaluate_buffer(buf, memory)
            elif runs_as_aten(buf):
                memory[buf.get_name()] = run_extern(buf, memory)
    return memory


def graph_outputs(graph, memory) -> list:
    return [_arg(o, memory) if not isinstance(o, InputBuffer) else memory[o.get_name()] for o in graph.outputs]



