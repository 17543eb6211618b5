"""The driver: Dynamo's graph → capture → one compiled callable per ATen graph.

Mirrors `torch/_inductor/compile_fx.py`: `compile_fx` (the backend's entry point: capture/
turns Dynamo's graph into ATen graphs) and `compile_fx_inner` (one ATen graph → a boxed
callable). `compile_graph` is the table of contents, every pass in order:

    (capture/ already decomposed the graph: AOTAutograd with our decomposition table)
    lower            policy_for            the backend policy, once per graph (codegen/policy.py)
                     unfuse_addmm          addmm read pointwise → mm + add (Triton; lowering/matmul.py)
                     addmm_activation      gelu(addmm), CUDA relu(addmm) → one _addmm_activation call (matmul.py)
                     onednn_linear         C++: float32 addmm/mm (+ GELU) → oneDNN where timed faster (onednn.py)
                     fold_conv_affine      C++: a per-channel affine after a conv (eval BatchNorm) → its weight
                                           and bias (conv_affine.py)
                     relu_after_max_pool   C++: max_pool(relu(y)), indices unread → relu(max_pool(y)) (conv_affine.py)
                     winograd_convolutions C++, inference: 3x3 stride-1 convolutions → Winograd F(2x2, 3x3) (winograd.py)
                     prefetch_gemm_templates  max_autotune on a GPU: every matmul's template configs start
                                           compiling in threads, while lowering goes on (matmul.py)
                     decide_layout_opt     C++ or GPU, inference: 2-D convolutions channels-last (lowering/layout.py)
                     GraphLowering.run     ATen ops → loop IR (lowering/graph.py), node by node,
                       realize_where_demanded  each node's value, once lowered: a buffer or inlined
                                           (outputs, reductions, expensive values read twice)
                     split_reductions      long rows/columns cut in two (Triton; lowering/reductions.py)
    schedule         Scheduler(...)        one node per buffer, with its MemoryDeps
                     dead_code_elimination
                     fuse                  fusion rounds, by bytes saved (scheduler/)
                     fuse_mix_order        row + column reductions of one input (Triton)
                     combine_kernels       independent pointwise kernels → combo kernels
                                           (combo_kernels; scheduler/combo.py)
                     order                 the kernels in a topological order
    benchmark_epilogue_fusion              max_autotune on a GPU: each GEMM template's fused kernel
                                           timed per tile config against the template + its epilogue
                                           apart; the faster kept (codegen/epilogue_tuning.py)
    generate_kernels                       one C++ or Triton kernel per fused group (codegen/; a group
                                           holding a GEMM template: codegen/triton_template.py;
                                           a combo's parts in one kernel: codegen/combo.py):
                     removable_buffers     which buffers stay in registers, from the kernel's
                                           block plan, before its code is generated
    memory_plan                            lifetimes, frees, reuse (codegen/memory_planning.py)
    generate_wrapper                       the Python module with call(args) (codegen/wrapper.py),
                                           or under cpp_wrapper `call` in C++ (codegen/cpp_wrapper.py)
    load_wrapper                           build the kernels and import the module (runtime/)

`CompiledGraph` keeps every artifact so that each phase can be printed afterwards; `lower`
and `schedule` can be run alone to stop after a phase. Leaves out Inductor's FX graph cache,
its post-grad pattern matcher (two passes in lowering/matmul.py stand for it) and AOT packaging.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import math

import torch
from torch._functorch.aot_autograd import make_boxed_func
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from . import metrics
from .capture import capture
from .codegen.combo import COMBO_KERNELS
from .codegen.cpp import CppKernel
from .codegen.cpp_vec import with_vector_twin
from .codegen.cpp_wrapper import CppWrapperCodeGen, CppWrapperUnsupported
from .codegen.epilogue_tuning import benchmark_epilogue_fusion
from .codegen.memory_planning import MemoryPlan, eager_peak_bytes, inplace_buffers
from .codegen.policy import policy_for
from .codegen.triton_template import kernel_for_template_group
from .codegen.triton_tiling import kernel_for_group
from .codegen.wrapper import WrapperCodeGen
from .config import Config
from .logs import get_logger
from .lowering import (
    GraphLowering,
    addmm_activation,
    fold_conv_affine,
    note_unused_tma,
    onednn_linear,
    prefetch_gemm_templates,
    relu_after_max_pool,
    split_reductions,
    unfuse_addmm,
    winograd_convolutions,
)
from .lowering.graph import graph_device
from .lowering.layout import decide_layout_opt
from .runtime.cpp_builder import write_source
from .runtime.cudagraphs import cudagraphify
from .runtime.triton_runtime import kernel_launchers, precompile_all
from .scheduler import FusedGroup, Scheduler
from .scheduler.combo import ComboGroup, combine_kernels
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


# ----------------------------------------------------------------------------- the passes
def lower(gm: torch.fx.GraphModule, example_inputs, config: Config, name="graph") -> GraphLowering:
    """The ATen graph as loop IR buffers, with lowering's passes run."""
    device = graph_device(gm, example_inputs)
    policy = policy_for(device, config)
    note_unused_tma(policy, config)
    unfuse_addmm(gm, policy, config)
    addmm_activation(gm, config)
    onednn_linear(gm, policy, config)
    fold_conv_affine(gm, policy, config)
    relu_after_max_pool(gm, policy, config)
    winograd_convolutions(gm, policy, config, name)
    prefetch_gemm_templates(gm, policy, config, device)
    graph = GraphLowering(gm, example_inputs, config, name, policy)
    graph.layout_opt = decide_layout_opt(gm, policy, config, name)
    graph.run()   # + realize_where_demanded per node
    with V.set_graph_handler(graph):
        split_reductions(graph)
    return graph


