"""GraphLowering: run the ATen FX graph once, building loop IR instead of tensors.

Mirrors `torch/_inductor/graph.py`. It is an `fx.Interpreter`: each placeholder becomes
an `InputBuffer`, each `call_function` node calls the op's lowering (registry.py) or,
when there is none, becomes an `ExternKernel` that calls ATen at run time; the output
node realizes every returned value with the strides eager would give it.

Lowering phase (ATen graph in, IR buffers out). Sizes may be symbolic; the device picks
the backend policy; `realize_where_demanded` decides which values become buffers.
Simplified: one device per graph (details: docs/design_notes.md).
"""
from __future__ import annotations

import functools
import logging
import operator

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from .. import metrics
from ..codegen.policy import BackendPolicy, policy_for
from ..config import Config
from ..ir.indexing import index_vars
from ..ir.nodes import (
    SUPPORTED_DTYPES,
    Buffer,
    ComputedBuffer,
    ExternKernel,
    InputBuffer,
    IRNode,
    Layout,
    Loops,
    MultiOutput,
    MutationLayout,
    Pointwise,
    ReinterpretView,
    StorageBox,
    View,
    strided_view_of,
    unwrap_buffer,
)
from ..ir.sizevars import SizeVarAllocator, SymbolicUnsupported, as_expr, as_exprs, shape_env_of
from ..ops_handler import RecordingHandler
from ..passes import EXTERN_LAYOUTS
from ..virtualized import V
from .registry import find_lowering
from .strides import eager_view, read_by_as_strided, same_strides, storable_stride

log = logging.getLogger("miniinductor")

#: ops that every compiler leaves to a library (matmul, convolution, sorting...):
#: falling back on them is the plan, so they are logged quietly (extensions add their ops)
EXTERN_BY_DESIGN = {
    "mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "convolution", "sort", "topk",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward", "native_dropout", "rand", "randn",
    "bernoulli", "convolution_backward",
}
_logged_ops: set[str] = set()
#: ops that cost far more than an add; on the CPU a value computed with one and read twice
#: is stored once rather than computed twice (softmax's exp(x - max) feeds both the sum and
#: the output: the output is then written in place over it)
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "erf", "sin", "cos", "pow"}
TRANSCENDENTAL_COST = 30
REALIZE_ACC_READS = 8   # a pointwise body of more loads is stored (realize_where_demanded)


def _tensors_in(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)


def graph_devices(gm: torch.fx.GraphModule, example_inputs=()) -> set[torch.device]:
    """The devices of a graph's tensors: its inputs' and every node's `meta["val"]`, so that a
    graph with no tensor inputs (`torch.arange(8, device="cuda") * 2`) is still placed where
    it makes its tensors (as Inductor's `device_types`). Not counted: 0-d CPU tensors, and
    constants with what is computed from them alone (`get_attr` moves those). Outputs count."""
    from_constants: set[str] = set()
    found = {t.device for t in _tensors_in(list(example_inputs)) if _places_graph(t)}
    for node in gm.graph.nodes:
        inputs = node.all_input_nodes
        if node.op == "get_attr" or (node.op == "call_function" and inputs and "device" not in node.kwargs
                                     and all(n.name in from_constants for n in inputs)):
            from_constants.add(node.name)
            continue
        if node.op == "output":   # a constant returned stays where eager has it
            values = [n.meta.get("val") for n in inputs if n.name in from_constants]
        else:
            values = node.meta.get("val")
        found |= {t.device for t in _tensors_in(values) if _places_graph(t)}
    return found


def _places_graph(t: torch.Tensor) -> bool:
    return t.device.type != "cpu" or t.dim() > 0


def graph_device(gm: torch.fx.GraphModule, example_inputs=()) -> torch.device:
    """The one device the graph's kernels run on (the CPU if it makes no tensors). A graph
    that mixes devices raises ValueError: one kernel cannot read memory of two devices, and
    C++ kernels writing CUDA memory crash; compile_fx runs such graphs eagerly."""
    devices = graph_devices(gm, example_inputs)
    if len(devices) > 1:
        raise ValueError(f"tensors on several devices ({', '.join(sorted(map(str, devices)))})")
    return devices.pop() if devices else torch.device("cpu")


