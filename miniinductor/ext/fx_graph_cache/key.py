"""What a compiled graph is keyed by, and why a graph is not cached at all.

Mirrors `FxGraphHashDetails` and `compiled_fx_graph_hash` of `torch/_inductor/codecache.py`,
and the checks of `FxGraphCache._check_can_cache`. A key has two parts:

  * the graph's **structure**: the code of the ATen graph (and of its subgraphs), with the
    partitioner's labels of saved activations (`saved_storage`: the backward's memory plan
    reads them) -- the name of the folder that holds every entry of this graph;
  * its **details**, each named so that a miss can say what differs from an entry of the
    same structure: the graph's name (forward, backward, inference), each input's size,
    stride, dtype, device and requires_grad, every option's value, the contents of the
    graph's constant tensors (freezing's parameters: a changed weight is another entry) and
    the versions of what made the code -- a hash of miniinductor's own source files (as
    Inductor hashes torch/_inductor), torch, triton, Python, and for a CPU graph the C++
    compiler's version and the CPU's vector width, for a GPU graph the GPU's name and
    compute capability.

Simplified: Inductor pickles the graph module with a pickler that hashes tensors by their
metadata (by value only for frozen ones) and records the ShapeEnv guards a compile adds, to
check them on a hit. Here graphs with symbolic sizes are not cached (`bypass_reason`); the
structure is the graph's printed code, which Inductor's pickled GraphModule also holds.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

from ...capture.specialize import has_symbolic_inputs
from ...lowering.graph import graph_device
from ...runtime.cpp_builder import compiler_version, vector_lanes, vector_math_flags
from .store import tensor_bytes

PACKAGE = Path(__file__).resolve().parents[2]   # miniinductor/
#: options that do not change the code: the cache's own switch (a bypassed option, such
#: as `trace`, never reaches the key)
UNKEYED_OPTIONS = ("fx_graph_cache",)


def sha(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def source_hash() -> str:
    """miniinductor's own source (every .py and .h file of the package): an edit to any of
    them makes every entry stale."""
    files = sorted(p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".h") and "__pycache__" not in p.parts)
    return sha(*(part for p in files for part in (p.relative_to(PACKAGE).as_posix(), p.read_bytes())))[:32]


@functools.lru_cache(maxsize=None)
def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


@functools.lru_cache(maxsize=None)
def _gpu(device: torch.device) -> str:
    props = torch.cuda.get_device_properties(device)
    return f"{props.name} (sm_{props.major}{props.minor})"


def versions(device: torch.device, config) -> dict:
    found = {"miniinductor source": source_hash(), "torch": torch.__version__,
             "triton": _package_version("triton"), "python": sys.version.split()[0]}
    if device.type == "cuda":
        found["GPU"] = _gpu(device)
    elif config.cpu_backend == "cpp":
        found["C++ compiler"] = sha(compiler_version(config.cxx))[:16]
        found["CPU vector width"] = f"{vector_lanes()} floats, libmvec {'yes' if vector_math_flags()[0] else 'no'}"
    return found


def structure(gm: torch.fx.GraphModule) -> str:
    """The graph's code, its subgraphs' code and the saved activations' labels, hashed."""
    parts = [f"# {name or 'graph'}\n{mod.code}" for name, mod in gm.named_modules()
             if isinstance(mod, torch.fx.GraphModule)]
    parts += [f"{n.name} saves {n.meta['saved_storage']}" for n in gm.graph.nodes if "saved_storage" in n.meta]
    return sha(*parts)[:24]


def describe_input(x) -> dict:
    if not isinstance(x, torch.Tensor):
        return {"value": f"{type(x).__name__} {x!r}"}
    strided = x.layout == torch.strided
    return {"size": list(x.shape), "stride": list(x.stride()) if strided else str(x.layout),
            "dtype": str(x.dtype).removeprefix("torch."), "device": str(x.device), "requires_grad": x.requires_grad}


def constants_hash(gm: torch.fx.GraphModule) -> str:
    """The graph's tensor attributes (get_attr: freezing's parameters, folded values, lifted
    constants), by name, metadata and contents."""
    parts = []
    with unset_fake_temporarily():
        for node in gm.graph.find_nodes(op="get_attr"):
            value = _attribute(gm, node.target)
            if isinstance(value, torch.Tensor):
                parts += [node.target, describe_input(value), tensor_bytes(value)]
    return sha(*parts)[:24]


def _attribute(gm, target: str):
    value = gm
    for atom in target.split("."):
        value = getattr(value, atom)
    return value


def options(config) -> dict:
    return {k: v if isinstance(v, (bool, int, str, type(None))) else repr(v)
            for k, v in config.as_dict().items() if k not in UNKEYED_OPTIONS}


def details(gm, example_inputs, config, name: str) -> dict:
    """The named parts of the key (JSON-able): what a miss compares."""
    return {"graph": name, "inputs": [describe_input(x) for x in example_inputs], "options": options(config),
            "constants": constants_hash(gm), "versions": versions(graph_device(gm, example_inputs), config)}


