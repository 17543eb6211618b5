"""Provenance: every kernel ↔ its loop-IR buffers ↔ ATen nodes ↔ Dynamo nodes ↔ user source lines.

Phase 7 (debug). In: a `CompiledGraph` (and Dynamo's FX graph, `cg.fx_graph_module`). Out: one
`KernelProvenance` per kernel and extern call, and the same in the JSON shapes Inductor logs for
tlparse. Mirrors the provenance tracking of `torch/_inductor/debug.py`
(`set_kernel_post_grad_provenance_tracing`, `create_node_mapping_kernel_to_post_grad`,
`create_mapping_pre_post_grad_nodes`, `dump_inductor_provenance_info`): the node mappings
`{"preToPost", "postToPre", "cppCodeToPost", "postToCppCode", "version": 2.0}` and the kernel
stack traces `{kernel: [stack trace]}`. Simplified: Inductor records the mapping while it
generates code (keys `name:debug_handle`, a handle comment in the wrapper); we derive it afterwards
from what the compile kept: each kernel's `origins` (its ATen nodes, inlined producers too),
each extern buffer's origins, and each ATen node's meta. An ATen node's user source line is its
`stack_trace` (AOTAutograd copies Dynamo's, onto backward nodes too); failing that (code that
Dynamo traced inside torch itself has no user frame), the Dynamo node it came from (`from_node`,
`source_fn_stack`, or `fwd_source_fn_stack` on backward nodes) and that node's stack trace. The
pre-grad graph is Dynamo's, as in Inductor (its `before_pre_grad_graph`).

Used by the tlparse artifacts (structured_trace.py), the HTML report and `explain --provenance`.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ...scheduler import FusedGroup

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


@dataclasses.dataclass(frozen=True, order=True)
class SourceLine:
    file: str
    line: int
    code: str = dataclasses.field(compare=False)

    @property
    def loc(self) -> str:
        """`zoo/models.py:42`: the file (relative to the working folder when under it, else its
        folder and name) and the line."""
        path = Path(self.file)
        try:
            short = path.relative_to(Path.cwd())
        except ValueError:
            short = Path(*path.parts[-2:])
        return f"{short}:{self.line}"

    def __str__(self):
        return f"{self.loc}  {self.code}"


def user_frame(stack_trace: str | None) -> SourceLine | None:
    """The innermost frame of an FX node's stack trace (the line that made the op)."""
    frames = _FRAME.findall(stack_trace or "")
    if not frames:
        return None
    file, line, _, code = frames[-1]
    return SourceLine(file, int(line), code.strip())


@dataclasses.dataclass
class KernelProvenance:
    """Where one kernel (or extern call) came from, at every level."""
    name: str                    # kernel name, or the extern call's buffer
    kind: str                    # "kernel" | "extern"
    buffers: list[str]           # the loop-IR buffers it computes
    post_grad: list[str]         # ATen nodes (the post-grad graph) it was lowered from
    pre_grad: list[str]          # Dynamo's FX nodes those came from
    source_lines: list[SourceLine]
    stack_traces: list[str]

    def __str__(self):
        lines = ", ".join(s.loc for s in self.source_lines) or "(no user source line)"
        return f"{self.name}: {lines}"


def _dynamo_names(node, dynamo_nodes: dict) -> list[str]:
    """The Dynamo nodes an ATen node came from: its `from_node` chain, else its source_fn."""
    names, stack = [], list(node.meta.get("from_node") or [])
    while stack:
        source = stack.pop()
        name = getattr(source, "name", None)
        if name in dynamo_nodes and name not in names:
            names.append(name)
        stack.extend(getattr(source, "from_node", None) or [])
    for key in ("source_fn_stack", "fwd_source_fn_stack"):
        fn_stack = node.meta.get(key)
        if not names and fn_stack and fn_stack[-1][0] in dynamo_nodes:
            names.append(fn_stack[-1][0])
    return names


