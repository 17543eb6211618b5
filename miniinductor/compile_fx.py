"""The compiler proper: one ATen graph → a callable, through every phase in order.

Mirrors `compile_fx_inner` in `torch/_inductor/compile_fx.py`:

    GraphLowering(gm).run()      lowering/  ATen ops → loop IR buffers
    Scheduler(graph.buffers)     scheduler/ buffers → ordered kernels
    CppKernel per kernel         codegen/   loop IR → C++ source
    WrapperCodeGen               codegen/   → Python module with call(args)
    load_wrapper                 runtime/   build the C++, import the module

`CompiledGraph` keeps every artifact so that each phase can be printed afterwards.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os


import torch
from torch._functorch.aot_autograd import make_boxed_func

from . import metrics
from .codegen.common import MissingStore
from .codegen.cpp import CppKernel
from .codegen.memory_planning import MemoryPlan, eager_peak_bytes
from .codegen.wrapper import WrapperCodeGen
from .debug.logs import get_logger
from .lowering import GraphLowering
from .runtime.cpp_builder import write_source
from .scheduler import FusedGroup, Scheduler
from .virtualized import V

log = logging.getLogger("miniinductor")


@dataclasses.dataclass
class CompiledGraph:
    graph: GraphLowering
    scheduler: Scheduler
    kernels: dict                 # kernel name → its GeneratedKernel (codegen/common.py)
    wrapper_source: str
    path: str
    call: object
    plan: MemoryPlan = None       # buffer lifetimes, reuse and the planned peak
    eager_peak: int = 0           # the same estimate for the ATen graph run op by op

    fx_graph_module: object = None   # the graph Dynamo captured, before AOTAutograd
    wrapper: WrapperCodeGen = None   # regenerates the wrapper (e.g. one that records every buffer)

    def __call__(self, args):
        return self.call(args)

    def fused_groups(self) -> list[FusedGroup]:
        return [g for g in self.scheduler.schedule if isinstance(g, FusedGroup)]


def removable_buffers(group, scheduler) -> set[str]:
    """Buffers that only this group reads and the graph does not return: they can live in
    registers. (Codegen may still keep one in memory if a read falls out of its scope.)"""
    names = set(group.get_names())
    return {n for n in names if n not in scheduler.output_names
            and all(g is group for g in scheduler.readers(n))}


def inplace_buffers(group, scheduler, graph, removed) -> dict[str, str]:
    """{output: input} pairs where a kernel may write an output into the memory of an input
    that dies in it: same layout, nobody else reads the input, and every read of it in the
    kernel happens at the very index the output is written, before or in the writing node
    (so no later read sees an overwritten element). Mirrors Inductor's in-place buffers."""
    from .codegen.wrapper import _may_alias
    from .ir.nodes import ComputedBuffer, ExternKernel
    pairs, taken = {}, set()
    written = {d.name: (k, d.index) for k, n in enumerate(group.nodes) for d in n.writes}
    for out, (k, index) in written.items():
        buf = graph.get_buffer(out)
        if out in removed or not isinstance(buf, ComputedBuffer):
            continue
        for dep in group.nodes[k].reads:
            src = dep.name
            if src in taken or src == out or src in removed or src in scheduler.output_names:
                continue
            src_buf = graph.get_buffer(src)
            fresh = isinstance(src_buf, ComputedBuffer) or (isinstance(src_buf, ExternKernel) and not _may_alias(src_buf))
            if not fresh or src_buf.layout is None or scheduler.readers(src) != [group]:
                continue
            if (src_buf.layout.size, src_buf.layout.stride, src_buf.layout.dtype) != \
                    (buf.layout.size, buf.layout.stride, buf.layout.dtype):
                continue
            reads = [(j, d.index) for j, n in enumerate(group.nodes) for d in n.reads if d.name == src]
            if all(i == index and j <= k for j, i in reads):
                pairs[out] = src
                taken.add(src)
                break
    return pairs


