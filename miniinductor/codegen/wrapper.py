"""Wrapper codegen: the generated Python module whose `call(args)` runs one graph.

Mirrors `torch/_inductor/codegen/wrapper.py`. The module holds every kernel's source (C++:
one library, built once, cached on disk, loaded with ctypes; Triton: one module per kernel,
its launcher bound to the kernel's name) and a `call` that allocates each buffer, launches
kernels and extern ATen calls in schedule order, frees buffers after their last use (or hands
their memory to a later buffer, memory_planning.py) and returns the outputs. With symbolic
sizes, `call` first reads each size symbol from the inputs (`s0 = arg0_1.size(0)`, as
Inductor's does); C++ kernels get the symbols as `c_int64(s0)`. Simplified: buffers are plain
torch tensors, kernels get raw pointers through ctypes; no AOT packaging. `cpp_wrapper=True`
writes the same steps in C++ (ext/cpp_wrapper/codegen.py overrides `_kernel_lines`,
`_extern_lines`, `_alloc`).
"""
from __future__ import annotations

import math

import sympy
import torch

from ..ir.indexing import pexpr
from ..ir.nodes import Buffer, ComputedBuffer, Layout, MultiOutput, ReinterpretView
from ..ir.sizevars import SymbolicUnsupported
from ..passes import WRAPPER_IMPORTS
from ..scheduler import FusedGroup
from ..virtualized import V
from .common import GeneratedKernel, IndentedBuffer
from .memory_planning import MemoryPlan, Step, freeable_inputs, may_alias, nbytes, plan_memory


def pysize(sizes) -> str:
    """A size or stride tuple as Python: `(8, 16)`, or `(s0, 16)` with the size symbols."""
    if all(isinstance(s, int) for s in sizes):
        return str(tuple(sizes))
    return f"({', '.join(map(pexpr, sizes))}{',' if len(sizes) == 1 else ''})"