def schedule(graph: GraphLowering, config: Config) -> Scheduler:
    """The graph's buffers as an ordered list of kernels and extern calls."""
    scheduler = Scheduler(graph.buffers, graph.output_names(), config, graph.graph_inputs.values())
    scheduler.dead_code_elimination()
    if config.fusion:
        scheduler.fuse()
        if graph.policy.mix_order_reduction:
            scheduler.fuse_mix_order(graph.policy)
        if config.combo_kernels:
            combine_kernels(scheduler, graph.policy)
    scheduler.order()
    return scheduler


def removable_buffers(group, scheduler, kernel) -> set[str]:
    """Buffers that can live in registers: only this group reads them, the graph does not
    return them, and the kernel reads each only where its stored value is in scope
    (`Kernel.reads_out_of_scope`, decided from the kernel's block plan before generating)."""
    names = {n for n in group.get_names() if n not in scheduler.output_names
             and all(g is group for g in scheduler.readers(n))}
    return names - kernel.reads_out_of_scope(group.nodes)


#: the kernel class of each backend, made for one fused group
KERNELS = {
    "cpp": lambda group, config: cpp_kernel(group, config),
    "triton": lambda group, config: kernel_for_template_group(group, config) or kernel_for_group(group, config),
}


def cpp_kernel(group, config, groups=None) -> CppKernel:
    """The C++ kernel of `group`; with `groups`, its loops run over those merged runs of its
    dims (dims walked as one, cpp_loops.merged_dims), the nodes' indices recovered from them."""
    if groups is None:
        return with_vector_twin(CppKernel(group.kernel_name, group.R, group.Q, config))
    sizes = [int(n) for n in group.R]
    kernel = CppKernel(group.kernel_name, [math.prod(sizes[k] for k in g) for g in groups], group.Q, config)
    kernel.unmerged = (groups, sizes)
    return with_vector_twin(kernel)


