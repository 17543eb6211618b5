"""The driver: Dynamo's graph → capture → one compiled callable per ATen graph.

Mirrors `torch/_inductor/compile_fx.py`: `compile_fx` (the backend's entry point) and
`compile_fx_inner` (one ATen graph → a boxed callable). `compile_graph` runs the stages of
passes.py in order (`python -m miniinductor passes` lists them); `CompiledGraph` keeps every
artifact, to print each phase afterwards, and a record of every pass. Inductor's FX graph and
AOTAutograd caches are an extension (ext/fx_graph_cache: GRAPH_COMPILERS, CAPTURE_WRAPPERS);
its post-grad pattern matcher and AOT packaging are left out.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging

import torch
from torch._functorch.aot_autograd import make_boxed_func
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from . import metrics
from .capture import capture
from .codegen.cpp import CppKernel
from .codegen.memory_planning import MemoryPlan, inplace_buffers
from .codegen.policy import policy_for
from .codegen.wrapper import WrapperCodeGen
from .config import Config
from .logs import get_logger
from .lowering import GraphLowering
from .lowering.graph import graph_device
from .passes import CAPTURE_WRAPPERS, GRAPH_COMPILERS, Context, Pass, kernel_kind, make_kernel, register, run_stage
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

    fx_graph_module: object = None   # the graph Dynamo captured, before AOTAutograd
    wrapper: WrapperCodeGen = None   # regenerates the wrapper (e.g. one that records every buffer)
    passes: list = None              # a PassRecord per pass: ran or not, and what it changed
    context: Context = None

    def __call__(self, args):
        return self.call(args)

    def fused_groups(self) -> list[FusedGroup]:
        return [g for g in self.scheduler.schedule if isinstance(g, FusedGroup)]


# ----------------------------------------------------------------------------- the stages
def context_for(gm: torch.fx.GraphModule, example_inputs, config: Config, name="graph") -> Context:
    device = graph_device(gm, example_inputs)
    return Context(config, policy_for(device, config), device, name, example_inputs, gm)


def lower(gm: torch.fx.GraphModule, example_inputs, config: Config, name="graph", ctx=None) -> GraphLowering:
    """The ATen graph as loop IR buffers: the stages up to the loop IR's rewrites."""
    ctx = ctx or context_for(gm, example_inputs, config, name)
    for stage in ("aten_graph", "lowering", "loop_ir"):
        gm = run_stage(stage, gm, ctx)
    return gm


def schedule(graph: GraphLowering, config: Config, ctx=None) -> Scheduler:
    """The graph's buffers as an ordered list of kernels and extern calls."""
    if ctx is None:
        ctx = Context(config, graph.policy, graph.current_device(), graph.name, graph=graph)
    return run_stage("schedule", graph, ctx)


def build_scheduler(graph: GraphLowering, ctx: Context) -> Scheduler:
    ctx.scheduler = Scheduler(graph.buffers, graph.output_names(), ctx.config, graph.graph_inputs.values())
    return ctx.scheduler


def run_lowering(gm, ctx: Context) -> GraphLowering:
    ctx.graph = GraphLowering(gm, ctx.example_inputs, ctx.config, ctx.name, ctx.policy)
    ctx.graph.layout_opt = ctx.facts.get("layout_opt", False)
    ctx.graph.run()   # + realize_where_demanded per node
    return ctx.graph


def removable_buffers(group, scheduler, kernel) -> set[str]:
    """Buffers that can live in registers: only this group reads them, the graph does not
    return them, and the kernel reads each only where its stored value is in scope
    (`Kernel.reads_out_of_scope`, decided from the kernel's block plan before generating)."""
    names = {n for n in group.get_names() if n not in scheduler.output_names
             and all(g is group for g in scheduler.readers(n))}
    return names - kernel.reads_out_of_scope(group.nodes)


