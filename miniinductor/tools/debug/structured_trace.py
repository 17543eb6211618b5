"""`TORCH_TRACE=dir`: what Inductor logs for tlparse, logged for each graph miniinductor compiles.

Phase 7 (debug). In: a `CompiledGraph`, after its compile (an `after_compile` hook). Out:
`torch._logging.trace_structured` records, the ones Inductor writes for each graph under the same
names and payload shapes, so that `tlparse dir` puts our code beside Dynamo's and AOTAutograd's
graphs, and `tlparse dir --inductor-provenance` draws its three-panel provenance page
(`provenance_tracking_<compile id>.html`: pre-grad graph ↔ post-grad graph ↔ output code):

    artifact before_pre_grad_graph      Dynamo's FX graph, printed (compile_fx.run_pre_grad_passes);
                                        once per Dynamo graph, as Inductor logs it once
    artifact inductor_post_grad_graph   the ATen graph we lowered, printed (compile_fx: "used in
                                        inductor provenance tracking highlighter front-end")
    inductor_output_code                our wrapper module, kernel source included ({filename,
                                        file_path} metadata, as graph.py's compile_to_module), under
                                        Inductor's `# AOT ID:` line (see output_code)
    artifact inductor_provenance_tracking_node_mappings      {preToPost, postToPre, cppCodeToPost,
                                        postToCppCode, version: 2.0} (debug.dump_inductor_provenance_info)
    artifact inductor_provenance_tracking_kernel_stack_traces  {kernel: [stack trace]}

and ours, beside them: `miniinductor_fusion_decisions` (every pair considered, fused or not, why,
bytes saved), `miniinductor_memory_plan` (trace.py's memory_plan.json) and
`miniinductor_provenance` (each kernel's buffers, ATen and Dynamo nodes and user source lines).
Simplified: Inductor's provenance is only logged at `trace.provenance_tracking_level` 1; ours
always is, under TORCH_TRACE. On a compiled-graph cache hit (no graph, no scheduler kept) we log
what is left: the output code, and the mappings its kernels' origins still give.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import weakref

import torch
from torch._logging import trace_structured

from ...compile_fx import after_compile
from .provenance import GraphProvenance, wrapper_keys
from .trace import memory_plan_json

log = logging.getLogger("miniinductor")
_logged_pre_grad: weakref.WeakSet = weakref.WeakSet()   # Dynamo graphs already logged


def structured_trace_on() -> bool:
    """Whether `TORCH_TRACE` is collecting records: torch keeps its lazy handler on the trace
    log until the first record, which removes it when no folder is set (and pytest hangs
    its own handlers there): only a lazy handler with a folder or an open file counts."""
    lazy = torch._logging._internal.LazyTraceHandler
    return any(isinstance(h, lazy) and (h.root_dir is not None or h.stream is not None)
               for h in torch._logging._internal.trace_log.handlers)


def _artifact(name: str, payload_fn, encoding: str = "string") -> None:
    trace_structured("artifact", metadata_fn=lambda: {"name": name, "encoding": encoding}, payload_fn=payload_fn)


def _printed(gm) -> str:
    return gm.print_readable(print_output=False, include_stride=True, include_device=True)


def output_code(cg) -> str:
    """The wrapper module as logged: Inductor's first line, `# AOT ID: [...]`, then ours unchanged.
    tlparse counts the output code's lines from that line (its highlighted HTML has one more line
    at the top than the browser shows), so without it every highlight is one line low."""
    name = getattr(getattr(cg, "graph", None), "name", None) or getattr(getattr(cg, "context", None), "name", "graph")
    return f"# AOT ID: ['{name}']  (logged by miniinductor; its wrapper module follows)\n{cg.wrapper_source}"


def structured_records(cg) -> list[tuple[str, dict, str]]:
    """[(record name, metadata, payload)]: what `log_structured_trace` logs for `cg`, in order
    (an artifact's name is its metadata's "name")."""
    records = []
    dynamo = getattr(cg, "fx_graph_module", None)
    if dynamo is not None and dynamo not in _logged_pre_grad:
        payload = _printed(dynamo) + f"\n\n # graph id: {id(dynamo.graph)}"
        records.append(("artifact", {"name": "before_pre_grad_graph", "encoding": "string"}, payload))
    prov = GraphProvenance(cg)
    if prov.aten is not None:
        records.append(("artifact", {"name": "inductor_post_grad_graph", "encoding": "string"}, _printed(prov.aten)))
    path = getattr(cg, "path", None)
    records.append(("inductor_output_code", {"filename": path, "file_path": os.path.abspath(path)} if path else {},
                    output_code(cg)))
    keys = wrapper_keys(cg)
    json_artifacts = {
        "inductor_provenance_tracking_node_mappings": prov.node_mappings(keys),
        "inductor_provenance_tracking_kernel_stack_traces": prov.kernel_stack_traces(keys),
        "miniinductor_provenance": prov.as_json(),
    }
    scheduler, graph = getattr(cg, "scheduler", None), getattr(cg, "graph", None)
    if scheduler is not None and graph is not None:
        json_artifacts["miniinductor_fusion_decisions"] = {
            "graph": graph.name, "decisions": [dataclasses.asdict(d) for d in scheduler.decisions]}
        if getattr(cg, "plan", None) is not None:
            json_artifacts["miniinductor_memory_plan"] = memory_plan_json(cg)
    for name, payload in json_artifacts.items():
        records.append(("artifact", {"name": name, "encoding": "json"}, json.dumps(payload)))
    return records


def log_structured_trace(cg, config=None) -> None:
    """The `after_compile` hook: log `structured_records(cg)` when TORCH_TRACE is on. Only
    debugging output: a failure here is a warning, never a failed compile."""
    if not structured_trace_on():
        return
    try:
        records = structured_records(cg)
    except Exception:
        log.warning("miniinductor: could not log the structured trace (TORCH_TRACE) of this graph", exc_info=True)
        return
    for name, metadata, payload in records:
        if name == "artifact":
            _artifact(metadata["name"], lambda p=payload: p, metadata["encoding"])
        else:
            trace_structured(name, lambda m=metadata: m, payload_fn=lambda p=payload: p)
    if getattr(cg, "fx_graph_module", None) is not None:
        _logged_pre_grad.add(cg.fx_graph_module)


after_compile.append(log_structured_trace)