def generate_kernel(group, scheduler, config: Config, backend: str, graph=None, removed=None):
    """The kernel of one fused group, its code generated. (`graph`: decide in-place writes;
    `removed`: the buffers kept in registers, for a group the schedule does not hold, else
    `removable_buffers`.) A C++ kernel that tiles a transpose is generated again over merged
    loops where its accesses allow (`CppKernel.dims_to_merge`), and kept if it still tiles."""
    make = COMBO_KERNELS[backend] if isinstance(group, ComboGroup) else KERNELS[backend]
    kernel = _generate(make(group, config), group, scheduler, graph, removed)
    if backend == "cpp" and not isinstance(group, ComboGroup) and (groups := kernel.dims_to_merge()):
        merged = _generate(cpp_kernel(group, config, groups), group, scheduler, graph, removed)
        if (plan := merged.pointwise_plan()) is not None and plan.tile is not None:
            return merged
    return kernel


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


def generate_kernels(graph: GraphLowering, scheduler: Scheduler, config: Config) -> dict:
    """{kernel name: GeneratedKernel}; each group takes its kernel's name."""
    kernels = {}
    for group in scheduler.schedule:
        if isinstance(group, FusedGroup):
            kernel = generate_kernel(group, scheduler, config, graph.policy.name, graph).record(group, len(kernels))
            group.kernel_name = kernel.name
            kernels[kernel.name] = kernel
    return kernels


def load_wrapper(source: str):
    """Write the wrapper module into the cache folder and import it from there (its import
    builds the kernels, C++ through the compiler and Triton through triton.jit)."""
    path = write_source(source, "wrapper")
    key = path.stem.split("_")[0]
    spec = importlib.util.spec_from_file_location(f"miniinductor_wrapper_{key}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, str(path)


def precompile_kernels(module, kernels, device):
    """Compile a GPU graph's Triton kernels together, in threads, instead of one by one as
    the first call reaches each (runtime/triton_runtime.py, `precompile_all`)."""
    launchers = [launcher for name in kernels for launcher in kernel_launchers(getattr(module, name).__globals__, name)]
    seconds = precompile_all(launchers, device)
    log.info("compiled %d Triton kernels (%d variants) in %.2f s", len(kernels), len(launchers), seconds)


def generate_wrapper(graph, scheduler, kernels, config: Config):
    """(wrapper, memory plan, source): the C++ wrapper under cpp_wrapper where it can do the
    graph (codegen/cpp_wrapper.py), else -- saying why in one line -- the Python one."""
    if config.cpp_wrapper:
        wrapper = CppWrapperCodeGen(graph, scheduler, kernels, graph.policy.name, config)
        try:
            plan = wrapper.memory_plan()
            return wrapper, plan, wrapper.generate(plan)
        except CppWrapperUnsupported as exc:
            log.info("cpp_wrapper: %s gets the Python wrapper (not in the C++ one: %s)", graph.name, exc)
    wrapper = WrapperCodeGen(graph, scheduler, kernels, graph.policy.name, config)
    plan = wrapper.memory_plan()
    return wrapper, plan, wrapper.generate(plan)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, config: Config, name="graph") -> CompiledGraph:
    """One ATen graph → its compiled wrapper, pass by pass (the module docstring lists them)."""
    graph = lower(gm, example_inputs, config, name)
    with V.set_graph_handler(graph):
        scheduler = schedule(graph, config)
        if config.max_autotune and graph.policy.gemm_templates:
            benchmark_epilogue_fusion(scheduler, lambda group, index, removed=None: generate_kernel(
                group, scheduler, config, graph.policy.name, graph if removed is None else None, removed).record(
                group, index))
        kernels = generate_kernels(graph, scheduler, config)
        wrapper, plan, wrapper_source = generate_wrapper(graph, scheduler, kernels, config)
    module, path = load_wrapper(wrapper_source)
    module.constants.update(graph.constants)
    if graph.current_device().type == "cuda":
        precompile_kernels(module, kernels, graph.current_device())
    compiled = CompiledGraph(graph, scheduler, kernels, wrapper_source, path, module.call,
                             plan, eager_peak_bytes(gm), wrapper=wrapper)
    for kernel in kernels.values():
        kernel.bytes_moved = sum(wrapper.plan_nbytes(n) for n in kernel.args)
    _count(compiled)
    log.info("compiled %s: %d kernels, wrapper at %s", name, len(kernels), path)
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
    get_logger("memory").info("%s: eager estimate %d bytes\n%s", cg.graph.name, cg.eager_peak, cg.plan)
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
    """`fn`, never traced by Dynamo. AOTAutograd compiles the backward lazily, inside
    `loss.backward()`; when that call is in a function being compiled, it runs at a graph
    break with Dynamo's frame hook still on, and the hook would trace our compiler and the
    wrapper it generates (Inductor escapes this by living under `torch/`, whose files
    Dynamo skips). Dynamo does the same to the graphs it hands back to the caller."""
    return torch._dynamo.disable(fn)


