"""Capture: Dynamo's FX graph → AOTAutograd → ATen forward (and backward) graphs.

Mirrors the capture half of `compile_fx` in `torch/_inductor/compile_fx.py`. AOTAutograd
(through Dynamo's `aot_autograd` helper, as Inductor: DDP's graph splitting reads its call
count, docs/design_notes.md) traces the Dynamo graph through the ATen dispatcher with our
decompositions and functionalizes it; when gradients are needed, Inductor's partitioner
splits it into a forward and a backward (a min cut: cheap pointwise values are recomputed),
`partition` labelling each saved activation with the forward buffer whose memory it is, for
the backward's memory plan. Each graph goes to `compile_fx_inner`.

Symbolic sizes are compiled generic in them (ir/sizevars.py); where that raises
`SymbolicUnsupported`, the graph is compiled once per concrete shape (specialize.py; a
lazily compiled backward that fails alone is re-traced per shape). Compiled autograd's
backward graph (tensors boxed in one list) is flattened first, as in Inductor. Input
mutations stay in the graph (`keep_inference_input_mutations`): a graph writing its inputs
(an optimizer step, BatchNorm's statistics) ends with `aten.copy_(input, new)`, stored
straight into the input. `autocast_enabled` traces under `torch.autocast`: the graphs hold its casts.

Extensions act through passes.py, with a Context of this capture: the `capture` stage may wrap
the inference compiler (ext/freezing), `joint_graph` rewrites the joint graph before the
partitioner (ext/joint_graph); CAPTURE_WRAPPERS wrap `capture` itself (ext/fx_graph_cache).
"""
from __future__ import annotations

import contextlib
import functools
import operator

import torch
import torch._functorch.partitioners as partitioners
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.utils import GmWrapper, flatten_graph_inputs
from torch._functorch.partitioners import min_cut_rematerialization_partition

from ..config import Config
from ..ir.sizevars import SymbolicUnsupported
from ..passes import PARTITIONER_OPS, Context, run_stage
from .decompositions import decomposition_table
from .specialize import PerShape, Specializer, _compile_id, has_symbolic_inputs
from .specialize import log as dynamic_log


def capture(gm, example_inputs, config: Config, compile_fx_inner):
    """Dynamo's graph → ATen graphs, each handed to `compile_fx_inner(gm, example_inputs,
    config=, name=, dynamo_gm=)` (the driver passes its own: capture/ does not import it)."""
    again = functools.partial(capture, config=config, compile_fx_inner=compile_fx_inner)
    if any(isinstance(x, (list, tuple, dict)) for x in example_inputs):
        # compiled autograd's backward graph takes its tensors boxed in one list: flatten them
        # (and unflatten around the graph), as Inductor's compile_fx does
        return flatten_graph_inputs(gm, example_inputs, again)
    if has_symbolic_inputs(example_inputs):  # dynamic shapes: one compile for every size ...
        try:
            return _capture(gm, example_inputs, config, compile_fx_inner, symbolic=True)
        except SymbolicUnsupported as exc:   # ... or, where that fails, one per concrete shape
            _fell_back(f"graph {_compile_id()} is compiled once per shape: {exc}")
            return Specializer(gm, again)
    return _capture(gm, example_inputs, config, compile_fx_inner)


def _capture(gm, example_inputs, config: Config, compile_fx_inner, symbolic=False):
    flattened = isinstance(gm, GmWrapper)
    dynamo_gm = gm.gm if flattened else gm   # Dynamo's graph, for the trace folder

    def compiler(name):
        compile_ = functools.partial(compile_fx_inner, config=config, name=name, dynamo_gm=dynamo_gm)
        # compile_fx_inner and its result are hidden from Dynamo already: `aot_autograd` must not wrap them (drops `_boxed_call`)
        if symbolic:   # any failure → SymbolicUnsupported; the backward, compiled lazily, falls back alone
            compile_ = functools.partial(_symbolic if name != "backward" else _backward_or_per_shape, compile_)
        compile_._is_wrapped_bw_compiler = True
        return compile_
    training = _needs_grad(gm, example_inputs)
    ctx = Context(config, None, _device(example_inputs), example_inputs=example_inputs, gm=gm)
    ctx.facts.update(training=training, flattened=flattened)
    dynamo_gm.meta["capture_passes"] = ctx.records   # the report shows these passes (no CompiledGraph has them)
    inference = compiler("inference")
    wrapped = run_stage("capture", inference, ctx)
    if wrapped is not inference:
        if symbolic:   # a failure in a capture pass's own work (freezing) falls back per shape too
            wrapped = functools.partial(_symbolic, wrapped)
        wrapped._is_wrapped_bw_compiler = True
    with _autocast(config, example_inputs):
        return aot_autograd(
            fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
            inference_compiler=wrapped, decompositions=decomposition_table(
                training=training, backend=_kernel_backend(config, example_inputs), extensions=config.extensions),
            partition_fn=functools.partial(partition, ctx=ctx), keep_inference_input_mutations=True,
        )(gm, example_inputs)