def generate_kernel(group, scheduler, config, backend, graph=None):
    removed = removable_buffers(group, scheduler)
    while True:
        if backend == "triton":
            from .codegen.triton_tiling import kernel_for_group
            kernel = kernel_for_group(group, config, removed)
        else:
            inplace = inplace_buffers(group, scheduler, graph, removed) if graph is not None else {}
            kernel = CppKernel(group.kernel_name, group.R, group.Q, config, removed, inplace)
        try:
            for node in group.nodes:
                kernel.codegen_node(node)
            return kernel
        except MissingStore as exc:
            removed.discard(exc.args[0])


def generate_kernels(graph, scheduler, config, backend) -> dict:
    """{kernel name: GeneratedKernel}; each group takes its kernel's name."""
    kernels = {}
    for group in scheduler.schedule:
        if isinstance(group, FusedGroup):
            kernel = generate_kernel(group, scheduler, config, backend, graph).record(group, len(kernels))
            group.kernel_name = kernel.name
            kernels[kernel.name] = kernel
    return kernels


def precompile_kernels(module, kernels):
    """Compile a GPU graph's Triton kernels together, in threads, instead of one by one as
    the first call reaches each (runtime/triton_runtime.py, `precompile_all`)."""
    from .runtime.triton_runtime import precompile_all
    launchers = [getattr(module, name).__globals__.get(f"_launcher_{name}") for name in kernels]
    seconds = precompile_all(launcher for launcher in launchers if launcher is not None)
    log.info("compiled %d Triton kernels in %.2f s", len(kernels), seconds)