class GraphProvenance:
    """The provenance of one compiled graph. Works on what a cache hit keeps too: without
    the scheduler, kernels map through their origins and extern calls are left out."""

    def __init__(self, cg):
        self.cg = cg
        graph = getattr(cg, "graph", None)
        context = getattr(cg, "context", None)
        self.aten = graph.module if graph is not None else getattr(context, "gm", None)
        self.dynamo = getattr(cg, "fx_graph_module", None)
        aten_nodes = [n for n in self.aten.graph.nodes if n.op == "call_function"] if self.aten else []
        self.position = {n.name: k for k, n in enumerate(aten_nodes)}
        dynamo_nodes = ({n.name: n for n in self.dynamo.graph.nodes if n.op not in ("placeholder", "output")}
                        if self.dynamo is not None else {})
        self.pre_grad = {n.name: _dynamo_names(n, dynamo_nodes) for n in aten_nodes}
        self.stack_trace = {}
        for n in aten_nodes:
            traces = [n.meta.get("stack_trace")] + [dynamo_nodes[d].meta.get("stack_trace") for d in self.pre_grad[n.name]]
            self.stack_trace[n.name] = next((t for t in traces if user_frame(t)), None)
        self.kernels = [self._kernel(k) for k in (cg.kernels or {}).values()] + self._externs()

    def _kernel(self, kernel) -> KernelProvenance:
        buffers = list(kernel.buffers)
        origins = set(kernel.origins) | {o for b in buffers for o in self._buffer_origins().get(b, ())}
        return self._make(kernel.name, "kernel", buffers, origins)

    def _buffer_origins(self) -> dict:
        graph = getattr(self.cg, "graph", None)
        if not hasattr(self, "_origins"):
            self._origins = {b.get_name(): list(getattr(b, "origins", ()) or ())
                             for b in (graph.buffers if graph is not None else ())}
        return self._origins

    def _externs(self) -> list[KernelProvenance]:
        scheduler = getattr(self.cg, "scheduler", None)
        if scheduler is None:
            return []
        externs = [item.get_name() for item in scheduler.schedule if not isinstance(item, FusedGroup)]
        return [self._make(b, "extern", [b], set(self._buffer_origins().get(b, ()))) for b in externs]

    def _make(self, name, kind, buffers, origins) -> KernelProvenance:
        post = sorted((o for o in origins if o in self.position), key=self.position.get)
        pre = list(dict.fromkeys(d for o in post for d in self.pre_grad[o]))
        traces = list(dict.fromkeys(t for o in post if (t := self.stack_trace[o])))
        lines = sorted({user_frame(t) for t in traces})
        return KernelProvenance(name, kind, buffers, post, pre, lines, traces)

    # ------------------------------------------------------------------ Inductor's JSON shapes
    def source_lines(self) -> dict:
        """{SourceLine: [kernel names]}: every user line, and the kernels (and externs) it became."""
        out: dict = {}
        for k in self.kernels:
            for line in k.source_lines:
                out.setdefault(line, []).append(k.name)
        return dict(sorted(out.items()))

    def node_mappings(self, wrapper_keys: dict | None = None) -> dict:
        """Inductor's `inductor_provenance_tracking_node_mappings` (version 2.0). wrapper_keys
        renames kernels ({name: key}; extern calls without a key are left out)."""
        keys = wrapper_keys or {}
        code_to_post = {keys.get(k.name, k.name): k.post_grad for k in self.kernels
                        if k.post_grad and (k.kind == "kernel" or k.name in keys)}
        post_to_code: dict = {}
        for key, nodes in code_to_post.items():
            for node in nodes:
                post_to_code.setdefault(node, []).append(key)
        post_to_pre = {post: pre for post, pre in self.pre_grad.items() if pre}
        pre_to_post: dict = {}
        for post, pres in post_to_pre.items():
            for pre in pres:
                pre_to_post.setdefault(pre, []).append(post)
        return {"preToPost": pre_to_post, "postToPre": post_to_pre, "cppCodeToPost": code_to_post,
                "postToCppCode": post_to_code, "version": 2.0}

    def kernel_stack_traces(self, wrapper_keys: dict | None = None) -> dict:
        """Inductor's `inductor_provenance_tracking_kernel_stack_traces`: {kernel: [stack trace]}."""
        keys = wrapper_keys or {}
        return {keys.get(k.name, k.name): k.stack_traces for k in self.kernels
                if k.kind == "kernel" or k.name in keys}

    def as_json(self) -> dict:
        """Ours, with every level: {"graph", "kernels": [{name, kind, buffers, post_grad,
        pre_grad, source_lines: ["file:line  code"]}]}."""
        name = getattr(getattr(self.cg, "graph", None), "name", None) or getattr(getattr(self.cg, "context", None), "name", "graph")
        return {"graph": name, "kernels": [
            {"name": k.name, "kind": k.kind, "buffers": k.buffers, "post_grad": k.post_grad, "pre_grad": k.pre_grad,
             "source_lines": [{"file": s.file, "line": s.line, "code": s.code} for s in k.source_lines]}
            for k in self.kernels]}


def wrapper_keys(cg) -> dict:
    """{extern buffer: its key in the tlparse mappings}: `"    buf3 "`, the start of the line that
    assigns it in the wrapper's `call`. tlparse finds a kernel's lines in the output code by
    searching each line for its key, on the syntax-highlighted HTML unless `--plain-text`;
    a kernel's name is one token there, but an extern call has no name of its own (Inductor's
    are `extern_kernels.mm:<handle>` after a handle comment, which our wrapper does not write),
    and the highlighter keeps only the indentation and the buffer's name in one piece."""
    keys = {}
    for m in re.finditer(r"^(\s+)(buf\d+) = ", cg.wrapper_source or "", re.M):
        keys.setdefault(m.group(2), f"    {m.group(2)} ")
    return keys


def provenance_lines(graphs) -> list[str]:
    """Per graph, each kernel and the user source lines (file:line) it came from; then how
    many have none (`explain --provenance`)."""
    lines = []
    for cg in graphs:
        prov = GraphProvenance(cg)
        kernels = [k for k in prov.kernels if k.kind == "kernel"]
        missing = [k.name for k in kernels if not k.source_lines]
        lines.append(f"graph {cg.graph.name}: {len(kernels)} kernels, {len(kernels) - len(missing)} with user source lines")
        for k in kernels:
            lines.append(f"  {k.name}  <- {', '.join(k.post_grad) or '?'}")
            lines += [f"      {s}" for s in k.source_lines] or ["      (no user source line: no stack trace on its ATen nodes)"]
    return lines