class GraphLowering(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, example_inputs, config: Config, name="graph",
                 policy: BackendPolicy | None = None):
        super().__init__(gm)
        self.config = config
        self.name = name
        self.example_inputs = example_inputs
        self.graph_inputs: dict[str, InputBuffer] = {}
        self.graph_input_names: list[str] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.buffers: list[Buffer] = []
        self.outputs: list = []
        self.node_values: dict[str, object] = {}   # FX node name → the IR value it lowered to
        self._node: torch.fx.Node | None = None
        self._device = graph_device(gm, example_inputs)
        self.policy = policy or policy_for(self._device, config)   # what is backend-specific
        self.layout_opt = False   # channels-last convolutions: the layout extension decides (ext/layout)
        self._by_name: dict[str, Buffer] = {}
        self.sizevars = SizeVarAllocator(shape_env_of(example_inputs, gm))   # sizes: ints or of s0, s1, u0...
        self.unbacked_bindings: dict[str, list] = {}   # extern buffer → [(u0, ".size(0)")]: bound after it runs
        self.symbol_inputs: dict[str, object] = {}   # a SymInt input's name → its symbol
        # input mutations, which AOTAutograd leaves in the graph as `aten.copy_(input, new)`
        self.mutated_inputs = {n.args[0].name for n in gm.graph.nodes if n.target is torch.ops.aten.copy_.default
                               and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"}
        self.mutations: dict[str, str] = {}   # buffer → the input whose memory it is stored into
        self.reductions: dict[tuple, tuple] = {}     # lowering/reductions.make_reduction's: computed once

    # ------------------------------------------------------------------ helpers for lowerings
    def current_target(self):
        return self._node.target

    @functools.cached_property
    def fx_targets(self) -> dict:
        """FX node name → its target (kernel names are made of their origins' targets)."""
        return {n.name: n.target for n in self.module.graph.nodes}

    def current_node_name(self) -> str:
        return self._node.name

    def current_size(self) -> list:
        """The current node's output size (ints, or expressions of the size symbols)."""
        return as_exprs(self.current_meta().shape)

    def current_meta(self):
        val = self._node.meta.get("val") if self._node is not None else None
        return val if isinstance(val, torch.Tensor) else None

    def current_fx_node(self) -> torch.fx.Node:
        return self._node

    def current_input_node(self, k: int):
        """The FX node of the current node's k-th argument (None if it is not a node)."""
        arg = self._node.args[k] if self._node is not None and k < len(self._node.args) else None
        return arg if isinstance(arg, torch.fx.Node) else None

    def current_device(self):
        return self._device

    def register_buffer(self, buf: Buffer) -> Buffer:
        buf.name = f"buf{len(self.buffers)}"
        self.buffers.append(buf)
        self._by_name[buf.name] = buf
        return buf

    def get_buffer(self, name: str) -> Buffer:
        """The input or buffer called `name`; KeyError if there is none."""
        if name in self.graph_inputs:
            return self.graph_inputs[name]
        if name not in self._by_name:
            raise KeyError(f"{self.name} has no buffer or input named {name!r}")
        return self._by_name[name]

    def get_dtype(self, name: str) -> torch.dtype:
        return self.get_buffer(name).get_dtype()

    def mutate_input(self, target: InputBuffer, value: IRNode) -> ComputedBuffer:
        """`target.copy_(value)`: a buffer computed straight into the input's memory, through its
        own strides (Inductor's `mutate_to`); the scheduler runs every reader of the input's
        old value before it. The new value is first stored apart where computing it reads
        another input the graph overwrites (`a.copy_(b); b.copy_(old_a)` would otherwise need
        each kernel before the other), or this input at another element than the one it
        replaces (`x.copy_(x.flip(0))`: elements would be overwritten before they are read)."""
        name, lay = target.get_name(), target.layout
        layout = MutationLayout(lay.device, lay.dtype, list(lay.size), list(lay.stride), lay.offset, target=name)
        index = index_vars("i", layout.size)
        recorder = RecordingHandler()
        with V.set_ops_handler(recorder):
            value.make_loader()(index)
        here = sympy.expand(layout.make_indexer()(index))
        if any(d.name in self.mutated_inputs and (d.name != name or sympy.expand(d.index - here) != 0)
               for d in recorder.reads):
            value = StorageBox(Pointwise(value.get_device(), value.get_dtype(), value.make_loader(), value.get_size()))
            value.realize()
        body = Pointwise(value.get_device(), value.get_dtype(), value.make_loader(), value.get_size())
        buf = self.register_buffer(ComputedBuffer(None, layout, body))
        self.mutations[buf.get_name()] = name
        return buf

    # ------------------------------------------------------------------ the interpreter
    def run(self):
        """Lower every node (the passes after it are compile_fx.lower's)."""
        with V.set_graph_handler(self):
            super().run(*self.example_inputs)
        return self

    def run_node(self, node):
        self._node = node
        try:
            if node.op == "call_function" and isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat)) \
                    and not self._makes_unbacked():   # (an .item() runs, in ATen)
                # computed from sizes: its expression (sym_size, s0*16; a float: ToFloat(s1), IntTrueDiv(4, s0))
                value = as_expr(node.meta["val"])
            else:
                value = super().run_node(node)
            self.node_values[node.name] = value
            return value
        except SymbolicUnsupported:
            raise
        except Exception as exc:   # with symbolic sizes: this graph is compiled per shape instead
            if self.sizevars.symbolic:
                first_line = (str(exc).strip().splitlines() or [""])[0]
                raise SymbolicUnsupported(f"{node.target}: {type(exc).__name__}: {first_line}") from exc
            raise
        finally:
            self._node = None

    def placeholder(self, target, args, kwargs):
        example = super().placeholder(target, args, kwargs)
        name = self._node.name
        if not isinstance(example, torch.Tensor):   # a size (SymInt) or Python scalar: a constant
            self.graph_input_names.append(name)      # (the wrapper binds a SymInt's symbol)
            if isinstance(example, torch.SymInt):
                self.symbol_inputs[name] = as_expr(example)
            return as_expr(example)
        layout = Layout(example.device, example.dtype, as_exprs(example.shape), as_exprs(example.stride()))
        buf = InputBuffer(name, layout)
        self.graph_inputs[name] = buf
        self.graph_input_names.append(name)
        return buf

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        if not isinstance(value, torch.Tensor):
            return value
        name = f"const_{target.replace('.', '_')}"
        if value.device != self._device:
            # a constant (a scalar of `y[...] = 0.5`, a window's coefficients) joins the graph's
            # device (see graph_devices) -- as a real tensor, not a fake one: AOTAutograd calls
            # us inside its fake mode
            with unset_fake_temporarily():
                value = value.to(self._device)
        self.constants[name] = value
        buf = InputBuffer(name, Layout(value.device, value.dtype, list(value.shape), list(value.stride())))
        self.graph_inputs[name] = buf
        return buf

    def call_function(self, target, args, kwargs):
        if target is operator.getitem:
            return args[0][args[1]]
        if target is torch.ops.aten._assert_scalar.default:
            return None   # Dynamo's check of a data-dependent size's range (u0 >= 0): no code
        if getattr(target, "__module__", None) == "_operator" and all(isinstance(a, (int, sympy.Basic)) for a in args):
            return as_expr(target(*map(sympy.sympify, args)))   # size arithmetic (ints, comparisons)
        lowering = find_lowering(target, self.config)
        reason = self._unsupported_reason(target, args, lowering)
        created = len(self.buffers)
        if reason is None:
            try:
                result = lowering(*args, **kwargs)
            except NotImplementedError as exc:
                reason = f"lowering declined: {exc}"
        if reason is not None:
            result = self.fallback(target, args, kwargs, reason)
        else:
            self._record_origins(result, args, self.buffers[created:])
        realize_where_demanded(self, result)
        return result

    def kernel_backend(self) -> str:
        """Who writes this graph's kernels: 'cpp' or 'triton' (see codegen/policy.py)."""
        return self.policy.name

    def _record_origins(self, result, args, created=()):
        """Tag the loop bodies this node produced (its result, and buffers its lowering
        stored along the way, such as the mean `var` stores before its sum of squares) with its name
        and the names of the unrealized (inlined) inputs they read; stored inputs are
        loaded, not computed."""
        def loops_of(x, inlined_only=False):
            while isinstance(x, View):
                x = x.data
            if isinstance(x, StorageBox):
                x = x.data
            if isinstance(x, ComputedBuffer) and not inlined_only:
                return x.data
            return x if isinstance(x, Loops) else None
        flat_args = [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else [arg])]
        inherited = set().union(*[loops.origins for loops in (loops_of(a, True) for a in flat_args) if loops])
        for r in [*(result if isinstance(result, (list, tuple)) else [result]), *created]:
            loops = loops_of(r)
            if loops is not None and not loops.origins:
                loops.origins |= inherited | {self._node.name}

    def _unsupported_reason(self, target, args, lowering):
        if self._makes_unbacked():
            return "data-dependent output size"
        if lowering is None:
            return "no lowering"
        if self.config.fallback_all:
            return "fallback_all option"
        if str(target) in self.config.fallback_ops:
            return "fallback_ops option"
        for t in _tensors_in(self._node.meta.get("val")):
            if t.dtype not in SUPPORTED_DTYPES:
                return f"dtype {t.dtype} not supported by our kernels"
        for a in args:
            items = a if isinstance(a, (list, tuple)) else [a]
            for x in items:
                if isinstance(x, IRNode) and x.get_dtype() not in SUPPORTED_DTYPES:
                    return f"dtype {x.get_dtype()} not supported by our kernels"
        return None

    # ------------------------------------------------------------------ fallbacks
    def realize_for_extern(self, x):
        """An IR value as something ATen can take: a buffer or a strided view of one."""
        if isinstance(x, (list, tuple)):
            return type(x)(self.realize_for_extern(v) for v in x)
        if not isinstance(x, IRNode):
            return x
        x.realize()
        found = strided_view_of(x)
        if found is None:  # e.g. a reshape of a transpose: copy it to contiguous memory
            box = StorageBox(Pointwise(x.get_device(), x.get_dtype(), x.make_loader(), x.get_size()))
            return box.realize()
        buf, layout = found   # the buffer itself where only a size-1 dim's stride differs (its own is eager's)
        if layout.size == buf.layout.size and same_strides(buf.layout, layout.stride) and layout.offset == 0:
            return buf
        return ReinterpretView(buf, layout)

    def fallback(self, target, args, kwargs, reason):
        op_name = str(getattr(target, "overloadpacket", target)).split(".")[-1]
        metrics.fallback_count += 1
        metrics.fallback_ops[str(target)] += 1
        if str(target) not in _logged_ops:
            _logged_ops.add(str(target))
            quiet = op_name in EXTERN_BY_DESIGN or self.config.fallback_all or str(target) in self.config.fallback_ops
            level = logging.INFO if quiet else logging.WARNING
            log.log(level, "falling back to ATen for %s (%s)", target, reason)
        args, stride = self._extern_layout(args)
        args = self.realize_for_extern(args)
        kwargs = {k: self.realize_for_extern(v) for k, v in kwargs.items()}
        meta = self._node.meta.get("val")

        def layout_of(t):
            return Layout(t.device, t.dtype, as_exprs(t.shape), stride or as_exprs(t.stride()))
        origins = [self._node.name]   # as a ComputedBuffer's: the FX nodes it was lowered from
        if isinstance(meta, torch.Tensor):
            buf = self.register_buffer(ExternKernel(None, layout_of(meta), target, args, kwargs, reason, origins))
            self._bind_unbacked(buf, [(s, f".size({k})") for k, s in enumerate(as_exprs(meta.shape))])
            return buf
        kernel = self.register_buffer(ExternKernel(None, None, target, args, kwargs, reason, origins))
        if isinstance(meta, torch.SymInt) and self.sizevars.is_unbacked(as_expr(meta)):   # an .item()
            self._bind_unbacked(kernel, [(as_expr(meta), "")])
            return as_expr(meta)
        if isinstance(meta, (list, tuple)):
            return tuple(self.register_buffer(MultiOutput(None, layout_of(t), kernel, i))
                         if isinstance(t, torch.Tensor) else None for i, t in enumerate(meta))
        return None

    def _extern_layout(self, args) -> tuple[list, list | None]:
        """(the args the current extern op gets, its output's strides, None: the meta's): the
        first answer of an enabled extension's `EXTERN_LAYOUTS` entry, else as they are."""
        for extension, constrain in EXTERN_LAYOUTS:
            if self.config.uses(extension) and (found := constrain(self, self._node, args)) is not None:
                return found
        return list(args), None

    def _makes_unbacked(self) -> bool:
        """Does the current node's value have a data-dependent size its inputs do not?"""
        made = free_unbacked_symbols(self._node.meta.get("val"))
        return bool(made - set().union(*(free_unbacked_symbols(a.meta.get("val")) for a in self._node.all_input_nodes)))

    def _bind_unbacked(self, buf, candidates):
        """Record where the wrapper reads each new data-dependent symbol from: `buf`'s result."""
        bound = {sym for pairs in self.unbacked_bindings.values() for sym, _ in pairs}
        new = [(s, src) for s, src in candidates if self.sizevars.is_unbacked(s) and s not in bound]
        if new:
            self.unbacked_bindings[buf.get_name()] = new

    # ------------------------------------------------------------------ outputs
    def output(self, target, args, kwargs):
        nodes, values = self._node.args[0], args[0]  # the FX nodes hold the metadata
        if not isinstance(values, (list, tuple)):  # a graph returning one bare value
            nodes, values = [nodes], [values]
        metas = [n.meta.get("val") if isinstance(n, torch.fx.Node) else None for n in nodes]
        self.outputs = [self.realize_output(v, m) for v, m in zip(values, metas)]
        return self.outputs

    def realize_output(self, value, meta):
        """Each output becomes a buffer or a strided view of one, with eager's strides."""
        if not isinstance(value, IRNode):
            return value
        stride = storable_stride(value.get_size(), meta.stride()) if isinstance(meta, torch.Tensor) else None
        if isinstance(value, StorageBox) and isinstance(value.data, Loops):
            return value.realize(stride)
        buf = unwrap_buffer(value)
        if buf is not None and same_strides(buf.layout, stride):
            return eager_view(buf, buf.layout, meta)
        value.realize()
        found = strided_view_of(value)
        # A view whose strides are not eager's (e.g. the transpose of an alias realized
        # contiguous) is copied: a saved activation is read by the backward graph, which
        # was compiled against eager's strides and reinterprets its inputs with them.
        if found is not None and same_strides(found[1], stride):
            return eager_view(*found, meta)
        box = StorageBox(Pointwise(value.get_device(), value.get_dtype(), value.make_loader(), value.get_size()))
        return box.realize(stride)

    def output_names(self) -> set[str]:
        return {o.get_name() for o in self.outputs if isinstance(o, (Buffer, ReinterpretView))}

    def __str__(self):
        lines = [f"# inputs: {', '.join(self.graph_input_names)}"]
        lines += [str(b) for b in self.buffers]
        lines.append(f"# outputs: {[getattr(o, 'get_name', lambda: o)() for o in self.outputs]}")
        return "\n".join(lines)