def _kernel_backend(config: Config, example_inputs) -> str:
    """Who will write this graph's kernels: "triton" (a GPU tensor, or cpu_backend="triton") or "cpp"."""
    triton = config.cpu_backend == "triton" or any(
        isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in example_inputs)
    return "triton" if triton else "cpp"


def partition(joint_module, joint_inputs, *, ctx: Context, **kwargs):
    """The joint graph's passes (passes.py's `joint_graph` stage; ctx.facts["num_fwd_outputs"]
    counts the forward's outputs), then Inductor's partitioner; then each activation the
    backward takes is labelled with the forward value whose memory it is
    (`node.meta["saved_storage"]`: (name, bytes), or None for a view of a forward input, a
    parameter's transpose), for the memory plan (memory_planning.freeable_inputs): a view is
    freed only with the last tensor of its storage."""
    ctx.facts["num_fwd_outputs"] = kwargs["num_fwd_outputs"]
    joint_module = run_stage("joint_graph", joint_module, ctx)
    with partitioner_knows_our_ops():
        fw_module, bw_module = min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
    forward = {n.name: n for n in fw_module.graph.nodes}
    for node in bw_module.graph.find_nodes(op="placeholder"):
        root = forward.get(node.name)
        while root is not None and _views_first_arg(root):
            root = root.args[0]
        val = root.meta.get("val") if root is not None else None
        if root is not None and root.op == "placeholder":
            node.meta["saved_storage"] = None
        elif isinstance(val, torch.Tensor):
            node.meta["saved_storage"] = (root.name, val.untyped_storage().nbytes())
    return fw_module, bw_module


def _views_first_arg(node) -> bool:
    """Is this forward value a view of its first argument (a view op, `_unsafe_view`, or an
    item of a view op's tuple result: `split`)?"""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    if node.target is operator.getitem:
        return _views_first_arg(node.args[0])
    return getattr(node.target, "is_view", False) or node.target is torch.ops.aten._unsafe_view.default


def _device(example_inputs) -> torch.device:
    """The first tensor input's device (the CPU when there are no tensor inputs)."""
    return next((x.device for x in example_inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))


def _autocast(config: Config, example_inputs):
    """torch.autocast for the inputs' device."""
    if not config.autocast_enabled:
        return contextlib.nullcontext()
    return torch.autocast(_device(example_inputs).type, dtype=getattr(torch, config.autocast_dtype))


@functools.lru_cache(maxsize=None)
def _fell_back(message: str):
    dynamic_log.info(message)


def _symbolic(compile_, gm, example_inputs):
    """`compile_` on a graph with symbolic sizes: whatever fails in it (lowering names the op;
    codegen, the C++ build) is a SymbolicUnsupported, so that the graph is compiled per shape
    rather than not at all (the same failure in a static compile then surfaces as itself)."""
    try:
        return compile_(gm, example_inputs)
    except SymbolicUnsupported:
        raise
    except Exception as exc:
        raise SymbolicUnsupported(f"{type(exc).__name__}: {_first_line(exc)}") from exc


def _first_line(exc) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _backward_or_per_shape(compile_, gm, example_inputs):
    """The backward graph generic in its sizes, or, where it cannot be (its forward already
    is, and runs), a per-shape compile of it: re-traced on each new shape's real inputs."""
    try:
        return _symbolic(compile_, gm, example_inputs)
    except SymbolicUnsupported as exc:
        _fell_back(f"graph {_compile_id()}: its backward is compiled once per shape: {exc}")
        return PerShape(gm, compile_)


def _needs_grad(gm, example_inputs) -> bool:
    """Will AOTAutograd build a backward graph? (grad mode on and something requires grad)"""
    if not torch.is_grad_enabled():
        return False
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)] + list(gm.parameters())
    return any(t.requires_grad for t in tensors)


@contextlib.contextmanager
def partitioner_knows_our_ops():
    """Our custom ops (passes.PARTITIONER_OPS) on the partitioner's fusible and recomputable
    lists, as Inductor's prims are."""
    default_op_list = getattr(partitioners, "get_default_op_list", None)
    if default_op_list is None or not PARTITIONER_OPS:   # another torch: only recomputation is lost
        yield
        return

    def with_ours():
        ops = default_op_list()
        for name in ("recomputable_ops", "fusible_ops"):
            getattr(ops, name).update(PARTITIONER_OPS)
        return ops
    partitioners.get_default_op_list = with_ours
    try:
        yield
    finally:
        partitioners.get_default_op_list = default_op_list