def runtime_call(call, gm):
    """`call` as AOTAutograd calls it, with two checks (~0.2 us each). Under a FakeTensorMode
    it runs the ATen graph `gm` instead: our kernels need real memory (`.data_ptr()`), fake
    tensors have none (handed their pointers, the kernels crashed the process). Callers that
    propagate shapes run compiled code under fake mode: DDP's graph splitting (DDPOptimizer)
    runs each compiled piece on fake tensors to get the next piece's inputs -- a call
    AOTAutograd answers itself (capture/aot.py), but not every caller goes through it. And
    while Dynamo's frame hook is on (a backward run by `loss.backward()` at a graph break)
    it runs invisible_to_dynamo; a forward is called inside Dynamo's own disabled region,
    where the hook is off already, and skips the ~1.5 us that `torch._dynamo.disable` costs."""
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
    forward and backward), each compiled by `compile_fx_inner`."""
    return capture(gm, example_inputs, config, compile_fx_inner)


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

    `freezing`, `autocast_enabled` and `autocast_dtype` are top-level flags like `mode`.
    Precedence: explicit `**options` over the flags over `preset` (see config.py). A
    GraphNet-style dict can be passed whole: `compile(model, **{"template": ..., "mode": ...,
    "freezing": ..., "inductor_config": {...}})`.
    `dynamic` goes to torch.compile. None (the default, as torch.compile's): the first shape
    is compiled static, a second one makes Dynamo hand over symbolic sizes, compiled once
    for every size (or once per shape where that fails: capture/aot.py). True: symbolic from
    the first call. False: Dynamo recompiles a static graph per shape."""
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
        compiled = compile_graph(gm, example_inputs, config, name)
    except Exception as exc:
        if not data_dependent:
            raise
        log.warning("miniinductor runs this %s graph eagerly: its data-dependent sizes (from %s) could not be "
                    "compiled around: %s: %s", name, ", ".join(data_dependent), type(exc).__name__,
                    (str(exc).strip().splitlines() or [""])[0][:200])
        return make_boxed_func(gm.forward)
    if data_dependent:
        log.info("%s: %s ran in ATen (data-dependent sizes); the rest is compiled", name, ", ".join(data_dependent))
    compiled.fx_graph_module = dynamo_gm
    for hook in after_compile:
        hook(compiled, config)
    call = compiled.__call__   # through the instance: debug tools may swap compiled.call
    cpu_inputs = [n for n, b in compiled.graph.graph_inputs.items() if b.get_device().type == "cpu"
                  and n in compiled.graph.graph_input_names]
    if config.cudagraphs and compiled.graph.current_device().type == "cuda" and cpu_inputs:
        # a replay reads nothing from (and writes nothing into) CPU memory: Adam's step counts
        # would stop advancing (Inductor skips such graphs too)
        log.info("cudagraphs: %s is not recorded: it takes CPU tensors (%s)", name, ", ".join(cpu_inputs))
    elif config.cudagraphs:
        if compiled.graph.current_device().type == "cuda":
            targets = set(compiled.graph.mutations.values())
            call = cudagraphify(call, [k for k, n in enumerate(compiled.graph.graph_input_names) if n in targets])
        else:
            log.info("cudagraphs: %s runs on the CPU, so there is nothing to record", name)
    call = runtime_call(call, gm)
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



