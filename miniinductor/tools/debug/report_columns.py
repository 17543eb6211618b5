"""The compile report's five phase columns and the links between them.

`GraphLinks` maps, for one compiled graph, each buffer to the kernel that computes it and
each ATen / Dynamo node to the kernels it ended up in; the columns (FX graph → ATen graph
→ loop IR → fused kernels → generated code) are HTML fragments whose lines carry those
kernels (`data-k="<graph>:<kernel>"`) and anchors, so that hovering one lights up its
origins in every column. report.py puts them on the page beside the other sections.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from ...scheduler import FusedGroup
from .fusion_graph import human_bytes
from .provenance import GraphProvenance

_esc = html.escape
LANGUAGE_NAMES = {"cpp": "C++", "triton": "Triton"}   # GeneratedKernel.language → a label


# --------------------------------------------------------------------------- what maps to what
def _user_frame(node):
    """(file:line, code) of the innermost user frame in an FX node's stack trace."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    if not frames:
        return None
    file, line, _, code = frames[-1]
    return f"{Path(file).name}:{line}", code.strip()


def _dynamo_name(node):
    stack = node.meta.get("source_fn_stack")
    return stack[-1][0] if stack else None


class GraphLinks:
    """For one compiled graph: which kernel computes each buffer, and which kernels each
    ATen / Dynamo node ended up in. Keys are `<prefix>:<kernel>` (an extern is its own
    kernel, keyed by its buffer name)."""

    def __init__(self, cg, prefix: str):
        self.cg, self.prefix = cg, prefix
        self.kernel_of: dict[str, str] = {}           # buffer → kernel name (or extern buffer)
        self.groups = {}
        for item in cg.scheduler.schedule:
            if isinstance(item, FusedGroup):
                self.groups[item.kernel_name] = item
                for name in item.get_names():
                    self.kernel_of[name] = item.kernel_name
            else:
                self.kernel_of[item.get_name()] = item.get_name()
        self.aten_nodes = [n for n in cg.graph.module.graph.nodes if n.op == "call_function"]
        self.position = {n.name: k for k, n in enumerate(self.aten_nodes)}
        self.aten_kernels: dict[str, set[str]] = {n.name: set() for n in self.aten_nodes}
        self.buffer_origins: dict[str, list[str]] = {}
        for buf in cg.graph.buffers:   # computed buffers and extern calls alike record their FX nodes
            self.buffer_origins[buf.get_name()] = [o for o in getattr(buf, "origins", []) if o in self.aten_kernels]
        for buf, origins in self.buffer_origins.items():
            if buf in self.kernel_of:
                for o in origins:
                    self.aten_kernels[o].add(self.kernel_of[buf])
        self.dynamo_kernels: dict[str, set[str]] = {}
        for node in self.aten_nodes:
            name = _dynamo_name(node)
            if name:
                self.dynamo_kernels.setdefault(name, set()).update(self.aten_kernels[node.name])

    def key(self, kernel: str) -> str:
        return f"{self.prefix}:{kernel}"

    def data_k(self, kernels) -> str:
        keys = " ".join(self.key(k) for k in sorted(kernels))
        return f' data-k="{_esc(keys)}"' if keys else ""

    def anchor(self, kind: str, name: str) -> str:
        return f"{self.prefix}-{kind}-{name}"

    def kernel_origins(self, kernel: str) -> list[str]:
        bufs = self.groups[kernel].get_names() if kernel in self.groups else [kernel]
        return sorted({o for b in bufs for o in self.buffer_origins.get(b, [])}, key=self.position.get)


# --------------------------------------------------------------------------- the phase columns
_NONE_TAIL = re.compile(r";\s+[\w\s,=]*= None\s*$")  # FX's `;  x = None` (frees), noise here
_ASSIGN = re.compile(r"^\s+(\w+)(?:\s*:\s*\"[^\"]*\")?\s*=")


def _code_lines(code: str, links: GraphLinks, kind: str, kernels_of_name) -> str:
    """A code listing, one <span> per line; assignment lines get an anchor and data-k."""
    out = []
    for line in code.strip("\n").splitlines():
        m = _ASSIGN.match(line)
        attrs = ""
        if m:
            name = m.group(1)
            attrs = f' id="{links.anchor(kind, name)}"' + links.data_k(kernels_of_name(name))
        line = _NONE_TAIL.sub("", line).replace("torch.ops.", "")
        out.append(f'<span class="ln"{attrs}>{_esc(line) or " "}</span>')
    return "".join(out)


