"""The capture level of the cache: Dynamo's graph → what Dynamo calls, AOTAutograd skipped on a hit.

Mirrors `AOTAutogradCache` of `torch/_functorch/_aot_autograd/autograd_cache.py`: its key
(`AOTAutogradCacheDetails`: Dynamo's graph, its inputs, grad mode, autocast, deterministic
algorithms, functorch's config), its `check_node_safe` (used as it is), and its entry, which
names the FxGraphCache entry of the compiled graph. It wraps `capture` (passes.CAPTURE_WRAPPERS).
The key (key.capture_details) hashes Dynamo's graph (its code and its subgraphs', the contents
of its tensor attributes), each input's type, size, stride, storage offset, dtype, device and
requires_grad, that global state, every option and the versions. A miss runs capture as
usual and watches its inference compiler: the compile's AOTAutograd metadata
(`TracingContext.fw_metadata`, a ViewAndMutationMeta) says whether the wrapper AOTAutograd
puts around the compiled graph does anything; when it does not, the entry records the
compiled-graph entry (store.py) of the inference graph and its checksum. A hit checks and
loads that entry as the ATen level's hit does, runs the `runtime` stage as compile_fx_inner
does (compile_fx.finish_compile), and returns what AOTAutograd returns for such a graph:
`f(*args)` → a list, run with grad mode off. No AOTAutograd trace, no decomposition table,
no lowering: Dynamo is what is left of a warm start.

Simplified: inference graphs with a trivial wrapper only. Everything else bypasses this level
(the ATen level still caches the graphs AOTAutograd makes), its reason in the `cache` log:
up front (`bypass_reason`), what the ATen level bypasses, inputs boxed in a list (compiled
autograd), symbolic sizes, inputs that are not plain strided tensors, gradients needed
(training), parameters or buffers of Dynamo's graph itself, inputs sharing storage
(AOTAutograd's dedup and synthetic bases), autocast, a `capture` pass (freezing), nodes
`check_node_safe` rejects or outputs that are not plain tensors; then, once AOTAutograd has
run (`why_not_stored`; kept as an entry, so that later compiles bypass at once): mutated
inputs, outputs that alias an input or another output, intermediate bases, subclasses,
effect tokens, functionalized RNG, a change of grad mode inside the graph, or anything but a
single inference graph. Inductor also caches training graphs (with their backward), replays
views and mutations from the saved metadata, and checks the ShapeEnv guards it recorded.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch
from torch._dynamo.utils import GmWrapper
from torch._subclasses.fake_tensor import FakeTensor
from torch.multiprocessing.reductions import StorageWeakRef

from ... import compile_fx
from ...capture.aot import _needs_grad
from ...codegen.policy import policy_for
from ...passes import PASSES, Context
from ...runtime.cpp_builder import cache_dir
from . import key as keys
from .graph import _bypasses, _hit, log, why_missed
from .store import CorruptEntry, entry_path, read_record, write_record

#: what the capture level did in this process (Inductor: counters["aot_autograd"]["autograd_cache_hit"], ...)
counters = {"hit": 0, "miss": 0, "bypass": 0, "rebuilt": 0}


def wrap(capture):
    def cached_capture(gm, example_inputs, config, compile_fx_inner):
        if not config.fx_graph_cache:
            return capture(gm, example_inputs, config, compile_fx_inner)
        reason = (_bypasses[-1] if _bypasses else None) or bypass_reason(gm, example_inputs, config)
        if reason is not None:
            _bypass(reason)
            return capture(gm, example_inputs, config, compile_fx_inner)
        found = keys.capture_details(gm, example_inputs, config, _device(gm, example_inputs))
        structure = keys.structure(gm)
        path = entry_path(structure, keys.full_key(structure, found), "aotgraph")
        rebuilt = False
        if path.exists():
            try:
                record = _read(path)
                if "bypass" not in record:
                    return _hit_capture(path, record, gm, example_inputs, config)
                _bypass(f"{record['bypass']} (as an earlier compile of this graph found)")
                return capture(gm, example_inputs, config, compile_fx_inner)
            except CorruptEntry as exc:
                counters["rebuilt"] += 1
                rebuilt = True
                log.info("rebuilt capture: the entry %s %s", path, exc)
                path.unlink(missing_ok=True)
        calls = []
        compiled = capture(gm, example_inputs, config, _watching(compile_fx_inner, calls))
        _store(path, found, gm, example_inputs, calls, rebuilt)
        return compiled
    return cached_capture


def _read(path: Path) -> dict:
    try:
        _, record = read_record(path)
    except CorruptEntry as exc:
        raise CorruptEntry(f"is corrupted: {exc}") from None
    if not isinstance(record.get("bypass"), str) and not {"entry", "sha256", "device"} <= record.keys():
        raise CorruptEntry("is corrupted: its record lacks the inference entry")
    return record


def _bypass(reason: str) -> None:
    counters["bypass"] += 1
    log.info("bypass capture: %s", reason)


def _device(gm, example_inputs) -> torch.device:
    """The one device of Dynamo's graph (its inputs and the values it makes), as
    lowering/graph.graph_device decides for an ATen graph; ValueError for several."""
    values = list(example_inputs) + [n.meta.get("example_value") for n in gm.graph.nodes]
    devices = {t.device for t in values if isinstance(t, torch.Tensor) and (t.device.type != "cpu" or t.dim() > 0)}
    if len(devices) > 1:
        raise ValueError(f"tensors on several devices ({', '.join(sorted(map(str, devices)))})")
    return devices.pop() if devices else torch.device("cpu")


def bypass_reason(gm, example_inputs, config) -> str | None:
    """Why this Dynamo graph is neither looked up nor stored at the capture level, or None."""
    reason = keys.bypass_reason(gm, example_inputs, config, bool(compile_fx._collectors))
    if reason is not None:
        return reason
    if isinstance(gm, GmWrapper) or any(isinstance(x, (list, tuple, dict)) for x in example_inputs):
        return "its inputs are boxed in a list (compiled autograd's backward graph)"
    if any(keys._symbolic(n.meta.get("example_value")) for n in gm.graph.nodes):
        return "the graph has symbolic sizes (its guards are not recorded: only static graphs are cached)"
    for k, x in enumerate(example_inputs):
        if type(x) not in (torch.Tensor, torch.nn.Parameter):
            return f"input {k} is a {type(x).__name__}, not a plain tensor"
        if x.layout != torch.strided or x.is_conj() or x.is_neg():
            return f"input {k} is not a plain strided tensor ({x.layout}, conj {x.is_conj()}, neg {x.is_neg()})"
    if _needs_grad(gm, example_inputs):
        return "gradients are needed (training: a forward and a backward; only inference is cached at this level)"
    if next(gm.named_parameters(), None) is not None or next(gm.named_buffers(), None) is not None:
        return "Dynamo's graph holds parameters or buffers of its own (their values are not keyed)"
    return _sharing(example_inputs) or _global_reason(gm, example_inputs, config) or _unsafe(gm)


def _sharing(example_inputs) -> str | None:
    seen = {}
    for k, x in enumerate(example_inputs):
        first = seen.setdefault(StorageWeakRef(x.untyped_storage()), k)
        if first != k:
            return f"inputs {first} and {k} share storage (AOTAutograd dedups them or makes a synthetic base)"
    return None


def _global_reason(gm, example_inputs, config) -> str | None:
    if config.autocast_enabled or torch._C._is_any_autocast_enabled():
        return "autocast is on (AOTAutograd's wrapper turns it off around the compiled graph)"
    try:
        _device(gm, example_inputs)
    except ValueError as exc:
        return f"the graph has {exc}"
    ctx = Context(config, None, None, example_inputs=example_inputs, gm=gm)
    ctx.facts.update(training=False, flattened=False)
    passes = [p.name for p in PASSES if p.stage == "capture" and p.runs(ctx)]
    if passes:
        return f"the capture pass {', '.join(passes)} wraps the inference compiler"
    return None


def _unsafe(gm) -> str | None:
    """A node whose behaviour the key may not capture (AOTAutogradCache's check_node_safe: a
    function not known to torch, a method of a non-tensor, a module), an attribute that is not
    a real tensor, or an output that is not a plain tensor."""
    try:
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache, check_node_safe
    except ImportError:
        return "this torch has no AOTAutogradCache check_node_safe"
    for name, mod in gm.named_modules():
        if not isinstance(mod, torch.fx.GraphModule):
            return f"Dynamo's graph holds the module {name}"
        for node in mod.graph.nodes:
            value = keys._attribute(mod, node.target) if node.op == "get_attr" else None
            if node.op == "get_attr" and (isinstance(value, FakeTensor) or
                                          not isinstance(value, (torch.Tensor, torch.fx.GraphModule))):
                return f"the graph holds an attribute {node.target} that is not a real tensor"
            if node.op == "call_module":
                return f"node {node.name} calls the module {node.target}"
            try:
                check_node_safe(node)
            except BypassAOTAutogradCache as exc:
                return f"node {node.name}: {str(exc).splitlines()[0]} (check_node_safe)"
    (output,) = gm.graph.find_nodes(op="output")
    outputs = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    for k, out in enumerate(outputs):
        value = out.meta.get("example_value") if isinstance(out, torch.fx.Node) else out
        if type(value) not in (FakeTensor, torch.Tensor):
            return f"output {k} is a {type(value).__name__}, not a plain tensor"
    return None


def _watching(compile_fx_inner, calls: list):
    """`compile_fx_inner`, noting each graph it compiles with AOTAutograd's metadata of it."""
    def watched(gm, example_inputs, config, name="graph", dynamo_gm=None):
        call = compile_fx_inner(gm, example_inputs, config=config, name=name, dynamo_gm=dynamo_gm)
        context = torch._guards.TracingContext.try_get()
        calls.append((name, gm, getattr(context, "fw_metadata", None), call))
        return call
    return watched