def load_wrapper(source: str):
    """Write the wrapper module into the cache folder and import it from there."""
    path = write_source(source, "wrapper")
    key = path.stem.split("_")[0]
    spec = importlib.util.spec_from_file_location(f"miniinductor_wrapper_{key}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, str(path)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, config, name="graph") -> CompiledGraph:
    graph = GraphLowering(gm, example_inputs, config, name).run()
    with V.set_graph_handler(graph):
        scheduler = Scheduler(graph.buffers, graph.output_names(), config, graph.graph_inputs.values())
        backend = graph.kernel_backend()
        kernels = generate_kernels(graph, scheduler, config, backend)
        wrapper = WrapperCodeGen(graph, scheduler, kernels, backend, config)
        wrapper_source = wrapper.generate()
    module, path = load_wrapper(wrapper_source)
    module.constants.update(graph.constants)
    if backend == "triton" and graph.current_device().type == "cuda":
        precompile_kernels(module, kernels)
    metrics.generated_kernel_count += len(kernels)
    metrics.output_code_paths.append(path)
    metrics.graphs_compiled += 1
    log.info("compiled %s: %d kernels, wrapper at %s", name, len(kernels), path)
    compiled = CompiledGraph(graph, scheduler, kernels, wrapper_source, path, module.call,
                             wrapper.plan, eager_peak_bytes(gm), wrapper=wrapper)
    for kernel in kernels.values():
        kernel.bytes_moved = sum(wrapper.plan_nbytes(n) for n in kernel.args)
    metrics.nodes_before_fusion += len(scheduler.nodes)
    metrics.nodes_after_fusion += len(scheduler.schedule)
    metrics.estimated_bytes_moved += sum(k.bytes_moved for k in kernels.values())
    _log_compiled(compiled)
    return compiled


def _log_compiled(cg: CompiledGraph):
    get_logger("fusion").info("%s:\n%s", cg.graph.name, "\n".join(map(str, cg.scheduler.decisions)))
    get_logger("schedule").info("%s:\n%s", cg.graph.name, cg.scheduler)
    get_logger("ir_post_fusion").info("%s:\n%s", cg.graph.name, cg.graph)
    get_logger("memory").info("%s: eager estimate %d bytes\n%s", cg.graph.name, cg.eager_peak, cg.plan)
    get_logger("output_code").info("%s: %s\n%s", cg.graph.name, cg.path, cg.wrapper_source)


def _unsupported_graph(gm, example_inputs) -> str | None:
    """Why this ATen graph must run eagerly, or None. (Symbolic sizes never get here through
    the backend: capture/specialize.py compiles one static graph per concrete shape.)"""
    from .capture.specialize import has_symbolic_inputs
    from .lowering.graph import graph_device
    if has_symbolic_inputs(example_inputs):
        return "symbolic sizes (only capture.compile_fx specialises them)"
    try:
        device = graph_device(gm, example_inputs)
    except ValueError as exc:   # tensors on several devices
        return f"graphs with {exc}"
    return None if device.type in ("cpu", "cuda") else f"{device.type} tensors"


def invisible_to_dynamo(fn):
    """`fn`, never traced by Dynamo. AOTAutograd compiles the backward lazily, inside
    `loss.backward()`; when that call is in a function being compiled, it runs at a graph
    break with Dynamo's frame hook still on, and the hook would trace our compiler and the
    wrapper it generates (Inductor escapes this by living under `torch/`, whose files
    Dynamo skips). Dynamo does the same to the graphs it hands back to the caller."""
    return torch._dynamo.disable(fn)


def fake_runs_the_aten_graph(call, gm):
    """`call`, except under a FakeTensorMode, where it runs the ATen graph `gm` instead: our
    kernels need real memory (`.data_ptr()`), fake tensors have none (handed their pointers,
    the kernels crashed the process). Callers that propagate shapes run compiled code under
    fake mode: DDP's graph splitting (DDPOptimizer) runs each compiled piece on fake tensors
    to get the next piece's inputs -- a call AOTAutograd answers itself (capture/aot.py), but
    not every caller goes through it."""
    fake = torch._C._TorchDispatchModeKey.FAKE

    def run(args):
        if torch._C._get_dispatch_mode(fake) is not None:   # ~0.2 us: a check per call
            return gm(*args)
        return call(args)
    return run


@invisible_to_dynamo
def compile_fx_inner(gm, example_inputs, config, name="graph", dynamo_gm=None):
    """AOTAutograd's forward/backward compiler: a boxed callable (takes a list of args)."""
    reason = _unsupported_graph(gm, example_inputs)
    if reason is not None:
        log.warning("miniinductor runs this %s graph eagerly: %s are not supported", name, reason)
        return make_boxed_func(gm.forward)
    compiled = compile_graph(gm, example_inputs, config, name)
    compiled.fx_graph_module = dynamo_gm
    trace_root = config.trace or os.environ.get("MINIINDUCTOR_TRACE")
    if trace_root:
        from .debug.trace import trace_compiled_graph
        trace_compiled_graph(compiled, trace_root, fx_graph_module=dynamo_gm)
    call = compiled.__call__   # through the instance: debug tools may swap compiled.call
    if config.cudagraphs:
        if compiled.graph.current_device().type == "cuda":
            from .runtime.cudagraphs import cudagraphify
            call = cudagraphify(call)
        else:
            log.info("cudagraphs: %s runs on the CPU, so there is nothing to record", name)
    call = invisible_to_dynamo(fake_runs_the_aten_graph(call, gm))
    call._boxed_call = True
    call.compiled_graph = compiled
    _last_compiled.append(compiled)
    del _last_compiled[:-8]
    for found, on_compiled in _collectors:
        found.append(compiled)
        if on_compiled is not None:
            on_compiled(compiled)
    return call


_last_compiled: list[CompiledGraph] = []
_collectors: list[tuple[list, object]] = []


@contextlib.contextmanager
def collect_compiled(on_compiled=None):
    """Every graph compiled inside the `with` block is appended to the yielded list, and
    handed to `on_compiled(compiled_graph)` (if given) before its first call."""
    entry = ([], on_compiled)
    _collectors.append(entry)
    try:
        yield entry[0]
    finally:
        _collectors[:] = [e for e in _collectors if e is not entry]


def last_compiled() -> list[CompiledGraph]:
    """The most recently compiled graphs (up to 8), newest last: for printing phases."""
    return list(_last_compiled)