def _fx_column(cg, links: GraphLinks, fx_gm) -> tuple[str, str]:
    if fx_gm is not None:
        body = _code_lines(fx_gm.code, links, "fx", lambda n: links.dynamo_kernels.get(n, ()))
        return "FX graph (Dynamo)", f"<pre>{body}</pre>"
    seen: dict[tuple, set] = {}
    for node in links.aten_nodes:
        frame = _user_frame(node)
        if frame:
            seen.setdefault(frame, set()).update(links.aten_kernels[node.name])
    if not seen:
        return "FX graph", '<p class="note">Dynamo\'s FX graph was not recorded for this compile.</p>'
    lines = [f'<span class="ln"{links.data_k(ks)}><span class="loc">{_esc(loc)}</span> {_esc(code)}</span>'
             for (loc, code), ks in seen.items()]
    note = ('<p class="note">Dynamo\'s FX graph was not recorded; these are the user source lines '
            'the ATen nodes came from (their stack traces).</p>')
    return "Source lines (FX graph)", note + "<pre>" + "".join(lines) + "</pre>"


def _aten_column(cg, links: GraphLinks) -> str:
    return "<pre>" + _code_lines(cg.graph.module.code, links, "aten",
                                 lambda n: links.aten_kernels.get(n, ())) + "</pre>"


def _ir_column(cg, links: GraphLinks) -> str:
    g = cg.graph
    inputs = "# inputs: " + ", ".join(g.graph_input_names)
    parts = [f'<pre class="ir-head">{_esc(inputs)}</pre>']
    for buf in g.buffers:
        name = buf.get_name()
        kernel = links.kernel_of.get(name)
        cls, note = ("ir", "") if kernel else ("ir dead", "  # eliminated: nobody reads it")
        parts.append(f'<pre id="{links.anchor("ir", name)}" class="{cls}"{links.data_k([kernel] if kernel else [])}>'
                     f"{_esc(str(buf))}{_esc(note)}</pre>")
    outs = [getattr(o, "get_name", lambda o=o: o)() for o in g.outputs]
    parts.append(f'<pre class="ir-head">{_esc("# outputs: " + str(outs))}</pre>')
    return "\n".join(parts)


def _origin_links(links: GraphLinks, origins) -> str:
    if not origins:
        return '<span class="muted">(origins not recorded)</span>'
    return ", ".join(f'<a href="#{links.anchor("aten", o)}">{_esc(o)}</a>' for o in origins)


def _schedule_column(cg, links: GraphLinks) -> str:
    cards = []
    for item in cg.scheduler.schedule:
        if isinstance(item, FusedGroup):
            k = item.kernel_name
            kernel = cg.kernels[k]
            loops = f"{item.R}" + (f" x reduction {item.Q}" if item.Q else "")
            bufs = ", ".join(f'<a href="#{links.anchor("ir", b)}">{_esc(b)}</a>'
                             + (' <span class="tag">registers</span>' if b in kernel.removed else "")
                             + (f' <span class="tag">-&gt; {_esc(kernel.mutated[b])} (in place)</span>'
                                if b in kernel.mutated else "")
                             for b in item.get_names())
            cards.append(
                f'<div class="kcard" id="{links.anchor("kernel", k)}"{links.data_k([k])}>'
                f'<div class="kname"><a href="#{links.anchor("code", k)}">{_esc(k)}</a> '
                f'<span class="muted">{_esc(loops)}</span></div>'
                f"<div>computes {bufs}</div>"
                f"<div>from {_origin_links(links, links.kernel_origins(k))}</div>"
                f'<div class="muted">args {_esc(", ".join(kernel.args))}; moves {human_bytes(kernel.bytes_moved)}</div>'
                "</div>")
        else:
            node, name = item.node, item.get_name()
            what = getattr(node, "op", None) or f"{node.parent.get_name()}[{node.index}]"
            reason = getattr(node, "reason", "")
            cards.append(
                f'<div class="kcard extern" id="{links.anchor("kernel", name)}"{links.data_k([name])}>'
                f'<div class="kname">extern <a href="#{links.anchor("ir", name)}">{_esc(name)}</a> '
                f'<span class="muted">{_esc(str(what))}</span></div>'
                f"<div>from {_origin_links(links, links.kernel_origins(name))}</div>"
                + (f'<div class="muted">{_esc(reason)}</div>' if reason else "") + "</div>")
    dead = [b.get_name() for b in cg.graph.buffers if b.get_name() not in links.kernel_of]
    if dead:
        cards.append(f'<p class="muted">eliminated (dead code): {_esc(", ".join(dead))}</p>')
    return "\n".join(cards)