def generate_kernel(group, ctx: Context, removed=None):
    """The kernel of one fused group, its code generated (`removed`: the buffers kept in
    registers, for a group the schedule does not hold, else `removable_buffers`; in-place
    writes are decided only then). A kernel with a `regenerate` step then picks the one to
    keep, which it may generate anew with `generate` (cpu_fast's C++ kernel: over merged loops)."""
    graph = ctx.graph if removed is None else None

    def generate(kernel):
        return _generate(kernel, group, ctx.scheduler, graph, removed)
    kernel = generate(make_kernel(group, ctx))
    regenerate = getattr(kernel, "regenerate", None)
    return kernel if regenerate is None else regenerate(group, ctx, generate)


def _generate(kernel, group, scheduler, graph, removed):
    kernel.removed = removable_buffers(group, scheduler, kernel) if removed is None else set(removed)
    # a mutation writes through its input's pointer; so may an output over a dying input
    inplace = {n: scheduler.mutations[n] for n in group.get_names() if n in scheduler.mutations}
    if graph is not None:
        inplace |= inplace_buffers(group, scheduler, graph, kernel.removed)
    kernel.set_inplace(inplace)
    for node in group.nodes:
        kernel.codegen_node(node)
    return kernel


def generate_kernels(scheduler: Scheduler, ctx: Context) -> dict:
    """{kernel name: GeneratedKernel}; each group takes its kernel's name."""
    kernels = {}
    for group in scheduler.schedule:
        if isinstance(group, FusedGroup):
            kernel = generate_kernel(group, ctx).record(group, len(kernels))
            group.kernel_name = kernel.name
            kernels[kernel.name] = kernel
    ctx.kernels = kernels
    return kernels


def generate_wrapper(kernels, ctx: Context) -> str:
    """The Python wrapper and its memory plan (unless a pass before made another wrapper)."""
    if ctx.wrapper is None:
        ctx.wrapper = WrapperCodeGen(ctx.graph, ctx.scheduler, kernels, ctx.policy.name, ctx.config)
        ctx.plan = ctx.wrapper.memory_plan()
        ctx.source = ctx.wrapper.generate(ctx.plan)
    return ctx.source


def load_wrapper(source: str, ctx: Context = None):
    """Write the wrapper module into the cache folder and import it from there (its import
    builds the kernels, C++ through the compiler and Triton through triton.jit)."""
    path = write_source(source, "wrapper")
    key = path.stem.split("_")[0]
    spec = importlib.util.spec_from_file_location(f"miniinductor_wrapper_{key}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if ctx is not None:
        module.constants.update(ctx.graph.constants)
    return module, str(path)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, config: Config, name="graph") -> CompiledGraph:
    """One ATen graph → its compiled wrapper: every stage of passes.py but the runtime one."""
    ctx = context_for(gm, example_inputs, config, name)
    graph = lower(gm, example_inputs, config, name, ctx)
    with V.set_graph_handler(graph):
        obj = graph
        for stage in ("schedule", "tune", "codegen", "wrapper"):
            obj = run_stage(stage, obj, ctx)
    module = run_stage("load", ctx.source, ctx)
    kernels, wrapper = ctx.kernels, ctx.wrapper
    compiled = CompiledGraph(graph, ctx.scheduler, kernels, ctx.source, module.__file__, module.call,
                             ctx.plan, wrapper=wrapper, passes=ctx.records, context=ctx)
    for kernel in kernels.values():
        kernel.bytes_moved = sum(wrapper.plan_nbytes(n) for n in kernel.args)
    _count(compiled)
    log.info("compiled %s: %d kernels, wrapper at %s", name, len(kernels), compiled.path)
    _log_compiled(compiled)
    return compiled


def _count(cg: CompiledGraph):
    metrics.generated_kernel_count += len(cg.kernels)
    metrics.output_code_paths.append(cg.path)
    metrics.graphs_compiled += 1
    metrics.nodes_before_fusion += len(cg.scheduler.nodes)
    metrics.nodes_after_fusion += len(cg.scheduler.schedule)
    metrics.estimated_bytes_moved += sum(k.bytes_moved for k in cg.kernels.values())


