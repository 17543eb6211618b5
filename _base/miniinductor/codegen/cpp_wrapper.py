"""C++ wrapper codegen (`cpp_wrapper=True`): `call` written in C++, compiled with the kernels.

Mirrors `torch/_inductor/codegen/cpp_wrapper_cpu.py`. The Python wrapper (wrapper.py) pays
the interpreter for every line of `call`: each allocation, each kernel's pointers through
ctypes, each ATen call through the dispatcher's Python binding. Here the same steps, in the
same order with the same memory plan, are one C++ function in the kernels' translation unit:
buffers are `AtenTensorHandle`s of libtorch's C shim (`aoti_torch_empty_strided`, ...),
kernels are called directly, and extern ATen ops through the shim's generated functions
(`aoti_torch_cpu_<op>`, or `aoti_torch_cpu_<op>_out` into a buffer we allocate), whose C
signatures are read from torch's header (`shim_signatures`) and filled from the op's schema.

The boundary is Inductor's too: a thin Python `call` turns the input tensors into handles
(`torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors`), calls the C++ `call` through ctypes
(a PyDLL function taking and returning a list of capsules) and takes the outputs back
(`alloc_tensors_by_stealing_from_void_ptrs`). Only the shim's C headers are included (not
ATen's C++ API), so a graph still builds in about a second.

A GPU graph (mirroring `cpp_wrapper_gpu.py`): ATen through `aoti_torch_cuda_<op>`, and the
Triton kernels launched from C++ through the CUDA driver (cpp_wrapper_cuda.h: a table of
CUfunctions, grids, warps and shared memory that Python fills once from the kernels Triton
compiled and loaded, `bind_launch_table`). The module keeps the Python wrapper, which loads
the Triton kernels and runs any call whose inputs are not 16-byte aligned (the kernels were
compiled for aligned pointers).

Unsupported, raised as `CppWrapperUnsupported` (compile_fx then uses the Python wrapper
and says why in one log line): Triton kernels under the interpreter, block sizes timed at
the first call, symbolic sizes, buffers on another device than the graph's, extern ops
without a C shim function or with argument types the mapping below lacks (devices, memory
formats, ...). Leaves out Inductor's AOT packaging and its Python-op fallback from C++
(`custom_op_wrapper`).
"""
from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import sympy
import torch

from ..ir.nodes import Buffer, MultiOutput, ReinterpretView
from .common import IndentedBuffer
from .memory_planning import MemoryPlan
from .wrapper import WrapperCodeGen, extern_arg, op_path, pyrepr

PRELUDE = (Path(__file__).parent / "cpp_wrapper_prelude.h").read_text()
CUDA_PRELUDE = (Path(__file__).parent / "cpp_wrapper_cuda.h").read_text()


class CppWrapperUnsupported(Exception):
    """What this graph needs that the C++ wrapper cannot do (the Python wrapper can)."""


@functools.lru_cache(maxsize=None)
def shim_signatures(device: str = "cpu") -> dict[str, list[tuple[str, str]]]:
    """{C function: [(C type, parameter name), ...]} for libtorch's generated shim of a device
    type ("cpu": c_shim_cpu.h, "cuda": c_shim_cuda.h)."""
    from torch.utils.cpp_extension import include_paths
    header = Path(include_paths()[0]) / f"torch/csrc/inductor/aoti_torch/generated/c_shim_{device}.h"
    found = {}
    for name, params in re.findall(rf"AOTITorchError (aoti_torch_{device}_\w+)\(([^)]*)\);", header.read_text()):
        found[name] = [tuple(p.strip().rsplit(" ", 1)) for p in params.split(",") if p.strip()]
    return found