def _code_column(cg, links: GraphLinks) -> str:
    parts = []
    for k, kernel in cg.kernels.items():
        parts.append(f'<div class="code" id="{links.anchor("code", k)}"{links.data_k([k])}>'
                     f'<div class="kname"><a href="#{links.anchor("kernel", k)}">{_esc(k)}</a> '
                     f'({LANGUAGE_NAMES[kernel.language]})</div>'
                     f"<pre>{_esc(kernel.source)}</pre></div>")

    def wrapper_kernels(name):
        return [links.kernel_of[name]] if name in links.kernel_of else [name] if name in cg.kernels else []
    wrapper, folded, language = [], None, "cpp"
    for line in cg.wrapper_source.splitlines():
        if folded is not None:  # kernel source embedded in the wrapper: shown above, folded here
            if not line.startswith("'''"):
                folded.append(line)
                continue
            entry = next((i for i, f in enumerate(folded) if f.startswith('extern "C" PyObject* call')), len(folded))
            folded, shown = folded[:entry], folded[entry:]   # a C++ wrapper's `call` stays in view
            what = "C++ (the kernels above)" if language == "cpp" else "Triton (the kernel above)"
            wrapper.append(f"</pre><details><summary>{len(folded)} lines of {what}</summary>"
                           f"<pre>{_esc(chr(10).join(folded))}</pre></details><pre>")
            wrapper += [f'<span class="ln">{_esc(f) or " "}</span>' for f in shown]
            folded = None
        elif line.startswith("CPP_SOURCE = r'''") or re.match(r"^\w+ = load_module\(r'''$", line):
            folded, language = [], "cpp" if line.startswith("CPP_SOURCE") else "triton"
        m = re.match(r"^\s+(\w+)(?: =|\()", line)
        ks = wrapper_kernels(m.group(1)) if m else []
        wrapper.append(f'<span class="ln"{links.data_k(ks)}>{_esc(line) or " "}</span>')
    parts.append(f'<div class="code"><div class="kname">wrapper <span class="muted">{_esc(cg.path)}</span></div>'
                 f'<pre>{"".join(wrapper)}</pre></div>')
    return "\n".join(parts)


# --------------------------------------------------------------------------- user source lines
def _source_section(cg, links: GraphLinks, prov: GraphProvenance) -> str:
    """Each user source line (from the ATen nodes' stack traces, provenance.py) and the kernels and
    extern calls it became; a row carries their data-k, so hovering a line lights its kernels and
    hovering a kernel anywhere lights its lines."""
    rows = [f'<tr class="src"{links.data_k(ks)}><td class="loc" title="{_esc(line.file)}">{_esc(line.loc)}</td>'
            f"<td><code>{_esc(line.code)}</code></td><td>"
            + ", ".join(f'<a href="#{links.anchor("kernel", k)}">{_esc(k)}</a>' for k in ks) + "</td></tr>"
            for line, ks in prov.source_lines().items()]
    missing = [k.name for k in prov.kernels if not k.source_lines]
    note = (f'<p class="muted">No user source line for {_esc(", ".join(missing))} (no stack trace on its ATen '
            "nodes nor on the Dynamo nodes they came from).</p>" if missing else "")
    if not rows:
        return '<p class="muted">No ATen node carries a user stack trace.</p>' + note
    return ('<table class="source"><thead><tr><th>line</th><th>user code</th><th>became</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>" + note)


def _source_cell(prov: GraphProvenance, kernel: str) -> str:
    """The user source lines of one kernel, for the kernels table."""
    k = next((k for k in prov.kernels if k.name == kernel), None)
    lines = k.source_lines if k else []
    return "<br>".join(f'<span title="{_esc(s.code)}">{_esc(s.loc)}</span>' for s in lines) or '<span class="muted">-</span>'