def _log_compiled(cg: CompiledGraph):
    get_logger("fusion").info("%s:\n%s", cg.graph.name, "\n".join(map(str, cg.scheduler.decisions)))
    get_logger("schedule").info("%s:\n%s", cg.graph.name, cg.scheduler)
    get_logger("ir_post_fusion").info("%s:\n%s", cg.graph.name, cg.graph)
    get_logger("memory").info("%s:\n%s", cg.graph.name, cg.plan)
    get_logger("output_code").info("%s: %s\n%s", cg.graph.name, cg.path, cg.wrapper_source)


def _unsupported_graph(gm, example_inputs) -> str | None:
    """Why this ATen graph must run eagerly, or None."""
    try:
        device = graph_device(gm, example_inputs)
    except ValueError as exc:   # tensors on several devices
        return f"graphs with {exc}"
    return None if device.type in ("cpu", "cuda") else f"{device.type} tensors"


def _data_dependent_ops(gm) -> list[str]:
    """The ops whose output sizes depend on tensor data (nonzero, `.item()`, a boolean mask,
    repeat_interleave by a tensor): Dynamo gives them unbacked symbols (u0, u1, ...), which
    our static-shape lowering cannot size buffers with. Only the first op of each chain
    is named (the ops after it merely inherit its sizes)."""
    def unbacked(node):
        return bool(free_unbacked_symbols(node.meta.get("val"))) if isinstance(node, torch.fx.Node) else False
    return sorted({str(n.target) for n in gm.graph.nodes
                   if unbacked(n) and not any(unbacked(a) for a in n.all_input_nodes)})


def invisible_to_dynamo(fn):
    """`fn`, never traced by Dynamo: a backward compiled lazily inside a compiled function's
    `loss.backward()` runs with Dynamo's frame hook on (docs/design_notes.md)."""
    return torch._dynamo.disable(fn)


def runtime_call(call, gm):
    """`call` as AOTAutograd calls it, with two checks: under a FakeTensorMode (DDP's graph
    splitting) it runs the ATen graph `gm` instead, since our kernels need real memory; while
    Dynamo's frame hook is on it runs invisible_to_dynamo (docs/design_notes.md)."""
    fake = torch._C._TorchDispatchModeKey.FAKE
    dynamo_hook = getattr(torch._C._dynamo.eval_frame, "get_eval_frame_callback", lambda: "unknown: hide")

    def run(args):
        if dynamo_hook() is not None:
            return hidden(args)   # which comes back here with the hook off
        if torch._C._get_dispatch_mode(fake) is not None:
            return gm(*args)
        return call(args)
    hidden = invisible_to_dynamo(run)
    return run


def compile_fx(gm: torch.fx.GraphModule, example_inputs, config: Config):
    """Dynamo's FX graph → a callable: capture/ makes the ATen graphs (specialised, flattened,
    forward and backward), each compiled by `compile_fx_inner`; extensions wrap capture."""
    capture_ = capture
    for extension, wrap in CAPTURE_WRAPPERS:
        capture_ = wrap(capture_) if config.uses(extension) else capture_
    return capture_(gm, example_inputs, config, compile_fx_inner)


# ----------------------------------------------------------------------------- entry points
def backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """The torch.compile backend: Dynamo's FX graph in, a compiled callable out.
    `torch.compile(m, backend="miniinductor", mode=..., options={...})` lands here;
    `options` may hold `preset` (see config.PRESETS) besides our option names, or be a
    GraphNet-style dict (`template`, `mode`, `freezing`, `inductor_config`: config.py)."""
    return compile_fx(gm, example_inputs, Config.build(mode, options))


