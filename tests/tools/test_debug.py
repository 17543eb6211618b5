"""The debug artifacts: trace folder, fusion-graph pictures, HTML report, `_repr_html_`.

Real compiled graphs throughout (a layer norm and a small GPT-2 block); the report is
opened in a real browser by test_report_browser.py.
"""
from __future__ import annotations

import ast
import html
import json
import re
import runpy
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import networkx as nx
import pytest
import torch

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.tools.debug import fusion_graph as fg
from miniinductor.tools.debug.memory import eager_peak
from miniinductor.tools.debug.report import render_report, write_report
from miniinductor.tools.debug.trace import trace_compiled_graph, write_trace
from miniinductor.tools.models import GPT2Block

TRACE_FILES = ["fx_graph.py", "aten_graph.py", "aten_graph.txt", "ir_pre_fusion.txt", "ir_post_fusion.txt",
               "schedule.txt", "fusion_decisions.json", "memory_plan.txt", "memory_plan.json",
               "output_code.py", "kernels.cpp", "fusion_graph.dot", "fusion_graph.svg", "fusion_graph.png",
               "report.html"]
SECTION_IDS = ["summary", "timings", "g0-phases", "g0-source", "g0-kernels", "g0-fusion-graph", "g0-decisions", "g0-memory"]


def require_dot():
    if shutil.which("dot") is None:
        pytest.fail("graphviz's `dot` program is missing: .ci/install should install it "
                    "(Debian/Ubuntu: apt-get install -y graphviz)")


@pytest.fixture(scope="module")
def layer_norm():
    torch.manual_seed(0)
    return miniinductor.explain(torch.nn.LayerNorm(64), torch.randn(8, 64))


@pytest.fixture(scope="module")
def gpt2():
    torch.manual_seed(0)
    with torch.no_grad():
        return miniinductor.explain(GPT2Block(64, 4, 32), torch.randn(2, 16, 64))


@pytest.fixture(scope="module")
def gpt2_trace(gpt2, tmp_path_factory):
    return write_trace(gpt2.graphs[0], tmp_path_factory.mktemp("trace") / "gpt2")


def kernel_names(cg):
    return list(cg.kernels)


def extern_names(cg):
    return [n for n, data in fg.build_fusion_graph(cg).nodes(data=True) if data["kind"] == "extern"]