def c_scalar(value) -> str:
    """A Python number as a C++ literal."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and not math.isfinite(value):
        return "__builtin_nan(\"\")" if math.isnan(value) else f"{'-' if value < 0 else ''}__builtin_inf()"
    if isinstance(value, (int, float, sympy.Integer, sympy.Float)):
        return repr(int(value) if isinstance(value, sympy.Integer) else value)
    raise CppWrapperUnsupported(f"a scalar argument {value!r} ({type(value).__name__})")


def c_shape(values) -> str:
    return "{" + ", ".join(c_scalar(int(v)) for v in values) + "}"


#: the dtypes the shim names (`aoti_torch_dtype_<name>()`)
SHIM_DTYPES = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
               torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128}


def c_dtype(dtype: torch.dtype) -> str:
    if dtype not in SHIM_DTYPES:
        raise CppWrapperUnsupported(f"the dtype {dtype}")
    return f"aoti_torch_dtype_{str(dtype).removeprefix('torch.')}()"


def schema_values(op, args, kwargs) -> dict:
    """{argument name: value} for every argument of `op`'s schema (defaults filled in)."""
    values = {}
    for i, arg in enumerate(op._schema.arguments):
        if not arg.kwarg_only and i < len(args):
            values[arg.name] = args[i]
        elif arg.name in kwargs:
            values[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


class CppWrapperCodeGen(WrapperCodeGen):
    """The wrapper as a C++ `call` (in the kernels' source) behind a thin Python `call`."""

    def __init__(self, graph, scheduler, kernels, backend, config):
        super().__init__(graph, scheduler, kernels, backend, config)
        self.handles: list[str] = []             # every AtenTensorHandle variable `call` declares
        self.parts: dict[str, list[str]] = {}    # a tuple-returning extern → its items' handles
        self.device = graph.current_device()
        self.launched: dict[str, int] = {}       # GPU: Triton kernel → its row of `mi_kernels`

    def _handle(self, name: str) -> str:
        if name not in self.handles:
            self.handles.append(name)
        return name

    # ------------------------------------------------------------------ the steps, in C++
    def _kernel_lines(self, kernel) -> list[str]:
        lines = [f"{self._handle(out)} = mi_new_handle({src});  // in-place: {out} is written over {src}"
                 for out, src in kernel.inplace.items()]
        if kernel.language == "cpp":
            ptrs = ", ".join(f"mi_ptr({n})" for n in kernel.args)
            return [*lines, f"{kernel.name}({ptrs});  // {', '.join(kernel.origins)}"]
        if self.device.type != "cuda":
            raise CppWrapperUnsupported("Triton kernels on the CPU run under Triton's interpreter, from Python")
        if "autotune(" in kernel.source:
            raise CppWrapperUnsupported(f"{kernel.name}'s block size is timed at its first call (max_autotune)")
        row = self.launched.setdefault(kernel.name, len(self.launched))
        return [*lines, f'mi_launch({row}, "{kernel.name}", stream, {{{", ".join(kernel.args)}}});  '
                        f"// {', '.join(kernel.origins)}"]

    def _extern_lines(self, node) -> list[str]:
        name = self._handle(node.get_name())
        if isinstance(node, MultiOutput):
            lay = node.layout
            item = self.parts[node.parent.get_name()][node.index]
            return [f"{name} = mi_check_layout(mi_new_handle({item}), {c_shape(lay.size)}, {c_shape(lay.stride)});"]
        if not isinstance(node.op, torch._ops.OpOverload) or node.op.namespace != "aten":
            raise CppWrapperUnsupported(f"the extern kernel {op_path(node.op)} (not an ATen op)")
        tensors = [v for v in [*node.args, *node.kwargs.values(), *(a for v in node.args if isinstance(v, (list, tuple))
                                                                     for a in v)] if isinstance(v, (Buffer, ReinterpretView))]
        for lay in [v.layout for v in tensors] + ([node.layout] if node.layout else []):
            self._check_device(lay.device, op_path(node.op))   # (the shim's functions are per device)
        shims = shim_signatures(self.device.type)
        base = f"aoti_torch_{self.device.type}_{node.op._opname}" + ("" if node.op._overloadname == "default"
                                                                     else f"_{node.op._overloadname}")
        values = schema_values(node.op, extern_arg(list(node.args)), extern_arg(dict(node.kwargs)))
        setup: list[str] = []                    # views made handles, dropped after the call
        if base in shims:                        # functional: the shim allocates the results
            c_args, rets = self._c_args(shims[base], values, name, setup)
            lines = [*setup, f"MI_CHECK({base}({', '.join(c_args)}));  // {op_path(node.op)}",
                     *self._drop(setup)]
            if node.layout is None:              # a tuple: its items are picked by MultiOutputs
                self.parts[name] = rets
                return lines
            lay = node.layout
            return [*lines, f"{name} = mi_check_layout({rets[0]}, {c_shape(lay.size)}, {c_shape(lay.stride)}); "
                            f"{rets[0]} = nullptr;  // moved into {name}"]
        if f"{base}_out" in shims and node.layout is not None:   # into a buffer laid out as planned
            lay = node.layout
            c_args, _ = self._c_args([p for p in shims[f"{base}_out"] if p[1] != "out"], values, name, setup)
            return [*setup, f"{name} = mi_empty({c_shape(lay.size)}, {c_shape(lay.stride)}, {c_dtype(lay.dtype)});",
                    f"MI_CHECK({base}_out({', '.join([name, *c_args])}));  // {op_path(node.op)}",
                    *self._drop(setup)]
        raise CppWrapperUnsupported(f"{op_path(node.op)} has no C shim function ({base} in c_shim_{self.device.type}.h)")

    @staticmethod
    def _drop(setup: list[str]) -> list[str]:
        return [" ".join(f"mi_del({line.split(' = ')[0]});" for line in setup)] if setup else []

    def _c_args(self, params, values: dict, name: str, setup: list) -> tuple[list[str], list[str]]:
        """The C arguments of a shim call, and the handles its results land in. Views
        become handles first (`setup` lines)."""
        c_args, rets = [], []
        for ctype, pname in params:
            if pname.endswith("_len_"):
                continue                          # written with its array
            if pname.startswith("ret") and ctype == "AtenTensorHandle*":
                rets.append(self._handle(f"{name}_{pname}"))
                c_args.append(f"&{rets[-1]}")
                continue
            if pname not in values:
                raise CppWrapperUnsupported(f"the shim parameter {pname} (not in the op's schema)")
            c_args += self._c_value(ctype, values[pname], f"{name}_{pname}", setup)
        return c_args, rets

    def _c_value(self, ctype: str, value, temp: str, setup: list) -> list[str]:
        """One schema value as the C argument(s) of type `ctype`."""
        if ctype == "AtenTensorHandle":
            return [self._tensor(value, temp, setup)]
        if ctype == "AtenTensorHandle*":          # an optional tensor
            return ["nullptr"] if value is None else [f"&{self._tensor(value, temp, setup)}"]
        if ctype == "const int64_t*":             # an int list (`int[1]` may be one int), then its length
            value = [value] if isinstance(value, (int, sympy.Integer)) else value
            return [f"MiShape{c_shape(value)}.begin()" if value else "nullptr", str(len(value))]
        if ctype == "const AtenTensorHandle*":
            items = [self._tensor(v, f"{temp}{k}", setup) for k, v in enumerate(value)]
            return [f"std::initializer_list<AtenTensorHandle>{{{', '.join(items)}}}.begin()", str(len(items))]
        if ctype in ("int64_t*", "double*", "int32_t*"):   # an optional scalar
            return ["nullptr"] if value is None else [f"mi_opt({ctype[:-1]}({self._c_value(ctype[:-1], value, temp, setup)[0]}))"]
        if ctype == "int32_t" and isinstance(value, torch.dtype):
            return [c_dtype(value)]
        if ctype in ("int64_t", "double") or (ctype == "int32_t" and isinstance(value, bool)):
            return [c_scalar(value)]
        raise CppWrapperUnsupported(f"an argument of C type {ctype} (value {value!r})")

    def _tensor(self, value, temp: str, setup: list) -> str:
        if isinstance(value, ReinterpretView):
            lay = value.layout
            setup.append(f"{self._handle(temp)} = mi_reinterpret({value.get_name()}, {c_shape(lay.size)}, "
                         f"{c_shape(lay.stride)}, {c_scalar(lay.offset)});")
            return temp
        if isinstance(value, Buffer):
            return value.get_name()
        raise CppWrapperUnsupported(f"a tensor argument {value!r}")

    def _check_device(self, device: torch.device, what: str):
        if device.type != self.device.type:
            raise CppWrapperUnsupported(f"{what} on {device}, in a {self.device.type} graph")

    def _alloc(self, buf, plan: MemoryPlan) -> str:
        lay, name = buf.layout, self._handle(buf.get_name())
        self._check_device(lay.device, name)   # (mi_empty allocates on the graph's device)
        if name in plan.reuse:
            old = plan.reuse[name]
            old_lay = self.graph.get_buffer(old).layout
            if (list(old_lay.size), list(old_lay.stride)) == (list(lay.size), list(lay.stride)):
                return f"{name} = {old}; {old} = nullptr;  // reuse"
            return (f"{name} = mi_reinterpret({old}, {c_shape(lay.size)}, {c_shape(lay.stride)}, 0); "
                    f"mi_del({old});  // reuse")
        return f"{name} = mi_empty({c_shape(lay.size)}, {c_shape(lay.stride)}, {c_dtype(lay.dtype)});"

    def _frees(self, names) -> str:
        return " ".join(f"mi_del({h});" for n in sorted(names) for h in self.parts.get(n, [n]))

    def _output(self, value) -> str:
        if isinstance(value, ReinterpretView):
            lay = value.layout
            return f"mi_reinterpret({value.get_name()}, {c_shape(lay.size)}, {c_shape(lay.stride)}, {c_scalar(lay.offset)})"
        if isinstance(value, Buffer):
            return f"mi_new_handle({value.get_name()})"
        raise CppWrapperUnsupported(f"the output {value!r}")

    # ------------------------------------------------------------------ the module
    def memory_plan(self) -> MemoryPlan:
        """The Python wrapper's plan, once the graph is one this wrapper can do (the steps'
        C++ needs every size as a number)."""
        if self.graph.sizevars.symbolic:
            raise CppWrapperUnsupported("symbolic sizes")
        if any(n in self.graph.symbol_inputs for n in self.graph.graph_input_names):
            raise CppWrapperUnsupported("size inputs")
        if self.device.type == "cuda" and self.device.index is None:
            raise CppWrapperUnsupported("a GPU graph without a device index")
        return super().memory_plan()

    def generate(self, plan: MemoryPlan, record: bool = False) -> str:
        """The module: the C++ source (prelude, kernels, `call`) and the Python `call` around
        it. record=True (debug/accuracy.py) gives the Python wrapper, which can record."""
        if record:
            return WrapperCodeGen(self.graph, self.scheduler, self.kernels, self.backend, self.config).generate(plan, record)
        inputs = [*self._tensor_inputs(), *self.graph.constants]
        self.handles = list(inputs)
        body = IndentedBuffer(2)
        if self.device.type == "cuda":
            body.writelines(["MiDeviceGuard guard;", "void* stream = mi_current_stream();"])
        for k, (step, lines) in enumerate(self._steps()):
            body.writelines(self._alloc(self.graph.get_buffer(n), plan) for n in step.allocs)
            body.writelines(lines)
            if plan.frees.get(k):
                body.writeline(self._frees(plan.frees[k]))
        tensors = [o for o in self.graph.outputs if isinstance(o, (Buffer, ReinterpretView))]
        body.writelines(f"outputs[{i}] = {self._output(o)};" for i, o in enumerate(tensors))
        entry = self._entry(inputs, body, len(tensors))
        if self.device.type == "cuda":
            return self._cuda_module(entry, tensors, plan)
        return self._module(entry, tensors)

    def _entry(self, inputs: list[str], body: IndentedBuffer, n_out: int) -> str:
        code = IndentedBuffer()
        code.writelines([
            f'extern "C" PyObject* call(PyObject* handles{", PyObject* args" if self.device.type == "cuda" else ""}) '
            f'{{  // {self.graph.name}: a list of {len(inputs)} handles',
            f"    if (!PyList_Check(handles) || PyList_GET_SIZE(handles) != {len(inputs)}) {{",
            f'        PyErr_SetString(PyExc_TypeError, "call takes a list of {len(inputs)} tensor handles");',
            "        return nullptr;",
            "    }",
            *(f"    AtenTensorHandle {n} = mi_arg(handles, {i});" for i, n in enumerate(inputs)),
            *self._gpu_entry_checks(inputs),
            *(f"    AtenTensorHandle {n} = nullptr;" for n in self.handles[len(inputs):]),
            f"    AtenTensorHandle outputs[{max(n_out, 1)}] = {{}};",
            "    std::string error;",
            "    Py_BEGIN_ALLOW_THREADS   // the kernels run without the GIL, as ATen's ops do",
            "    try {",
        ])
        code.splice(body)
        code.writelines([
            "    } catch (const std::exception& e) {",
            "        error = e.what();",
            f"        for (int i = 0; i < {n_out}; ++i) mi_del(outputs[i]);",
            "    }",
            "    " + " ".join(f"mi_del({n});" for n in self.handles),
            "    Py_END_ALLOW_THREADS",
            "    if (!error.empty()) {",
            "        PyErr_SetString(PyExc_RuntimeError, error.c_str());",
            "        return nullptr;",
            "    }",
            f"    PyObject* result = PyList_New({n_out});",
            f"    for (int i = 0; i < {n_out}; ++i) PyList_SET_ITEM(result, i, PyCapsule_New(outputs[i], nullptr, nullptr));",
            "    return result;",
            "}",
        ])
        return code.getvalue()

    def _gpu_entry_checks(self, inputs: list[str]) -> list[str]:
        """GPU: the inputs a Triton kernel takes must be 16-byte aligned, as its binary was
        compiled for; if one is not, `call` returns None at once and the Python wrapper runs
        this call. Else it empties `args` (the caller's list of input tensors, as the Python
        wrapper's `args.clear()`): an input then lives as long as its handle, which is
        dropped after its last use."""
        if self.device.type != "cuda":
            return []
        launched = {n for k in self._launched_kernels() for n in k.args}
        checked = [n for n in inputs if n in launched]
        lines = [f"    if (!mi_aligned({{{', '.join(checked)}}})) {{  // for the Python wrapper",
                 "        " + " ".join(f"mi_del({n});" for n in inputs),
                 "        Py_RETURN_NONE;",
                 "    }"] if checked else []
        return lines + ["    if (PyList_SetSlice(args, 0, PyList_GET_SIZE(args), nullptr) < 0) return nullptr;"]

    def _launched_kernels(self) -> list:
        """GPU: the Triton kernels `call` launches from C++, in the order of their table rows."""
        return [self.kernels[name] for name in self.launched]

    def _cuda_source(self, entry: str) -> list[str]:
        """The C++ of a GPU graph: its device, the table's size, both preludes, `call`."""
        kernels = self._launched_kernels()
        return ["#define USE_CUDA   // (libtorch's shim: its CUDA functions)",
                "#define MI_DEVICE_TYPE aoti_torch_device_type_cuda()",
                f"#define MI_DEVICE_INDEX {self.device.index}",
                f"#define MI_KERNELS {max(len(kernels), 1)}",
                f"#define MI_MAX_ARGS {max([len(k.args) for k in kernels], default=1)}",
                *PRELUDE.splitlines(), *CUDA_PRELUDE.splitlines(), "", *entry.splitlines()]

    def _cuda_module(self, entry: str, tensors: list, plan: MemoryPlan) -> str:
        """A GPU graph's module: the Python wrapper (which loads the Triton kernels, and runs a
        call whose inputs are not aligned as the kernels were compiled for), the C++ source,
        and a `call` that binds the kernels into the C++ table the first time, then calls C++."""
        python = WrapperCodeGen(self.graph, self.scheduler, self.kernels, self.backend, self.config).generate(plan)
        assert python.count("\ndef call(args):") == 1
        code = IndentedBuffer()
        code.writelines([
            f"# miniinductor generated wrapper for {self.graph.name} (cpp_wrapper on the GPU: `call` is the "
            "C++ function below; it launches the Triton kernels through the CUDA driver)",
            *python.replace("\ndef call(args):", "\ndef _python_call(args):").splitlines()[1:],
            "# ---------------------------------------------------------------- the C++ wrapper",
            "from miniinductor.runtime.cpp_builder import load_cpp_wrapper",
            "from miniinductor.runtime.triton_runtime import bind_launch_table",
            "from torch._C._aoti import alloc_tensors_by_stealing_from_void_ptrs as from_handles",
            "from torch._C._aoti import unsafe_alloc_void_ptrs_from_tensors as to_handles",
            "",
            "CPP_SOURCE = r'''",
        ])
        code.lines.extend(self._cuda_source(entry))
        launched = ", ".join(self.launched)
        code.writelines([
            "'''", f"_cpp = load_cpp_wrapper(CPP_SOURCE, cxx={self.config.cxx!r}, cuda=True)",
            "_bound = []   # [None] once the kernels are in the C++ table, [why not] if they cannot be",
            "", "",
            "def call(args):",
            "    if not _bound:",
            f"        _bound.append(bind_launch_table(_cpp, [{launched}], {self.device.index}))",
            "    if _bound[0] is not None:",
            "        return _python_call(args)",
            f"    outs = _cpp.call(to_handles({self._handles_list()}), args)   # (it empties args)",
            "    if outs is None:   # an input not 16-byte aligned",
            "        return _python_call(args)",
            "    outs = from_handles(outs)",
        ])
        code.writeline(self._return_line(tensors))
        return code.getvalue() + "\n"

    def _tensor_inputs(self) -> list[str]:
        """The graph's tensor inputs: a static graph's size or scalar inputs (a backward
        compiled per shape takes them) are numbers in its code, and not passed to C++."""
        return [n for n in self.graph.graph_input_names if n in self.graph.graph_inputs]

    def _handles_list(self) -> str:
        """The Python list `call` makes handles of: the tensor inputs, then the constants."""
        names, tensors = self.graph.graph_input_names, self._tensor_inputs()
        tensors = ["*args"] if len(tensors) == len(names) else [f"args[{names.index(n)}]" for n in tensors]
        return "[" + ", ".join(tensors + [f"constants[{c!r}]" for c in self.graph.constants]) + "]"

    def _return_line(self, tensors: list) -> str:
        """The Python `call`'s return: the graph's outputs, tensors from the C++ `outs`."""
        index = iter(range(len(tensors)))
        outs = [f"outs[{next(index)}]" if isinstance(o, (Buffer, ReinterpretView)) else pyrepr(o)
                for o in self.graph.outputs]
        return f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"

    def _module(self, entry: str, tensors: list) -> str:
        code = IndentedBuffer()
        code.writelines([
            f"# miniinductor generated wrapper for {self.graph.name} (cpp_wrapper: `call` is the C++ function below)",
            "from miniinductor.runtime.cpp_builder import load_cpp_wrapper",
            "from torch._C._aoti import alloc_tensors_by_stealing_from_void_ptrs as from_handles",
            "from torch._C._aoti import unsafe_alloc_void_ptrs_from_tensors as to_handles",
            "constants = {}  # filled by the loader with the graph's constant tensors",
            "",
            "CPP_SOURCE = r'''",
        ])
        code.lines.extend(PRELUDE.splitlines() + [""])
        code.lines.extend("\n\n".join([*(k.source for k in self.kernels.values()), entry]).splitlines())
        code.writelines(["'''", f"_call = load_cpp_wrapper(CPP_SOURCE, cxx={self.config.cxx!r}).call", "", ""])
        code.writelines([
            "def call(args):",
            f"    handles = to_handles({self._handles_list()})",
            "    args.clear()",
            "    outs = from_handles(_call(handles))",
        ])
        code.writeline(self._return_line(tensors))
        return code.getvalue() + "\n"
