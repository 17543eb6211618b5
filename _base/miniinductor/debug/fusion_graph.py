"""Fusion-graph pictures: which buffers each kernel computes and which values cross memory.

Phase 7 (debug). In: a `CompiledGraph`. Out: a networkx `DiGraph` of graph inputs,
computed buffers and extern (ATen) calls, and its rendering with graphviz (DOT, SVG, PNG).
Real Inductor's twin is `torch/_inductor/fx_utils.py` + `debug.py`'s `draw_buffers`
(`TORCH_COMPILE_DEBUG=1` writes `graph_diagram.svg`); we draw the scheduler's nodes after
fusion instead of the FX graph, so the picture answers "what did fusion buy?":

  * one cluster (shaded box) per kernel, labelled with its loops and the bytes it moves;
  * an edge inside a kernel (solid green) is a value that never leaves the kernel;
  * an edge between kernels (dashed red, labelled with bytes) is a round trip through
    memory: written by one kernel, read back by another;
  * an edge from a graph input (thin grey) is a load that no schedule can avoid;
  * a dashed node is a buffer kept in registers (never allocated), a double border marks
    a graph output, a 3-D box an extern call (matmul, ...).

Rendering needs graphviz's `dot` program. Without it the DOT source is still written and
the returned message says how to install graphviz.
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import networkx as nx

from ..ir.nodes import MultiOutput
from ..scheduler import FusedGroup

INSTALL_HINT = ("install graphviz's `dot` program to render it (Debian/Ubuntu: `apt-get install graphviz`; "
                "macOS: `brew install graphviz`; conda: `conda install graphviz`), then run "
                "`dot -Tsvg {dot} -o {svg}`")

COLORS = {
    "fused": "#2e7d32", "memory": "#c62828", "input": "#9e9e9e",
    "input_fill": "#eeeeee", "buffer_fill": "#ffffff", "removed_fill": "#fff8e1",
    "extern_fill": "#ffe0b2", "cluster_fill": "#e3f2fd", "cluster_line": "#1565c0",
}


def human_bytes(n: int) -> str:
    n = int(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _short(items, limit=4) -> str:
    items = list(items)
    return ", ".join(items[:limit]) + (f", +{len(items) - limit} more" if len(items) > limit else "")


def _layout_text(buf) -> str:
    lay = getattr(buf, "layout", None)
    if lay is None:
        return "tuple"
    return f"{str(lay.dtype).replace('torch.', '')}{list(lay.size)}"


def _origins(buf) -> list[str]:
    if isinstance(buf, MultiOutput):
        return [f"{_origins(buf.parent)[0]}[{buf.index}]"]
    return [str(o) for o in getattr(buf, "origins", [])]


# --------------------------------------------------------------------------- the graph
def build_fusion_graph(cg) -> nx.DiGraph:
    """A DiGraph of one compiled graph after fusion.

    Node attributes: kind ('input' | 'buffer' | 'extern'), label, origins (list of the ATen
    FX node names it was lowered from), layout ('float32[8, 64]'), nbytes, kernel (kernel name
    or None), removed (kept in registers), output (returned by the graph).
    Edge attributes: kind ('fused' | 'memory' | 'input'), nbytes.
    Graph attributes: name, kernels {kernel: {loops, nbytes, buffers}}.
    """
    sched, graph = cg.scheduler, cg.graph
    G = nx.DiGraph(name=graph.name, kernels={})
    kernel_of, removed = {}, set()
    for item in sched.schedule:
        if isinstance(item, FusedGroup):
            kernel = cg.kernels[item.kernel_name]
            removed |= kernel.removed
            loops = f"{item.R}" + (f" x reduction {item.Q}" if item.Q else "")
            G.graph["kernels"][item.kernel_name] = {
                "loops": loops, "nbytes": kernel.bytes_moved, "buffers": item.get_names()}
            for name in item.get_names():
                kernel_of[name] = item.kernel_name

    def add(name, kind, buf):
        nbytes = sched.nbytes.get(name, 0)
        G.add_node(name, kind=kind, origins=_origins(buf), layout=_layout_text(buf), nbytes=nbytes,
                   kernel=kernel_of.get(name), removed=name in removed, output=name in sched.output_names)

    for node in sched.nodes:
        name = node.get_name()
        add(name, "buffer" if name in kernel_of else "extern", node.node)
    for node in sched.nodes:
        for dep in sorted(node.read_names()):
            if dep not in G:
                add(dep, "input", graph.get_buffer(dep))
            a, b = G.nodes[dep], G.nodes[node.get_name()]
            if a["kind"] == "input":
                kind = "input"
            elif a["kernel"] is not None and a["kernel"] == b["kernel"]:
                kind = "fused"
            else:
                kind = "memory"
            G.add_edge(dep, node.get_name(), kind=kind, nbytes=a["nbytes"])
    for name, data in G.nodes(data=True):
        data["label"] = node_label(name, data)
    return G


def node_label(name, data) -> str:
    lines = [name]
    if data["kind"] == "extern":
        lines.append(_short(data["origins"], 2))
    elif data["kind"] == "buffer":
        lines.append(_short(data["origins"]) if data["origins"] else "(origins not recorded)")
    lines.append(f"{data['layout']} · {human_bytes(data['nbytes'])}")
    if data["removed"]:
        lines.append("kept in registers")
    if data["output"]:
        lines.append("graph output")
    return "\n".join(lines)


# --------------------------------------------------------------------------- DOT
def to_dot(G: nx.DiGraph, anchor_prefix: str | None = None):
    """A `graphviz.Digraph`. With `anchor_prefix`, kernels and buffers link to the HTML
    report's anchors (`#{prefix}-kernel-kernel0`, `#{prefix}-ir-buf3`)."""
    import graphviz  # optional: only drawing needs it

    name = G.graph.get("name", "graph")
    dot = graphviz.Digraph(name=f"fusion_{name}", graph_attr={
        "rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", "labelloc": "t", "nodesep": "0.25",
        "ranksep": "0.35", "label": (f"fusion graph of {name}: green = stays inside a kernel, "
                                     "dashed red = memory round trip, grey = graph input; "
                                     "dashed node = kept in registers"),
    }, node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "filled", "penwidth": "1"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9", "arrowsize": "0.6"})

    def href(kind, key):
        return {"URL": f"#{anchor_prefix}-{kind}-{key}", "target": "_top"} if anchor_prefix else {}

    def node_attrs(n, data):
        attrs = {"label": data["label"], "tooltip": f"{n}: {', '.join(data['origins']) or data['kind']}",
                 "id": f"{anchor_prefix}-node-{n}" if anchor_prefix else f"node-{n}"}
        if data["kind"] == "input":
            attrs.update(shape="ellipse", fillcolor=COLORS["input_fill"], color=COLORS["input"])
        elif data["kind"] == "extern":
            attrs.update(shape="box3d", fillcolor=COLORS["extern_fill"], **href("kernel", n))
        else:
            attrs.update(shape="box", fillcolor=COLORS["removed_fill" if data["removed"] else "buffer_fill"],
                         style="filled,dashed,rounded" if data["removed"] else "filled,rounded", **href("ir", n))
        if data["output"]:
            attrs["peripheries"] = "2"
        return attrs

    for kname, info in G.graph.get("kernels", {}).items():
        with dot.subgraph(name=f"cluster_{kname}") as sub:
            sub.attr(label=f"{kname}  ({info['loops']}, moves {human_bytes(info['nbytes'])})",
                     style="filled,rounded", fillcolor=COLORS["cluster_fill"], color=COLORS["cluster_line"],
                     fontname="Helvetica-Bold", fontsize="11",
                     id=f"{anchor_prefix}-cluster-{kname}" if anchor_prefix else f"cluster-{kname}",
                     tooltip=f"{kname}: computes {', '.join(info['buffers'])}", **href("kernel", kname))
            for n in info["buffers"]:
                if n in G:
                    sub.node(n, **node_attrs(n, G.nodes[n]))
    for n, data in G.nodes(data=True):
        if data["kernel"] is None:
            dot.node(n, **node_attrs(n, data))
    for a, b, data in G.edges(data=True):
        if data["kind"] == "fused":
            dot.edge(a, b, color=COLORS["fused"], penwidth="2", tooltip=f"{a} → {b}: fused, stays in the kernel")
        elif data["kind"] == "memory":
            dot.edge(a, b, color=COLORS["memory"], style="dashed", penwidth="1.5",
                     label=human_bytes(data["nbytes"]), fontcolor=COLORS["memory"],
                     tooltip=f"{a} → {b}: written to memory and read back ({human_bytes(data['nbytes'])})")
        else:
            dot.edge(a, b, color=COLORS["input"], tooltip=f"{a} → {b}: graph input load")
    return dot


# --------------------------------------------------------------------------- rendering
def dot_available() -> bool:
    return shutil.which("dot") is not None


MISSING_PACKAGE = ("the graphviz Python package is not installed, so no fusion graph was written "
                   "(pip install graphviz; drawing it also needs graphviz's `dot` program)")


def missing_dot_message(dot_path: Path | str, svg_path: Path | str | None = None) -> str:
    dot_path = Path(dot_path)
    svg = svg_path or dot_path.with_suffix(".svg")
    return (f"graphviz's `dot` program was not found, so only the DOT source was written to {dot_path}; "
            + INSTALL_HINT.format(dot=dot_path, svg=svg))


@dataclasses.dataclass
class RenderedGraph:
    dot: Path | None                # written unless the graphviz Python package is missing
    svg: Path | None = None         # None when `dot` is missing
    png: Path | None = None
    message: str | None = None      # why something was not rendered, and how to fix it

    @property
    def ok(self) -> bool:
        return self.message is None


_warned = False


def _warn_once(message: str):
    global _warned
    if not _warned:
        _warned = True
        print(f"miniinductor: {message}", file=sys.stderr)


def render_fusion_graph(cg_or_graph, folder, name: str = "fusion_graph", formats=("svg", "png"),
                        anchor_prefix: str | None = None, quiet: bool = False) -> RenderedGraph:
    """Write `{name}.dot` and, when graphviz's `dot` is installed, `{name}.svg`/`.png`."""
    G = cg_or_graph if isinstance(cg_or_graph, nx.DiGraph) else build_fusion_graph(cg_or_graph)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        dot = to_dot(G, anchor_prefix)
    except ImportError:   # a compile with a trace folder must not fail for want of a drawing
        result = RenderedGraph(None, message=MISSING_PACKAGE)
        if not quiet:
            _warn_once(result.message)
        return result
    result = RenderedGraph(folder / f"{name}.dot")
    result.dot.write_text(dot.source)
    if not dot_available():
        result.message = missing_dot_message(result.dot)
    else:
        import graphviz  # optional: only drawing needs it
        try:
            for fmt in formats:
                path = folder / f"{name}.{fmt}"
                path.write_bytes(dot.pipe(format=fmt))
                setattr(result, fmt, path)
        except graphviz.ExecutableNotFound:
            result.message = missing_dot_message(result.dot)
        except graphviz.CalledProcessError as exc:
            result.message = f"graphviz failed to render {result.dot}: {exc}"
    if result.message and not quiet:
        _warn_once(result.message)
    return result


def fusion_graph_svg(cg_or_graph, anchor_prefix: str | None = None) -> tuple[str | None, str]:
    """(SVG text for inlining, DOT source); the SVG is None when `dot` is missing."""
    G = cg_or_graph if isinstance(cg_or_graph, nx.DiGraph) else build_fusion_graph(cg_or_graph)
    try:
        dot = to_dot(G, anchor_prefix)
    except ImportError:
        return None, f"// {MISSING_PACKAGE}"
    if not dot_available():
        return None, dot.source
    import graphviz  # optional: only drawing needs it
    try:
        return dot.pipe(format="svg").decode(), dot.source
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError):
        return None, dot.source