# --------------------------------------------------------------------------- trace folder
def test_trace_files_exist_and_parse(gpt2_trace):
    require_dot()
    for name in TRACE_FILES:
        path = gpt2_trace / name
        assert path.is_file(), f"{name} missing from the trace folder"
        assert path.stat().st_size > 0, f"{name} is empty"
        if name.endswith(".py"):
            text = path.read_text()
            ast.parse(text, filename=name)
            compile(text, name, "exec")
        if name.endswith(".json"):
            json.loads(path.read_text())
    ET.parse(gpt2_trace / "fusion_graph.svg")
    assert (gpt2_trace / "fusion_graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_trace_graphs_are_runnable(gpt2_trace, capsys):
    for name in ("fx_graph.py", "aten_graph.py"):
        runpy.run_path(str(gpt2_trace / name), run_name="__main__")
        assert "(2, 16, 64)" in capsys.readouterr().out   # the block's output shape


def test_trace_contents_match_the_compile(gpt2, gpt2_trace):
    cg = gpt2.graphs[0]
    decisions = json.loads((gpt2_trace / "fusion_decisions.json").read_text())["decisions"]
    assert len(decisions) == len(cg.scheduler.decisions) > 0
    assert set(decisions[0]) == {"node1", "node2", "fused", "reason", "score"}
    plan = json.loads((gpt2_trace / "memory_plan.json").read_text())
    assert plan["peak_bytes"] == cg.plan.peak_bytes and plan["eager_peak_bytes"] == eager_peak(cg)
    assert [s["live_bytes"] for s in plan["steps"]] == cg.plan.timeline
    assert (gpt2_trace / "output_code.py").read_text() == cg.wrapper_source
    assert (gpt2_trace / "ir_pre_fusion.txt").read_text().strip() == str(cg.graph).strip()
    post = (gpt2_trace / "ir_post_fusion.txt").read_text()
    schedule = (gpt2_trace / "schedule.txt").read_text()
    for k in kernel_names(cg):
        assert k in post and k in schedule
    assert "kept in registers" in post
    assert not (gpt2_trace / "kernels.py").exists(), "C++ kernels go to kernels.cpp only"
    assert all(k.startswith("cpp_fused_") for k in kernel_names(cg)), kernel_names(cg)
    assert "addmm" in (gpt2_trace / "aten_graph.txt").read_text()
    assert "models.py" in (gpt2_trace / "aten_graph.txt").read_text()  # user source lines


def test_trace_kernels_cpp_compiles(gpt2_trace):
    cxx = shutil.which("g++") or shutil.which("c++")
    assert cxx, "a C++ compiler is needed to run miniinductor at all"
    result = subprocess.run([cxx, "-std=c++17", "-fopenmp", "-fsyntax-only", str(gpt2_trace / "kernels.cpp")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_trace_with_dynamo_graph_and_backward(tmp_path, capsys):
    """With Dynamo's graph, fx_graph.py is *that* graph; training compiles forward and backward."""
    dynamo_graphs = []

    def backend(gm, example_inputs):
        dynamo_graphs.append(gm)
        return miniinductor.backend(gm, example_inputs)
    torch._dynamo.reset()
    ln = torch.nn.LayerNorm(32)
    x = torch.randn(4, 32, requires_grad=True)
    with collect_compiled() as graphs:
        torch.compile(ln, backend=backend)(x).relu().sum().backward()
    assert [cg.graph.name for cg in graphs] == ["forward", "backward"]
    forward, backward = (set(cg.kernels) for cg in graphs)
    assert forward and backward and not forward & backward, "kernel names collide across the graphs"
    for cg in graphs:
        folder = write_trace(cg, tmp_path / cg.graph.name, fx_graph_module=dynamo_graphs[0])
        text = (folder / "fx_graph.py").read_text()
        assert "torch.nn.functional.layer_norm" in text   # Dynamo's level, not ATen's
        runpy.run_path(str(folder / "fx_graph.py"), run_name="__main__")
        runpy.run_path(str(folder / "aten_graph.py"), run_name="__main__")
        assert "FX graph (Dynamo)" in (folder / "report.html").read_text()
    capsys.readouterr()


def test_trace_compiled_graph_numbers_folders_and_prints_root_once(layer_norm, tmp_path, capsys):
    cg = layer_norm.graphs[0]
    first = trace_compiled_graph(cg, tmp_path / "traces")
    second = trace_compiled_graph(cg, tmp_path / "traces")
    assert (first.name, second.name) == (f"000_{cg.graph.name}", f"001_{cg.graph.name}")
    assert (second / "report.html").is_file()
    err = capsys.readouterr().err
    assert err.count(str((tmp_path / "traces").resolve())) == 1


# --------------------------------------------------------------------------- fusion graph
def test_fusion_graph_structure(gpt2):
    cg = gpt2.graphs[0]
    G = gpt2.fusion_graph()
    assert isinstance(G, nx.DiGraph) and nx.is_directed_acyclic_graph(G)
    assert set(G.graph["kernels"]) == set(cg.kernels)
    removed = {b for k in cg.kernels.values() for b in k.removed}
    assert removed, "a GPT-2 block keeps some reductions in registers"
    for name, data in G.nodes(data=True):
        assert data["removed"] == (name in removed)
        assert name in data["label"] and data["layout"] in data["label"]
        if data["kind"] == "buffer":
            assert data["kernel"] in cg.kernels
    kinds = {d["kind"] for _, _, d in G.edges(data=True)}
    assert kinds == {"fused", "memory", "input"}
    for a, b, d in G.edges(data=True):
        same = G.nodes[a]["kernel"] is not None and G.nodes[a]["kernel"] == G.nodes[b]["kernel"]
        assert (d["kind"] == "fused") == same
    # a buffer kept in registers never crosses memory
    for a, b, d in G.edges(data=True):
        if G.nodes[a]["removed"]:
            assert d["kind"] == "fused"
    assert any("addmm" in " ".join(d["origins"]) for _, d in G.nodes(data=True) if d["kind"] == "extern")


def test_fusion_graph_svg_names_every_kernel(gpt2, tmp_path):
    require_dot()
    cg = gpt2.graphs[0]
    result = fg.render_fusion_graph(cg, tmp_path)
    assert result.ok and result.svg and result.png
    root = ET.parse(result.svg).getroot()
    text = " ".join(t for el in root.iter() for t in [el.text or ""])
    for name in kernel_names(cg):
        assert re.search(rf"\b{name}\b", text), f"{name} not named in the SVG"
    for name in extern_names(cg):
        assert re.search(rf"\b{name}\b", text)
    assert "kept in registers" in text


def test_dot_missing_writes_dot_and_says_how_to_install(gpt2, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fg.shutil, "which", lambda name, *a, **k: None)
    result = fg.render_fusion_graph(gpt2.graphs[0], tmp_path)
    assert result.svg is None and result.png is None and not result.ok
    source = result.dot.read_text()
    assert source.startswith("digraph") and f"cluster_{kernel_names(gpt2.graphs[0])[0]}" in source
    assert "apt-get install graphviz" in result.message and "brew install graphviz" in result.message
    assert not (tmp_path / "fusion_graph.svg").exists()
    # the whole trace still works, and the report says how to get the picture
    folder = write_trace(gpt2.graphs[0], tmp_path / "trace")
    assert (folder / "fusion_graph.dot").is_file() and not (folder / "fusion_graph.svg").exists()
    assert "apt-get install graphviz" in (folder / "report.html").read_text()
    capsys.readouterr()


def test_dot_not_runnable_falls_back(gpt2, tmp_path, monkeypatch):
    """`which` finds nothing wrong, but graphviz itself cannot start `dot` (empty PATH)."""
    monkeypatch.setattr(fg, "dot_available", lambda: True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = fg.render_fusion_graph(gpt2.graphs[0], tmp_path, quiet=True)
    assert result.dot.is_file() and result.svg is None
    assert "apt-get install graphviz" in result.message


def test_graphviz_package_missing_trace_still_written(gpt2, tmp_path, monkeypatch, capsys):
    """Without the graphviz Python package (found so on a GPU machine) a trace folder is
    still written, minus the drawing, and the message says what to install."""
    monkeypatch.setitem(sys.modules, "graphviz", None)   # `import graphviz` raises ImportError
    result = fg.render_fusion_graph(gpt2.graphs[0], tmp_path / "g")
    assert result.dot is None and not result.ok and "pip install graphviz" in result.message
    folder = write_trace(gpt2.graphs[0], tmp_path / "trace")
    assert (folder / "output_code.py").is_file() and not (folder / "fusion_graph.dot").exists()
    assert "pip install graphviz" in (folder / "report.html").read_text()
    capsys.readouterr()


# --------------------------------------------------------------------------- report
class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        for key in ("href", "xlink:href", "src"):
            if attrs.get(key):
                self.hrefs.append(attrs[key])


def test_report_sections_links_and_escaping(gpt2, tmp_path):
    require_dot()
    cg = gpt2.graphs[0]
    path = write_report(gpt2.graphs, tmp_path / "report.html", timings={"eager": 2.0, "miniinductor": 1.0})
    text = path.read_text()
    parser = _Ids()
    parser.feed(text)
    ids = set(parser.ids)
    assert len(parser.ids) == len(ids), "duplicate ids"
    for section in SECTION_IDS:
        assert section in ids, section
    for k in kernel_names(cg):
        assert f"g0-kernel-{k}" in ids and f"g0-code-{k}" in ids
    # every in-page link lands somewhere; nothing is fetched from the network
    for href in parser.hrefs:
        assert not re.match(r"(https?:)?//", href), href
        if href.startswith("#"):
            assert href[1:] in ids, f"dangling link {href}"
    assert "<link" not in text and "@import" not in text and " src=" not in text
    # each kernel links to the ATen ops it came from
    kernel0 = text[text.index(f'id="g0-kernel-{kernel_names(cg)[0]}"'):]
    kernel0 = kernel0[:kernel0.index("</div></div>") if "</div></div>" in kernel0 else 2000]
    assert 'href="#g0-aten-' in kernel0
    # each kernel's code is labelled with its language
    assert all(f"{k}</a> (C++)</div>" in text for k in kernel_names(cg)) and "(Triton)" not in text
    # code is escaped: the C++ loop condition `i0 < 2` never appears raw
    assert "i0 &lt; 2" in text and "i0 < 2" not in text
    assert "<svg" in text and "memchart" in text and "eager estimate peak" in text
    assert "miniinductor" in text[text.index('id="timings"'):]


def test_report_links_kernels_and_user_source_lines(gpt2):
    """Each user source line of the block's forward is a row carrying the keys of the kernels it
    became (hovering either lights the other, through data-k); each kernel row lists its lines."""
    text = render_report(gpt2.graphs)
    section = text[text.index('id="g0-source"'):text.index('id="g0-kernels"')]
    rows = re.findall(r'<tr class="src" data-k="([^"]+)"><td class="loc" title="([^"]+)">([^<]+)</td><td><code>([^<]*)</code>', section)
    assert rows
    lines = {}
    for keys, file, loc, code in rows:
        assert file.endswith("tools/models.py")
        line = int(loc.rsplit(":", 1)[1])
        assert open(file).read().splitlines()[line - 1].strip() == html.unescape(code)
        for key in keys.split():
            lines.setdefault(key.removeprefix("g0:"), []).append(loc)
    assert set(kernel_names(gpt2.graphs[0])) <= set(lines)   # every kernel has a line
    kernels = text[text.index('id="g0-kernels"'):text.index('id="g0-fusion-graph"')]
    for k in kernel_names(gpt2.graphs[0]):
        row = re.search(rf'<tr data-k="g0:{k}">.*?</tr>', kernels).group(0)
        assert all(loc in row for loc in lines[k]), k


def test_report_without_fusion(tmp_path):
    """No fusion decisions, one kernel per buffer: the report still renders."""
    def fn(x):
        y = x.sin() + 1
        return y, y.sum(-1)
    r = miniinductor.explain(fn, torch.randn(4, 8), fusion=False)
    html = render_report(r.graphs)
    assert kernel_names(r.graphs[0]) == ["cpp_fused_add_sin_0", "cpp_fused_sum_1"]
    assert "No fusion candidates" in html and "g0-kernel-cpp_fused_sum_1" in html


def test_repr_html(layer_norm):
    html = layer_norm._repr_html_()
    assert isinstance(html, str) and html.startswith("<div") and "<html" not in html
    assert kernel_names(layer_norm.graphs[0])[0] in html and "<details" in html and "<table" in html
    if shutil.which("dot"):
        assert "<svg" in html


def test_explain_result_helpers(layer_norm, tmp_path):
    path = layer_norm.write_report(tmp_path / "r.html")
    assert path.read_text().startswith("<!DOCTYPE html>")
    folders = layer_norm.write_trace(tmp_path / "trace")
    assert len(folders) == len(layer_norm.graphs) and (folders[0] / "output_code.py").is_file()


def test_counts_are_pluralised():
    """'1 kernel', never '1 kernels': the counts in explain, the trace and the memory plan."""
    import miniinductor
    from miniinductor.logs import plural
    assert (plural(1, "kernel"), plural(0, "kernel"), plural(3, "extern call")) == ("1 kernel", "0 kernels", "3 extern calls")
    result = miniinductor.explain(lambda x: x.sin() + 1, torch.randn(8, 8))   # one kernel, one graph
    text = str(result)
    assert "1 kernel," in text and "1 kernels" not in text, text


def test_decision_summary_counts_each_kind():
    """Past 16 decisions explain (and the demo) count them per kind: a combo kernel is
    "1 combo" (its reason starts with a count of its own: never "1 2 independent ..."), and
    the cycles are one kind whatever buffer they go via."""
    from miniinductor.ext.combo.schedule import ComboDecision
    from miniinductor.scheduler.fusion import FusionDecision
    from miniinductor.tools.debug.explain import decision_lines
    decisions = [FusionDecision(f"buf{k}", f"buf{k + 1}", True, "vertical, loops [2, 64] x [128]", 8)
                 for k in range(14)]
    decisions += [FusionDecision("buf4", "buf5", True, "horizontal, loops [2, 4, 64, 32]", 8),
                  ComboDecision("buf4+buf5", "buf11", True,
                                "2 independent pointwise kernels, 65536 elements in all: one launch instead of 2"),
                  FusionDecision("buf0", "buf15", False, "would create a cycle via buf1+buf2", 8),
                  FusionDecision("buf15", "buf21", False, "would create a cycle via buf18", 8),
                  FusionDecision("buf3", "buf9", False, "ranges differ: [2, 64] vs [2, 4, 64]")]
    assert decision_lines(decisions) == [
        "fusion: 16 pairs fused, 3 not fused",
        "  fused: 14 vertical, 1 horizontal, 1 combo",
        "  not fused: 2 would create a cycle, 1 ranges differ",
        "  (19 decisions: each is listed in the HTML report)"]
