"""Extension `fx_graph_cache`: a compiled ATen graph kept on disk, so that compiling the same
graph again (in another process, or after torch._dynamo.reset()) skips lowering, scheduling
and code generation.

Mirrors `FxGraphCache` of `torch/_inductor/codecache.py` and its use in
`torch/_inductor/compile_fx.py` (`compile_fx_inner` looks the graph up before compiling).
It wraps the driver's `compile_graph` (`passes.GRAPH_COMPILERS`). A lookup hashes the graph
and its details (key.py); a hit reads the entry (store.py: the generated wrapper's source and
the graph's constant tensors) and imports the wrapper as a compile would (its C++ kernels come
from the .so cache, its Triton kernels from Triton's), giving a `CompiledGraph` whose
`graph`, `scheduler` and `kernels` are empty: only what runs is kept. A miss compiles and
stores. The `cache` log (MINIINDUCTOR_LOGS=cache) says hit, miss and why (what differs from
the nearest entry of the same graph), bypass and why, and rebuilt (a corrupted entry).

Bypassed (neither looked up nor stored), each with its reason in the log: the options that
want a compile's artifacts (`trace`, `pass_snapshots`), `TORCH_TRACE` (tlparse's pages read
the lowered graph), a tool collecting compiled graphs
(`compile_fx.collect_compiled`: explain, compare, debug_accuracy, the report), `cudagraphs`
(its recording reads the lowered graph), a planted bug (`bypassed`), and graphs with
symbolic sizes: Inductor keys on the symbolic expressions and records the ShapeEnv guards a
compile adds, to check them on a hit; we do neither, so those graphs compile every time.
Frozen parameters are constants of the graph: their contents are part of the key.

A second level, capture.py, mirrors `AOTAutogradCache`: it wraps `capture` (passes.CAPTURE_WRAPPERS)
and keys Dynamo's graph, so that a hit skips AOTAutograd too, loading the inference graph's
entry of this level; simplified to inference graphs whose AOTAutograd wrapper is trivial (no
training, mutations, aliased outputs...: those bypass it, their graphs still cached here).
Its log lines say `capture`: hit, miss, bypass, rebuilt and stored as above.
Simplified: no remote cache, no eviction. On a capture-level hit only Dynamo is left
(benchmarks/compile_cache.py measures it).
"""
from __future__ import annotations

import contextlib
import os
import time

from ... import compile_fx, metrics
from ...compile_fx import CompiledGraph, context_for, load_wrapper
from ...config import Option, declare_extension
from ...logs import LOG_NAMES, get_logger
from ...passes import CAPTURE_WRAPPERS, GRAPH_COMPILERS, PassRecord
from . import key as keys
from .store import CorruptEntry, entry_path, neighbours, read_entry, write_entry

LOG_NAMES.setdefault("cache", "the compiled-graph cache: each hit, miss (and what differs), bypass and rebuilt entry")
log = get_logger("cache")

declare_extension("fx_graph_cache", "compiled graphs cached on disk, keyed by graph, inputs, options, versions", (
    Option("fx_graph_cache", bool, lambda: os.environ.get("MINIINDUCTOR_FX_GRAPH_CACHE", "1") != "0",
           "Keep each compiled graph on disk and reuse it when the same graph is compiled again (default: on "
           "unless $MINIINDUCTOR_FX_GRAPH_CACHE is 0)."),))

#: what the cache did in this process (Inductor: counters["inductor"]["fxgraph_cache_hit"], ...)
counters = {"hit": 0, "miss": 0, "bypass": 0, "rebuilt": 0}
_bypasses: list[str] = []


@contextlib.contextmanager
def bypassed(reason: str):
    """No lookup and no store inside the `with` block (tools/debug/planted_bugs.py: a planted
    bug changes the code without changing the key)."""
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


GRAPH_COMPILERS.append(("fx_graph_cache", wrap))

from . import capture  # noqa: E402  (it reads the names above)

CAPTURE_WRAPPERS.append(("fx_graph_cache", capture.wrap))
#: what the capture level did in this process (capture.py)
capture_counters = capture.counters