def pyrepr(value) -> str:
    """A Python expression that rebuilds `value` inside the wrapper."""
    if isinstance(value, ReinterpretView):
        lay = value.layout
        return f"reinterpret({value.get_name()}, {pysize(lay.size)}, {pysize(lay.stride)}, {pexpr(lay.offset)})"
    if isinstance(value, sympy.Expr):   # a size symbol or expression (an output, an extern's argument)
        return pexpr(value)
    if isinstance(value, Buffer):
        return value.get_name()
    if isinstance(value, (list, tuple)):
        inner = ", ".join(pyrepr(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        return op_path(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {pyrepr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def op_path(op) -> str:
    """How the wrapper names an op: torch.ops.aten.mm.default, torch.ops.higher_order.X."""
    if isinstance(op, torch._ops.OpOverload):
        return f"torch.ops.{op.namespace}.{op._opname}.{op._overloadname}"
    if isinstance(op, torch._ops.HigherOrderOperator):
        return f"torch.ops.higher_order.{op.name()}"
    if op.__module__ == "_operator":   # a size computation left in the graph (`u0 >= 0`)
        return f"operator.{op.__name__}"
    return f"{op.__module__}.{op.__name__}"


aten = torch.ops.aten
#: matmuls called through torch's Python bindings, as Inductor's `extern_kernels` are: the
#: OpOverload (`torch.ops.aten.addmm.default`) matches its arguments against the schema, a
#: cost per call that shows (2-core EPYC) in a batch-1 MLP's per-call overhead. Their outputs are always
#: new contiguous tensors, the layout their meta functions promise: no check_layout after them.
EXTERN_KERNELS = {aten.mm.default: "torch.mm", aten.addmm.default: "torch.addmm", aten.bmm.default: "torch.bmm",
                  aten.baddbmm.default: "torch.baddbmm", aten._addmm_activation.default: "torch._addmm_activation"}
#: ... and those whose output layout is checked (a convolution's: less per call than its OpOverload)
BINDINGS = {aten.convolution.default: "torch.convolution"}


def extern_arg(value):
    """`value` as an extern op's argument. A view's dims of size 1 get the strides a contiguous
    tensor would have (the index analysis gives them 0, which BLAS takes for a leading dimension
    too small: ATen would copy the matrix at every call); a view that is then its buffer's own
    layout is passed as the buffer itself (no `reinterpret` at run time)."""
    if isinstance(value, (list, tuple)):
        return type(value)(extern_arg(v) for v in value)
    if isinstance(value, dict):
        return {k: extern_arg(v) for k, v in value.items()}
    if not isinstance(value, ReinterpretView):
        return value
    lay, stride = value.layout, list(value.layout.stride)
    for i in reversed(range(len(stride))):
        if lay.size[i] == 1:
            stride[i] = stride[i + 1] * max(lay.size[i + 1], 1) if i + 1 < len(stride) else 1
    base = value.data.layout
    if lay.offset == 0 and (list(lay.size), stride) == (list(base.size), list(base.stride)):
        return value.data
    return ReinterpretView(value.data, Layout(lay.device, lay.dtype, list(lay.size), stride, lay.offset))


def _names_in(value) -> list[str]:
    if isinstance(value, (Buffer, ReinterpretView)):
        return [value.get_name()]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _names_in(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _names_in(v)]
    return []


class WrapperCodeGen:
    def __init__(self, graph, scheduler, kernels: dict[str, GeneratedKernel], backend: str, config):
        self.graph, self.scheduler = graph, scheduler
        self.kernels = kernels    # kernel name → its GeneratedKernel
        self.backend, self.config = backend, config

    def _steps(self) -> list[tuple[Step, list[str]]]:
        """Each step of `call` (a kernel launch or an extern call) and its code lines."""
        steps = []
        for item in self.scheduler.schedule:
            if isinstance(item, FusedGroup):
                kernel = self.kernels[item.kernel_name]
                inplace = kernel.inplace
                allocs = [n for n in item.get_names() if n not in kernel.removed and n not in inplace]
                defines = set(allocs) | set(inplace)
                step = Step(kernel.name, allocs, set(kernel.args), defines, inplace=dict(inplace))
                steps.append((step, self._kernel_lines(kernel)))
            else:
                node = item.node
                step = Step(f"extern {node.get_name()}", [], set(self._extern_reads(node)), {node.get_name()},
                            may_alias=may_alias(node))
                lines = self._extern_lines(node)
                binds = [f"{sym} = {node.get_name()}{source}  # a data-dependent size"
                         for sym, source in self.graph.unbacked_bindings.get(node.get_name(), [])]
                steps.append((step, lines[:1] + binds + lines[1:]))
        return steps

    @staticmethod
    def _kernel_lines(kernel) -> list[str]:
        """The lines that launch `kernel` (after taking over its in-place outputs' memory)."""
        if kernel.language == "cpp":   # C functions take raw pointers (declared c_void_p) and int64 sizes ...
            ptrs = ", ".join([f"{n}.data_ptr()" for n in kernel.args] + list(kernel.size_args))
        else:                          # ... Triton launchers take the tensors
            ptrs = ", ".join(kernel.args + kernel.size_args)
        lines = [f"{out} = {src}  # {out} -> {src} (in place): the input's new value" if out in kernel.mutated
                 else f"{out} = {src}  # in-place: {out} is written over {src}, which dies here"
                 for out, src in kernel.inplace.items()]
        return [*lines, f"{kernel.name}({ptrs})  # {', '.join(kernel.origins)}"]

    def plan_nbytes(self, name: str) -> int:
        with V.set_graph_handler(self.graph):   # symbolic sizes count at their traced values
            return nbytes(self.graph.get_buffer(name))

    def memory_plan(self) -> MemoryPlan:
        steps = [s for s, _ in self._steps()]
        extern_inputs = {n for s in steps if s.may_alias for n in s.reads}
        keep = set(_names_in(list(self.graph.outputs))) | set(self.scheduler.mutations)   # (inputs' memory)
        return plan_memory(steps, self.graph.get_buffer, keep, extern_inputs, freeable_inputs(self.graph.module))

    def _alloc(self, buf: ComputedBuffer, plan: MemoryPlan) -> str:
        lay = buf.layout
        if buf.get_name() in plan.reuse:
            old = plan.reuse[buf.get_name()]
            old_lay = self.graph.get_buffer(old).layout
            if (list(old_lay.size), list(old_lay.stride)) == (list(lay.size), list(lay.stride)):   # no view to make
                return f"{buf.get_name()} = {old}; del {old}  # reuse"
            return f"{buf.get_name()} = reinterpret({old}, {pysize(lay.size)}, {pysize(lay.stride)}, 0); del {old}  # reuse"
        if lay.device.type == "cpu" or lay.device == self._guarded_device():
            return (f"{buf.get_name()} = empty_strided_{lay.device.type}"
                    f"({pysize(lay.size)}, {pysize(lay.stride)}, {lay.dtype})")
        return (f"{buf.get_name()} = empty_strided({pysize(lay.size)}, {pysize(lay.stride)}, "
                f"dtype={lay.dtype}, device={pyrepr(lay.device)})")

    def _guarded_device(self):
        """The CUDA device `call` makes current (so that empty_strided_cuda allocates there)."""
        device = self.graph.current_device()
        return device if device.type == "cuda" and device.index is not None else None

    @staticmethod
    def _extern_reads(node) -> list[str]:
        if isinstance(node, MultiOutput):
            return [node.parent.get_name()]
        return _names_in(list(node.args)) + _names_in(node.kwargs)

    @staticmethod
    def _extern_lines(node) -> list[str]:
        name = node.get_name()
        if isinstance(node, MultiOutput):
            lay = node.layout
            return [f"{name} = check_layout({node.parent.get_name()}[{node.index}], "
                    f"{pysize(lay.size)}, {pysize(lay.stride)})"]
        args = ", ".join([pyrepr(extern_arg(a)) for a in node.args] +
                         [f"{k}={pyrepr(extern_arg(v))}" for k, v in node.kwargs.items()])
        if node.op in EXTERN_KERNELS:
            return [f"{name} = {EXTERN_KERNELS[node.op]}({args})  # {node.op}"]
        line = f"{name} = {BINDINGS[node.op]}({args})  # {node.op}" if node.op in BINDINGS else f"{name} = {op_path(node.op)}({args})"
        if node.layout is None:
            return [line]
        lay = node.layout
        return [line, f"{name} = check_layout({name}, {pysize(lay.size)}, {pysize(lay.stride)})"]

    def _kernel_definitions(self, code):
        names = list(self.kernels)
        if self.backend == "cpp":  # one C++ library for the whole graph
            code.writeline("CPP_SOURCE = r'''")
            code.lines.extend("\n\n".join(k.source for k in self.kernels.values()).splitlines())
            code.writeline("'''")
            arg_counts = {name: (len(kernel.args), len(kernel.size_args)) for name, kernel in self.kernels.items()}
            code.writeline(f"_kernels = load_kernels(CPP_SOURCE, {arg_counts!r}, cxx={self.config.cxx!r})")
            code.writelines(f"{name} = _kernels[{name!r}]" for name in names)
        else:  # one Python module per Triton kernel (triton.jit needs a real file)
            interpret = self.graph.current_device().type == "cpu"
            for name, kernel in self.kernels.items():
                code.writeline(f"{name} = load_module(r'''")
                code.lines.extend(kernel.source.splitlines())
                code.writeline(f"''', interpret={interpret}).launch_{name}")
        code.writeline("")

    def _output_expr(self, value) -> str:
        return pyrepr(value)

    def _bind_symbols(self) -> list[str]:
        """`s0 = arg0_1.size(0)`: each size symbol read from the first input that shows it
        bare (a SymInt input, or a tensor input's size, stride or offset), as Inductor's
        wrapper does. SymbolicUnsupported if a symbol the code needs is not found so."""
        lines, bound = [], set()

        def bind(expr, source):
            if isinstance(expr, sympy.Symbol) and expr not in bound:
                bound.add(expr)
                lines.append(f"{expr} = {source}")
        for name in self.graph.graph_input_names:
            if name in self.graph.symbol_inputs:
                bind(self.graph.symbol_inputs[name], name)
            elif name in self.graph.graph_inputs:
                lay = self.graph.graph_inputs[name].layout
                for k, size in enumerate(lay.size):
                    bind(size, f"{name}.size({k})")
                for k, stride in enumerate(lay.stride):
                    bind(stride, f"{name}.stride({k})")
        needed = {str(s) for e in self._size_exprs() for s in self.graph.sizevars.free_symbols(e)}
        needed |= {s for kernel in self.kernels.values() for s in kernel.size_args}
        unbacked = {str(sym) for pairs in self.graph.unbacked_bindings.values() for sym, _ in pairs}
        missing = needed - set(map(str, bound)) - unbacked   # (those are bound after the op that makes them)
        if missing:
            raise SymbolicUnsupported(f"the wrapper cannot read {', '.join(sorted(missing))} from the inputs")
        return lines

    def _size_exprs(self):
        """Every size expression `call` evaluates (buffer layouts, outputs; kernels' size
        arguments are counted apart)."""
        for buf in self.graph.buffers:
            if buf.layout is not None:
                yield from [*buf.layout.size, *buf.layout.stride, buf.layout.offset]
        yield from (o for o in self.graph.outputs if isinstance(o, sympy.Expr))

    def generate(self, plan: MemoryPlan, record: bool = False) -> str:
        """The wrapper module's source, freeing and reusing as `plan` says. record=True (tools/debug/accuracy.py): after each step,
        `call` hands every buffer it defined to the module's `record(name, tensor)` (not
        those an in-place output of the same step has already written over)."""
        code = IndentedBuffer()
        code.writelines([
            f"# miniinductor generated wrapper for {self.graph.name}",
            "import math  # noqa: F401  (floats of the sizes: math.sqrt(s0))",
            "import operator  # noqa: F401  (size computations: operator.ge(u0, 0))",
            "import torch",
            "from miniinductor.runtime.cpp_builder import load_kernels",
            "from miniinductor.runtime.helpers import check_layout, empty_strided_cpu, empty_strided_cuda, reinterpret",
            *WRAPPER_IMPORTS,
            "empty_strided = torch.empty_strided",
            "constants = {}  # filled by the loader with the graph's constant tensors",
            "",
        ])
        if self.graph.sizevars.symbolic:
            code.writeline("from ctypes import c_int64")
        self._kernel_definitions(code)
        code.writeline("")
        guarded = self._guarded_device()
        if guarded is not None:   # run with the graph's GPU current, as Inductor's wrappers do
            code.writelines(["def call(args):", f"    with torch.cuda._DeviceGuard({guarded.index}):",
                             "        return _call(args)", "", ""])
        code.writeline(f"def {'_call' if guarded is not None else 'call'}(args):")
        with code.indent():
            inputs = self.graph.graph_input_names
            if inputs:
                code.writeline(f"{', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args")
            code.writeline("args.clear()")
            if self.graph.sizevars.symbolic:
                code.writelines(self._bind_symbols())
            for const in self.graph.constants:
                code.writeline(f"{const} = constants[{const!r}]")
            steps = self._steps()
            for k, (step, lines) in enumerate(steps):
                code.writelines(self._alloc(self.graph.get_buffer(n), plan) for n in step.allocs)
                code.writelines(lines)
                if record:
                    code.writelines(f"record({n!r}, {n})" for n in sorted(step.defines - set(step.inplace.values())))
                if plan.frees.get(k):
                    code.writeline(f"del {', '.join(sorted(plan.frees[k]))}")
            outs = ", ".join(self._output_expr(o) for o in self.graph.outputs)
            code.writeline(f"return ({outs}{',' if len(self.graph.outputs) == 1 else ''})")
        return code.getvalue() + "\n"