def realize_where_demanded(graph: GraphLowering, value):
    """The realization pass, run on the value of each FX node as it is lowered: which values
    stop being inlined into their consumers and become buffers.
      * reductions and extern outputs always (their lowerings make buffers);
      * graph outputs, as soon as they are computed, with eager's strides (so that the buffers
        they read can be freed early, and consumers load them); so too values whose memory an
        `as_strided` reads (through views or not): it addresses eager's layout;
      * a pointwise value read by more than one FX user *and* expensive to recompute
        (`_expensive`: Inductor's `StorageBox.mark_reuse`); cheap ones are recomputed;
      * a pointwise value whose body loads more than REALIZE_ACC_READS elements (a pooling
        window), whoever reads it: inlined into a reduction, its loads would run at the
        reduction's parallelism, a few programs per row (Inductor's `realize_acc_reads_threshold`)."""
    if not (isinstance(value, StorageBox) and isinstance(value.data, Pointwise)):
        return
    node = graph.current_fx_node()
    if any(user.op == "output" for user in node.users) or read_by_as_strided(node):
        graph.realize_output(value, node.meta.get("val"))   # stored as eager stores it
    else:
        recorder = _record(value.data)   # (once: both rules read it)
        if len(recorder.reads) > REALIZE_ACC_READS or len(node.users) > 1 and _expensive(graph, recorder):
            value.realize()


def _record(node: Pointwise) -> RecordingHandler:
    """The loads and ops of one run of `node`'s body."""
    with V.set_ops_handler(RecordingHandler()) as recorder:
        node.inner_fn(index_vars("i", node.ranges))
    return recorder


def _expensive(graph: GraphLowering, recorder: RecordingHandler) -> bool:   # (of a body `_record` ran)
    transcendental = sum(op in TRANSCENDENTAL for op in recorder.op_names) if graph.policy.stores_are_cheap else 0
    return (len({d.name for d in recorder.reads}) > graph.config.realize_reads_threshold
            or recorder.op_count + TRANSCENDENTAL_COST * transcendental > graph.config.realize_opcount_threshold)
