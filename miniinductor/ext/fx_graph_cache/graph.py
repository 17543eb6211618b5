"""The ATen-graph level of the compiled-graph cache (Inductor's FxGraphCache): `wrap` is
compile_graph's wrapper (passes.GRAPH_COMPILERS): look the graph up, load a hit, store a miss.
The package's docstring says what is keyed, bypassed and simplified."""
from __future__ import annotations

import contextlib
import time

from ... import compile_fx, metrics
from ...compile_fx import CompiledGraph, context_for, load_wrapper
from ...logs import LOG_NAMES, get_logger
from ...passes import PassRecord
from . import key as keys
from .store import CorruptEntry, entry_path, neighbours, read_entry, write_entry

LOG_NAMES.setdefault("cache", "the compiled-graph cache: each hit, miss (and what differs), bypass and rebuilt entry")
log = get_logger("cache")

#: what the cache did in this process (Inductor: counters["inductor"]["fxgraph_cache_hit"], ...)
counters = {"hit": 0, "miss": 0, "bypass": 0, "rebuilt": 0}
_bypasses: list[str] = []


@contextlib.contextmanager
def bypassed(reason: str):
    """No lookup and no store inside the `with` block: for code that patches the compiler's
    internals, which change the code without changing the key (tools/debug/planted_bugs.py,
    which may not import an extension, empties passes.GRAPH_COMPILERS and CAPTURE_WRAPPERS)."""
    _bypasses.append(reason)
    try:
        yield
    finally:
        _bypasses.remove(reason)


def wrap(compile_graph):
    def cached_compile(gm, example_inputs, config, name="graph"):
        if not config.fx_graph_cache:
            return compile_graph(gm, example_inputs, config, name)
        reason = (_bypasses[-1] if _bypasses else None) or keys.bypass_reason(
            gm, example_inputs, config, bool(compile_fx._collectors))
        if reason is not None:
            counters["bypass"] += 1
            log.info("bypass %s: %s", name, reason)
            return compile_graph(gm, example_inputs, config, name)
        structure = keys.structure(gm)
        found = keys.details(gm, example_inputs, config, name)
        path = entry_path(structure, keys.full_key(structure, found))
        if path.exists():
            try:
                return _hit(path, gm, example_inputs, config, name)
            except CorruptEntry as exc:
                counters["rebuilt"] += 1
                log.info("rebuilt %s: the entry %s is corrupted: %s", name, path, exc)
                path.unlink(missing_ok=True)
        else:
            counters["miss"] += 1
            log.info("miss %s: %s", name, why_missed(path, found, keys.differences))
        compiled = compile_graph(gm, example_inputs, config, name)
        _store(path, found, compiled)
        return compiled
    return cached_compile


def why_missed(path, found: dict, differences) -> str:
    """What differs between `found` and the nearest entry beside `path` (the same structure)."""
    said = [differences(found, other) for other in neighbours(path)]
    if not said:
        return "no entry for this graph"
    nearest = min(said, key=len)
    return f"{'; '.join(nearest)} (from the nearest of {len(said)} entries of this graph)"


def _store(path, found: dict, compiled: CompiledGraph) -> None:
    stats = {"kernels": len(compiled.kernels), "nodes_before_fusion": len(compiled.scheduler.nodes),
             "nodes_after_fusion": len(compiled.scheduler.schedule),
             "bytes_moved": sum(k.bytes_moved for k in compiled.kernels.values())}
    sha256 = write_entry(path, found, compiled.wrapper_source, compiled.graph.constants, stats)
    compiled.context.facts["fx_graph_cache"] = (path, sha256)   # for the capture level (capture.py)
    log.info("stored %s at %s", compiled.graph.name, path)


def _hit(path, gm, example_inputs, config, name, ctx=None, check=None) -> CompiledGraph:
    """The entry at `path` loaded as a CompiledGraph (`check(header)`: the capture level's
    checks of the entry it recorded, raising CorruptEntry)."""
    start = time.perf_counter()
    header, payload = read_entry(path)
    if check is not None:
        check(header)
    module, wrapper_path = load_wrapper(payload["source"])
    module.constants.update(payload["constants"])
    ctx = ctx or context_for(gm, example_inputs, config, name)
    ctx.source = payload["source"]
    ctx.facts["fx_graph_cache"] = (path, header["sha256"])
    ctx.records.append(PassRecord("load", "fx_graph_cache", "fx_graph_cache", True,
                                  f"hit: {path.stem[:12]}, lowering, scheduling and codegen skipped"))
    compiled = CompiledGraph(None, None, {}, payload["source"], wrapper_path, module.call,
                             passes=ctx.records, context=ctx)
    stats = payload["stats"]
    metrics.generated_kernel_count += stats["kernels"]
    metrics.output_code_paths.append(wrapper_path)
    metrics.graphs_compiled += 1
    metrics.nodes_before_fusion += stats["nodes_before_fusion"]
    metrics.nodes_after_fusion += stats["nodes_after_fusion"]
    metrics.estimated_bytes_moved += stats["bytes_moved"]
    counters["hit"] += 1
    log.info("hit %s: %s, loaded in %.3f s", name, path, time.perf_counter() - start)
    get_logger("output_code").info("%s: %s\n%s", name, wrapper_path, payload["source"])
    return compiled