def why_not_stored(gm, example_inputs, calls) -> tuple[str, bool] | None:
    """Why this compile gives no capture-level entry (and whether that holds for every compile
    of this key, so that it is kept as an entry), or None."""
    ran = [r.name for r in gm.meta.get("capture_passes", ()) if r.ran]
    if ran:
        return f"the capture pass {', '.join(ran)} wrapped the inference compiler", True
    if [name for name, *_ in calls] != ["inference"]:
        return f"AOTAutograd compiled {[name for name, *_ in calls]}, not a single inference graph", True
    _, aten_gm, meta, call = calls[0]
    if meta is None:
        return "AOTAutograd's metadata is not available (no TracingContext)", False
    reason = wrapper_not_trivial(meta)
    if reason is not None:
        return reason, True
    (output,) = aten_gm.graph.find_nodes(op="output")
    if len(aten_gm.graph.find_nodes(op="placeholder")) != len(example_inputs) or \
            len(output.args[0]) != len(meta.output_info):
        return "the inference graph's inputs or outputs are not the Dynamo graph's", True
    compiled = getattr(call, "compiled_graph", None)
    if compiled is None or "fx_graph_cache" not in compiled.context.facts:
        return "the inference graph has no compiled-graph entry (it runs eagerly, or was bypassed)", False
    return None