# ----------------------------------------------------------------------------- the capture level's key
def capture_details(gm, example_inputs, config, device: torch.device) -> dict:
    """The named parts of a capture-level key (capture.py): Dynamo's graph's tensor attributes
    (in it and its subgraphs), each input's type, layout and storage offset too, and the global
    state that AOTAutograd's trace reads."""
    inputs = [{**describe_input(x), "type": type(x).__name__, "storage_offset": x.storage_offset()} for x in example_inputs]
    return {"graph": "capture", "inputs": inputs, "global state": global_state(), "options": options(config),
            "constants": attributes_hash(gm), "versions": versions(device, config)}


def global_state() -> dict:
    """What tracing reads besides the graph and its inputs (AOTAutogradCacheDetails' grad mode,
    autocast, deterministic algorithms and functorch's config; the matmul precision and the
    attention backends that decompositions may read)."""
    functorch = torch._functorch.config
    portable = getattr(functorch, "save_config_portable", None)
    sdpa = torch.backends.cuda
    return {"grad mode": torch.is_grad_enabled(), "autocast": torch._C._is_any_autocast_enabled(),
            "deterministic algorithms": [torch.are_deterministic_algorithms_enabled(),
                                         torch.is_deterministic_algorithms_warn_only_enabled()],
            "default dtype": str(torch.get_default_dtype()), "float32 matmul precision": torch.get_float32_matmul_precision(),
            "attention backends": [sdpa.flash_sdp_enabled(), sdpa.mem_efficient_sdp_enabled(), sdpa.math_sdp_enabled()],
            "functorch config": sha(json.dumps(portable(), sort_keys=True, default=repr) if portable else
                                    functorch.save_config())[:16]}


def attributes_hash(gm: torch.fx.GraphModule) -> str:
    """`constants_hash` over Dynamo's graph and its subgraphs (a higher-order op's body)."""
    return sha(*(f"{name}: {constants_hash(mod)}" for name, mod in gm.named_modules()
                 if isinstance(mod, torch.fx.GraphModule)))[:24]


def capture_differences(found: dict, entry: dict) -> list[str]:
    theirs = entry.get("global state", {})
    return differences(found, entry) + [f"{what} differs (entry {theirs.get(what)!r}, now {value!r})"
                                        for what, value in found["global state"].items() if theirs.get(what) != value]


def full_key(structure_key: str, found: dict) -> str:
    return sha(structure_key, json.dumps(found, sort_keys=True))[:32]


def bypass_reason(gm, example_inputs, config, collecting: bool) -> str | None:
    """Why this compile must neither look up nor store an entry, or None."""
    if config.trace:
        return "option trace is set (its folder holds the compile's artifacts)"
    if config.pass_snapshots:
        return "option pass_snapshots is set (it records every pass)"
    lazy = torch._logging._internal.LazyTraceHandler   # TORCH_TRACE's (without a folder: off)
    if any(isinstance(h, lazy) and (h.root_dir is not None or h.stream is not None)
           for h in torch._logging._internal.trace_log.handlers):
        return "TORCH_TRACE is on (tlparse's pages want the lowered graph, its provenance and fusion decisions)"
    if collecting:
        return "the compiled graphs are being collected (explain, compare, debug_accuracy, report: they read the " \
               "lowered graph and its schedule)"
    if config.uses("cudagraphs") and config.cudagraphs:
        return "option cudagraphs is set (its recording reads the lowered graph's inputs and mutations)"
    if has_symbolic_inputs(example_inputs) or any(_symbolic(n.meta.get("val")) for n in gm.graph.nodes):
        return "the graph has symbolic sizes (its guards are not recorded: only static graphs are cached)"
    for node in gm.graph.find_nodes(op="get_attr"):
        value = _attribute(gm, node.target)
        if isinstance(value, FakeTensor) or not isinstance(value, (torch.Tensor, torch.fx.GraphModule)):
            return f"the graph holds an attribute {node.target} that is not a real tensor"
    return None


def _symbolic(val) -> bool:
    if isinstance(val, (list, tuple)):
        return any(map(_symbolic, val))
    if isinstance(val, torch.Tensor):
        strided = (*val.stride(), val.storage_offset()) if val.layout == torch.strided else ()
        return any(isinstance(s, torch.SymInt) for s in (*val.shape, *strided))
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool))


def differences(found: dict, entry: dict) -> list[str]:
    """What differs between this compile's details and an entry's, in words."""
    said = []
    if found["graph"] != entry.get("graph"):
        said.append(f"graph name differs (entry {entry.get('graph')}, now {found['graph']})")
    mine, theirs = found["inputs"], entry.get("inputs", [])
    if len(mine) != len(theirs):
        said.append(f"number of inputs differs (entry {len(theirs)}, now {len(mine)})")
    for k, (a, b) in enumerate(zip(mine, theirs)):
        said += [f"input {k}'s {field} differs (entry {b.get(field)}, now {a.get(field)})"
                 for field in a if a.get(field) != b.get(field)]
    options = entry.get("options", {})
    said += [f"option {option} differs (entry {options.get(option)!r}, now {value!r})"
             for option, value in found["options"].items() if option not in options or options[option] != value]
    if found["constants"] != entry.get("constants"):
        said.append("the graph's constant tensors differ (freezing: a parameter's value)")
    said += [f"{what} version differs" for what, v in found["versions"].items()
             if entry.get("versions", {}).get(what) != v]
    return said
