"""The define-by-run loop IR: what a tensor *is* before any code exists.

Mirrors `torch/_inductor/ir.py`. A value is described by how to compute one element:
`Pointwise(ranges, inner_fn)` where `inner_fn(index)` calls `ops.*`, or
`Reduction(ranges, reduction_ranges, reduction_type, inner_fn)` where
`inner_fn(index, rindex)` yields the values that are folded together. Made by lowering,
read by the scheduler and codegen. Storage is a `Buffer` (a name and a
`Layout`), a `StorageBox` (a value that may still be realized into a buffer) or a `View`
(indices re-mapped, never a copy): docs/design_notes.md. Simplified: one `View` class
instead of Inductor's many view nodes; a layout is fixed, contiguous, or an input's own.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import sympy
import torch

from ..ops_handler import PrintHandler
from ..virtualized import V, ops
from .indexing import index_vars, simplify_with_ranges
from .sizevars import SizeVarAllocator, as_expr, is_static

SUPPORTED_DTYPES = {
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
}


def contiguous_strides(size) -> list[int]:
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= max(s, 1) if is_static(s) else s
    return list(reversed(strides))


@dataclasses.dataclass
class Layout:
    device: torch.device
    dtype: torch.dtype
    size: list[int]
    stride: list[int]
    offset: int = 0

    def make_indexer(self) -> Callable[[list], sympy.Expr]:
        def indexer(index):
            assert len(index) == len(self.size), (index, self.size)
            return self.offset + sum((i * s for i, s, n in zip(index, self.stride, self.size) if n != 1),
                                     sympy.Integer(0))
        return indexer

    def storage_numel(self) -> int:
        if any(s == 0 for s in self.size):
            return 0
        return self.offset + 1 + sum((n - 1) * s for n, s in zip(self.size, self.stride))

    def __str__(self):
        return f"{str(self.dtype).replace('torch.', '')}{list(self.size)} stride={list(self.stride)}"


@dataclasses.dataclass
class MutationLayout(Layout):
    """The layout of a buffer computed straight into a graph input's memory (`x.add_(1)`, an
    optimizer's parameters: AOTAutograd ends the graph with `aten.copy_(input, new_value)`):
    the input's own size and strides; `target` names the input. Mirrors Inductor's
    `MutationLayoutSHOULDREMOVE`."""
    target: str = ""

    def __str__(self):
        return f"{super().__str__()} -> {self.target} (in place)"


class IRNode:
    def get_size(self) -> list[int]:
        raise NotImplementedError

    def get_dtype(self) -> torch.dtype:
        raise NotImplementedError

    def get_device(self) -> torch.device:
        raise NotImplementedError

    def make_loader(self) -> Callable:
        raise NotImplementedError

    def realize(self) -> "Buffer | None":
        """Make sure this value lives in memory; return the buffer if it is a whole one."""
        return None

    def numel(self) -> int:
        n = 1
        for s in self.get_size():
            n *= s
        return n


# --------------------------------------------------------------------------- loops
@dataclasses.dataclass
class Loops(IRNode):
    device: torch.device
    dtype: torch.dtype
    inner_fn: Callable
    ranges: list[int]
    #: FX nodes whose lowering built this body (inlined producers included)
    origins: set = dataclasses.field(default_factory=set, kw_only=True)

    def get_size(self):
        return list(self.ranges)

    def get_dtype(self):
        return self.dtype

    def get_device(self):
        return self.device

    def body_lines(self) -> list[str]:
        """The inner_fn printed with symbolic indices (PrintHandler)."""
        handler = PrintHandler()
        with V.set_ops_handler(handler):
            self._print_body(handler)
        return handler.lines

    def __str__(self):
        head = f"{type(self).__name__}({str(self.dtype).replace('torch.', '')}, ranges={self.ranges}"
        head += self._extra_repr() + ")"
        return head + "".join(f"\n    {line}" for line in self.body_lines())

    def _extra_repr(self):
        return ""


class Pointwise(Loops):
    def make_loader(self):
        return self.inner_fn

    def _print_body(self, handler):
        handler.lines.append(f"return {self.inner_fn(index_vars('i', self.ranges))}")

    def store_output(self, name, indexer, index, rindex=None):
        return ops.store(name, indexer(index), self.inner_fn(index))


@dataclasses.dataclass
class Reduction(Loops):
    reduction_ranges: list[int] = dataclasses.field(default_factory=list)
    reduction_type: str = "sum"
    src_dtype: torch.dtype = torch.float32
    #: which value of a multi-output reduction this buffer stores (ops_handler.MULTI_OUTPUT_REDUCTIONS:
    #: online softmax's row max is output 0, its sum of exp output 1; a kernel computing both
    #: runs the reduction once)
    output_index: int | None = None

    def _extra_repr(self):
        index = "" if self.output_index is None else f", output {self.output_index}"
        return f", reduction_ranges={self.reduction_ranges}, {self.reduction_type!r}{index}"

    def _print_body(self, handler):
        value = self.inner_fn(index_vars("i", self.ranges), index_vars("r", self.reduction_ranges))
        index = "" if self.output_index is None else f"[{self.output_index}]"
        handler.lines.append(f"return reduction({self.reduction_type!r}, {value}){index}")

    def store_output(self, name, indexer, index, rindex):
        value = self.inner_fn(index, rindex)
        acc = ops.reduction(self.dtype, self.src_dtype, self.reduction_type, value)
        if self.output_index is not None:
            acc = acc[self.output_index]
        return ops.store_reduction(name, indexer(index), acc)


# --------------------------------------------------------------------------- buffers
class Buffer(IRNode):
    def __init__(self, name: str | None, layout: Layout):
        self.name = name
        self.layout = layout

    def get_size(self):
        return list(self.layout.size)

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def get_name(self):
        return self.name

    def make_loader(self):
        indexer = self.layout.make_indexer()
        return lambda index: ops.load(self.name, indexer(index))

    def realize(self):
        return self

    def __str__(self):
        return f"{type(self).__name__} {self.name}: {self.layout}"


class InputBuffer(Buffer):
    """A graph input (or a constant tensor held by the graph)."""


class ComputedBuffer(Buffer):
    """A `Loops` node stored to memory: exactly what a kernel computes."""

    def __init__(self, name, layout, data: Loops):
        super().__init__(name, layout)
        self.data = data

    @property
    def origins(self) -> list[str]:
        """The ATen FX nodes this buffer was built from, inlined producers included."""
        return sorted(self.data.origins)

    def store_body(self, index, rindex=None):
        """Run the body for one iteration: `ops.store(...)` of the computed element."""
        return self.data.store_output(self.name, self.layout.make_indexer(), index, rindex)

    def get_reduction_ranges(self):
        return list(getattr(self.data, "reduction_ranges", []))

    def __str__(self):
        origins = f"  # from {', '.join(self.origins)}" if self.origins else ""
        body = "\n".join("  " + line for line in str(self.data).splitlines())
        return f"{self.name}: ComputedBuffer {self.layout}{origins}\n{body}"


class ExternKernel(Buffer):
    """A call to an ATen op at run time: `buf3 = aten.mm.default(buf1, arg2_1)`.

    `args`/`kwargs` hold IR nodes (realized into buffers or strided views) and plain values.
    `layout` is None when the op returns a tuple; `MultiOutput` nodes pick its items."""

    def __init__(self, name, layout, op, args, kwargs, reason="", origins=()):
        super().__init__(name, layout)
        self.op, self.args, self.kwargs, self.reason = op, args, kwargs, reason
        self.origins = list(origins)   # the FX nodes it was lowered from, as ComputedBuffer's (`op`: what it calls)

    def input_nodes(self) -> list[IRNode]:
        found = []

        def visit(a):
            if isinstance(a, IRNode):
                found.append(a)
            elif isinstance(a, (list, tuple)):
                for b in a:
                    visit(b)
        for a in list(self.args) + list(self.kwargs.values()):
            visit(a)
        return found

    def __str__(self):
        return f"{self.name}: ExternKernel {self.op} -> {self.layout or 'tuple'}  # {self.reason}"


class MultiOutput(Buffer):
    def __init__(self, name, layout, parent: ExternKernel, index: int):
        super().__init__(name, layout)
        self.parent, self.index = parent, index

    def __str__(self):
        return f"{self.name}: MultiOutput {self.parent.name}[{self.index}] {self.layout}"


# --------------------------------------------------------------------------- boxes and views
class StorageBox(IRNode):
    """Holds a value that may or may not be stored yet; `realize()` stores it."""

    def __init__(self, data: IRNode):
        self.data = data

    def get_size(self):
        return self.data.get_size()

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        return self.data.make_loader()

    def is_realized(self):
        return isinstance(self.data, Buffer)

    def realize(self, stride=None):
        """Store the value (contiguous unless `stride` is given) and return its buffer."""
        if isinstance(self.data, Loops):
            size = self.data.get_size()
            stride = list(stride) if stride is not None else contiguous_strides(size)
            layout = Layout(self.get_device(), self.get_dtype(), size, stride)
            self.data = V.graph.register_buffer(ComputedBuffer(None, layout, self.data))
        return self.data

    def __str__(self):
        return str(self.data)


class View(IRNode):
    """`data` seen through `reindex`: element `index` of the view is element
    `reindex(index)` of `data`. Every view op (reshape, permute, slice...) is one of these."""

    def __init__(self, data: IRNode, size: list[int], reindex: Callable[[list], list]):
        self.data, self.size, self.reindex = data, [as_expr(s) for s in size], reindex

    def get_size(self):
        return list(self.size)

    def get_dtype(self):
        return self.data.get_dtype()

    def get_device(self):
        return self.data.get_device()

    def make_loader(self):
        inner = self.data.make_loader()
        return lambda index: inner(self.reindex(index))

    def realize(self):
        self.data.realize()
        return None

    def __str__(self):
        idx = index_vars("i", self.size)
        return f"View(size={self.size}, {list(idx)} -> {self.reindex(idx)}) of\n  {self.data}"


def unwrap_buffer(node: IRNode) -> Buffer | None:
    while isinstance(node, StorageBox):
        node = node.data
    return node if isinstance(node, Buffer) else None


def _compose(outer, inner):
    return lambda index: inner(outer(index))


def strided_view_of(node: IRNode) -> tuple[Buffer, Layout] | None:
    """If `node` is a (chain of views of a) buffer whose index is affine in the loop
    variables, return that buffer and the strided layout that reads it: the view is then
    free at run time (`as_strided`). Otherwise None: it must be copied."""
    size = node.get_size()
    reindex = lambda index: index  # noqa: E731
    while isinstance(node, View):
        reindex, node = _compose(reindex, node.reindex), node.data
    if isinstance(node, ReinterpretView):   # e.g. as_strided: a buffer seen through its layout
        buf, indexer = node.data, node.layout.make_indexer()
    else:
        buf = unwrap_buffer(node)
        if buf is None:
            return None
        indexer = buf.layout.make_indexer()
    vars_ = index_vars("i", size)
    live = {v: 0 for v, n in zip(vars_, size) if n == 1}  # size-1 dims: index is always 0
    expr = sympy.sympify(indexer(reindex(vars_))).subs(live)
    expr = sympy.expand(simplify_with_ranges(expr, dict(zip(vars_, size))))
    offset = expr.subs({v: 0 for v in vars_})
    strides = [expr.coeff(v) if n != 1 else 0 for v, n in zip(vars_, size)]
    sizevars = V.graph.sizevars if V.has_graph() else SizeVarAllocator()   # outside a graph: static sizes
    if not all(_is_size(sympy.sympify(s), sizevars) for s in [offset, *strides]):
        return None
    rebuilt = offset + sum((s * v for s, v in zip(strides, vars_)), sympy.Integer(0))
    if sympy.expand(rebuilt - expr) != 0 or not all(sizevars.statically_known_leq(0, s) for s in [offset, *strides]):
        return None
    layout = Layout(buf.get_device(), buf.get_dtype(), size, _size1_strides(size, strides), as_expr(offset))
    return buf, layout


def _size1_strides(size, strides) -> list:
    """`strides` with a stride for each size-1 dim, which never moves the index but shows in
    `.stride()` (and ATen picks memory formats from it): the next dim's stride times its size,
    1 for the last, as eager's `view` and `unsqueeze` give it."""
    out, inner = list(strides), sympy.Integer(1)
    for k in reversed(range(len(size))):
        if size[k] == 1:
            out[k] = inner
        inner = out[k] * (size[k] if size[k] != 0 else 1)
    return [as_expr(s) for s in out]


def _is_size(expr, sizevars) -> bool:
    """An int, or an expression of size symbols only (no loop variable, no loaded index)."""
    return expr.is_Integer or all(sizevars.is_size_symbol(s) for s in expr.free_symbols)


class ReinterpretView(IRNode):
    """A buffer read through another strided layout, e.g. a transposed weight handed to an
    extern `mm`: in the wrapper it is `reinterpret(buf, size, stride, offset)`, no copy."""

    def __init__(self, data: Buffer, layout: Layout):
        self.data, self.layout = data, layout

    def get_size(self):
        return list(self.layout.size)

    def get_dtype(self):
        return self.layout.dtype

    def get_device(self):
        return self.layout.device

    def get_name(self):
        return self.data.get_name()

    def make_loader(self):
        indexer = self.layout.make_indexer()
        return lambda index: ops.load(self.data.get_name(), indexer(index))

    def realize(self):
        return None

    def __str__(self):
        return f"ReinterpretView({self.data.get_name()}, {self.layout}, offset={self.layout.offset})"