def wrapper_not_trivial(meta) -> str | None:
    """What AOTAutograd's runtime wrapper would do around this inference graph, or None."""
    try:
        from torch._functorch._aot_autograd.schemas import OutputType, SubclassCreationMeta
        for k, info in enumerate(meta.input_info):
            if info.mutates_data or info.mutates_metadata or getattr(info, "mutates_storage_metadata", False):
                return f"input {k} is mutated (AOTAutograd's wrapper writes the mutation back)"
        for k, info in enumerate(meta.output_info):
            if info.output_type != OutputType.non_alias:
                return f"output {k} is {info.output_type.name} (AOTAutograd's wrapper regenerates the alias)"
            if info.requires_grad:
                return f"output {k} requires grad"
        if meta.num_intermediate_bases:
            return f"{meta.num_intermediate_bases} intermediate bases are returned"
        if any(isinstance(m, SubclassCreationMeta) for m in [*meta.subclass_inp_meta, *meta.subclass_fw_graph_out_meta]):
            return "a tensor subclass goes in or out"
        if meta.tokens:
            return "side effects are ordered by effect tokens"
        if meta.is_rng_op_functionalized:
            return "random ops are functionalized (their seed and offset are inputs)"
        if meta.grad_enabled_mutation is not None:
            return "the graph changes grad mode"
    except (AttributeError, ImportError) as exc:
        return f"AOTAutograd's metadata is not the one known here ({exc})"
    return None