def compile(model, *, mode=None, preset=None, fullgraph=False, dynamic=None,
            freezing=None, autocast_enabled=None, autocast_dtype=None, **options):
    """`torch.compile(model, backend=miniinductor)` with our options validated up front.
    `freezing`, `autocast_enabled` and `autocast_dtype` are top-level flags like `mode`;
    `dynamic` goes to torch.compile (docs/design_notes.md: the precedence and what each means)."""
    flags = {"freezing": freezing, "autocast_enabled": autocast_enabled, "autocast_dtype": autocast_dtype}
    config = Config.build(mode, options, preset, flags)   # fail fast on a bad mode, preset or option

    def configured_backend(gm, example_inputs):
        return compile_fx(gm, example_inputs, config)
    return torch.compile(model, backend=configured_backend, dynamic=dynamic, fullgraph=fullgraph)


#: called as hook(compiled_graph, config) after each compile, before the first call:
#: miniinductor/__init__.py adds the trace folder writer (debug/ sits above this module)
after_compile: list = []


@invisible_to_dynamo
def compile_fx_inner(gm, example_inputs, config: Config, name="graph", dynamo_gm=None):
    """AOTAutograd's forward/backward compiler: a boxed callable (takes a list of args)."""
    reason = _unsupported_graph(gm, example_inputs)
    if reason is not None:
        log.warning("miniinductor runs this %s graph eagerly: %s are not supported", name, reason)
        return make_boxed_func(gm.forward)
    data_dependent = _data_dependent_ops(gm)
    try:   # the ops that make data-dependent sizes run in ATen; the rest is compiled around them
        compile_ = compile_graph
        for extension, wrap in GRAPH_COMPILERS:
            compile_ = wrap(compile_) if config.uses(extension) else compile_
        compiled = compile_(gm, example_inputs, config, name)
    except Exception as exc:
        if not data_dependent:
            raise
        log.warning("miniinductor runs this %s graph eagerly: its data-dependent sizes (from %s) could not be "
                    "compiled around: %s: %s", name, ", ".join(data_dependent), type(exc).__name__,
                    (str(exc).strip().splitlines() or [""])[0][:200])
        return make_boxed_func(gm.forward)
    if data_dependent:
        log.info("%s: %s ran in ATen (data-dependent sizes); the rest is compiled", name, ", ".join(data_dependent))
    return finish_compile(compiled, config, dynamo_gm)


def finish_compile(compiled: CompiledGraph, config: Config, dynamo_gm=None):   # a compiled or loaded graph → its boxed call
    compiled.fx_graph_module = dynamo_gm
    for hook in after_compile:
        hook(compiled, config)
    call = run_stage("runtime", compiled.__call__, compiled.context)   # via the instance: tools may swap .call
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


# ----------------------------------------------------------------------------- the core's passes
def _dce(scheduler, ctx):
    scheduler.dead_code_elimination()


def _fuse(scheduler, ctx):
    scheduler.fuse()


def _order(scheduler, ctx):
    scheduler.order()


for _pass in (
    Pass("lowering", "lower", run_lowering, doc="ATen ops → loop IR, node by node (lowering/graph.py)"),
    Pass("schedule", "build_scheduler", build_scheduler, doc="one node per buffer, with its MemoryDeps"),
    Pass("schedule", "dead_code_elimination", _dce, doc="nodes nothing reads"),
    Pass("schedule", "fuse", _fuse, enabled=lambda ctx: ctx.config.fusion, doc="fusion rounds, by bytes saved"),
    Pass("schedule", "order", _order, doc="the kernels in a topological order"),
    Pass("codegen", "generate_kernels", generate_kernels, doc="one kernel per fused group (codegen/)"),
    Pass("wrapper", "generate_wrapper", generate_wrapper, doc="call(args) in Python, with its memory plan"),
    Pass("load", "load_wrapper", lambda source, ctx: load_wrapper(source, ctx)[0],
         doc="write the wrapper, build its kernels, import it (runtime/)"),
    Pass("runtime", "runtime_call", lambda call, ctx: runtime_call(call, ctx.gm),
         doc="the call as AOTAutograd makes it (fake tensors, Dynamo's hook)"),
):
    register(_pass)
kernel_kind("cpp", "cpp", lambda group, ctx: CppKernel(group.kernel_name, group.R, group.Q, ctx.config))