def _store(path: Path, found: dict, gm, example_inputs, calls, rebuilt: bool) -> None:
    why = why_not_stored(gm, example_inputs, calls)
    if why is not None:
        _bypass(why[0])
        if why[1]:
            write_record(path, found, {"bypass": why[0]})
        return
    compiled = calls[0][3].compiled_graph
    entry, sha256 = compiled.context.facts["fx_graph_cache"]
    if not rebuilt:
        counters["miss"] += 1
        log.info("miss capture: %s", why_missed(path, found, keys.capture_differences))
    write_record(path, found, {"entry": Path(entry).relative_to(cache_dir()).as_posix(), "sha256": sha256,
                               "device": str(compiled.context.device)})
    log.info("stored capture at %s", path)


def _hit_capture(path: Path, record: dict, gm, example_inputs, config):
    """The inference graph's entry that `record` names, checked and loaded, as AOTAutograd's
    callable would be."""
    start = time.perf_counter()
    entry = cache_dir() / record["entry"]
    device = torch.device(record["device"])
    layouts = [{k: v for k, v in keys.describe_input(x).items() if k != "requires_grad"} for x in example_inputs]

    def check(header):
        if header["sha256"] != record["sha256"]:
            raise CorruptEntry("it is not the one recorded (rebuilt since?)")
        inputs = header["details"].get("inputs", [])   # (AOTAutograd's inference inputs require no grad)
        if header["details"].get("graph") != "inference" or [{k: v for k, v in x.items() if k != "requires_grad"}
                                                              for x in inputs] != layouts:
            raise CorruptEntry("it is not an inference graph of these inputs")
    ctx = Context(config, policy_for(device, config), device, "inference", example_inputs, gm)
    try:
        compiled = _hit(entry, gm, example_inputs, config, "inference", ctx, check)
    except (CorruptEntry, OSError) as exc:
        raise CorruptEntry(f"names an unusable inference entry {entry}: {exc}") from None
    call = compile_fx.finish_compile(compiled, config, gm)
    counters["hit"] += 1
    log.info("hit capture: %s, AOTAutograd skipped, loaded in %.3f s", path, time.perf_counter() - start)
    return as_aot_autograd_returns(call, gm)


def as_aot_autograd_returns(call, gm):
    """`call` (boxed) as AOTAutograd returns an inference graph with a trivial wrapper
    (aot_module_simplified's `forward` around its RuntimeWrapper): positional arguments in,
    a list out, the graph run with grad mode off, hidden from Dynamo."""
    def forward(*args):
        with torch.no_grad():
            out = call(list(args))
        return out if isinstance(out, list) else list(out) if isinstance(out, tuple) else [out]
    forward.zero_grad, forward.named_parameters, forward.named_buffers = gm.zero_grad, gm.named_parameters, gm.named_buffers
    return torch._dynamo.disable(forward)
