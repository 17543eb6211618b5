"""`TORCH_TRACE=dir` read by the real tlparse, and the provenance it shows.

The demo's model (a GPT-2 block, small) is compiled in a subprocess under TORCH_TRACE, as a user
runs it; `tlparse LOG -o OUT --overwrite --no-browser --inductor-provenance` then writes its
pages, and the tests read them: the index lists our artifacts beside Dynamo's graphs, the output
code page holds our kernels, and the provenance page maps each kernel's line in the output code
to the post-grad (ATen) nodes it came from. tlparse 0.4.3 wants the log file itself (a folder only
with --latest). `explain --provenance` on the zoo's GPT-2 is checked against the model's own file.
"""
from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import miniinductor
from miniinductor.tools.debug.provenance import GraphProvenance, user_frame
from miniinductor.tools.debug.structured_trace import structured_records

ROOT = Path(__file__).resolve().parents[2]
TLPARSE = shutil.which("tlparse") or str(Path(sys.executable).parent / "tlparse")

SCRIPT = '''
import json, sys, torch, miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.tools.models import GPT2Block, make_demo_inputs
torch.manual_seed(0)
with torch.no_grad(), collect_compiled() as graphs:
    miniinductor.compile(GPT2Block(32, 2, max_seq=8).eval())(make_demo_inputs(1, 8, 32))
cg = graphs[0]
json.dump({"wrapper": cg.wrapper_source, "kernels": {k.name: {"source": k.source, "origins": k.origins}
           for k in cg.kernels.values()}}, open(sys.argv[1], "w"))
'''


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}


def text_of(page: Path) -> str:
    """A page's text: tags dropped, entities decoded (tlparse highlights code into <span>s)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


@pytest.fixture(scope="module")
def tl(tmp_path_factory):
    if not Path(TLPARSE).exists():
        assert os.environ.get("CI") != "true", "CI installs the dev extra, which has tlparse: it must run there"
        pytest.skip("the tlparse executable is not installed (pip install tlparse: the dev extra has it)")
    tmp = tmp_path_factory.mktemp("tlparse")
    (tmp / "model.py").write_text(SCRIPT)
    run = subprocess.run([sys.executable, str(tmp / "model.py"), str(tmp / "compiled.json")], cwd=tmp,
                         env={**env(), "TORCH_TRACE": str(tmp / "trace")}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    logs = list((tmp / "trace").glob("*.log"))
    assert len(logs) == 1, logs
    out = tmp / "out"
    parse = subprocess.run([TLPARSE, str(logs[0]), "-o", str(out), "--overwrite", "--no-browser", "--inductor-provenance"],
                           capture_output=True, text=True, timeout=120)
    assert parse.returncode == 0, parse.stderr[-3000:]
    return out, json.loads((tmp / "compiled.json").read_text())


def one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, (pattern, [p.name for p in folder.iterdir()])
    return found[0]


def test_index_lists_our_artifacts_beside_dynamos(tl):
    out, _ = tl
    index = (out / "index.html").read_text()
    for name in ("dynamo_output_graph", "aot_inference_graph", "before_pre_grad_graph", "inductor_post_grad_graph",
                 "inductor_output_code_", "inductor_provenance_tracking_node_mappings",
                 "inductor_provenance_tracking_kernel_stack_traces", "miniinductor_fusion_decisions",
                 "miniinductor_memory_plan", "miniinductor_provenance"):
        assert f"-_0_0_0/{name}" in index, name
    assert "provenance_tracking_-_0_0_0.html" in index


def test_output_code_page_holds_our_kernels(tl):
    out, compiled = tl
    code = text_of(one(out / "-_0_0_0", "inductor_output_code_*.html"))
    for name, kernel in compiled["kernels"].items():
        body = [ln.strip() for ln in kernel["source"].splitlines() if "tmp" in ln and "=" in ln]
        assert f"{name}(" in code and body and body[0] in code, name
    assert "def call(args):" in code


def test_node_mappings_are_each_kernels_origins(tl):
    out, compiled = tl
    mappings = json.loads(one(out / "-_0_0_0", "inductor_provenance_tracking_node_mappings_*.json").read_text())
    assert mappings["version"] == 2.0
    for name, kernel in compiled["kernels"].items():
        assert sorted(mappings["cppCodeToPost"][name]) == sorted(kernel["origins"]), name
        assert all(name in mappings["postToCppCode"][node] for node in kernel["origins"])
    post_graph = one(out / "-_0_0_0", "inductor_post_grad_graph_*.txt").read_text()
    pre_graph = one(out / "-_0_0_0", "before_pre_grad_graph_*.txt").read_text()
    for post, pres in mappings["postToPre"].items():   # both graph's node names, as tlparse reads them
        assert re.search(rf"^\s+{post}(:| =)", post_graph, re.M) and all(re.search(rf"^\s+{p}(:| =)", pre_graph, re.M) for p in pres)
    assert {"addmm", "bmm"} <= set(mappings["postToPre"])


def test_provenance_page_maps_kernel_lines_to_post_grad_nodes(tl):
    """tlparse turns the node mappings into line numbers: each kernel's call line in the output
    code → the lines of its ATen nodes in the post-grad graph."""
    out, compiled = tl
    page = (out / "provenance_tracking_-_0_0_0.html").read_text()
    lines = json.loads(re.search(r'<script id="lineMappings" type="application/json">(.*?)</script>', page, re.S).group(1))
    post_lines = one(out / "-_0_0_0", "inductor_post_grad_graph_*.txt").read_text().splitlines()
    shown = text_of(one(out / "-_0_0_0", "inductor_output_code_*.html")).removeprefix("\n").splitlines()
    wrapper = compiled["wrapper"].splitlines()
    assert shown[0].startswith("# AOT ID: ['inference']") and shown[1:1 + len(wrapper)] == wrapper
    start = shown.index("def call(args):")
    for name, kernel in compiled["kernels"].items():
        call = next(i + 1 for i, ln in enumerate(shown) if i > start and f"{name}(" in ln)   # as the browser numbers them
        nodes = {post_lines[n - 1].split(":")[0].strip() for n in lines["pyCodeToPost"][str(call)]}
        assert nodes == set(kernel["origins"]), name
    assert lines["preToPost"] and lines["postToPre"]
    assert "cpp_fused_" in text_of(out / "provenance_tracking_-_0_0_0.html")


def test_kernel_stack_traces_name_the_models_lines(tl):
    out, compiled = tl
    traces = json.loads(one(out / "-_0_0_0", "inductor_provenance_tracking_kernel_stack_traces_*.json").read_text())
    for name in compiled["kernels"]:
        assert any(user_frame(t) and user_frame(t).file.endswith("tools/models.py") for t in traces[name]), name


# ------------------------------------------------------------------ without the tlparse executable
def test_a_cache_hit_still_logs_its_output_code():
    """A compiled-graph cache hit keeps no graph nor scheduler: the output code and the mappings
    its kernels' origins give are still logged, nothing crashes."""
    torch.manual_seed(0)
    result = miniinductor.explain(lambda x: (x.sin() * 2).sum(-1), torch.randn(4, 8))
    hit = dataclasses.replace(result.graphs[0], graph=None, scheduler=None, plan=None)
    records = {meta.get("name", name): payload for name, meta, payload in structured_records(hit)}
    assert records["inductor_output_code"].endswith("\n" + hit.wrapper_source)
    mapping = json.loads(records["inductor_provenance_tracking_node_mappings"])
    assert set(mapping["cppCodeToPost"]) == set(hit.kernels) and "miniinductor_fusion_decisions" not in records


def test_backward_kernels_keep_the_forwards_source_lines(tmp_path):
    (tmp_path / "net.py").write_text("import torch\n\ndef f(x):\n    return torch.tanh(x * 3).sum()\n")
    sys.path.insert(0, str(tmp_path))
    try:
        from net import f
        x = torch.randn(8, 4, requires_grad=True)
        with miniinductor.compile_fx.collect_compiled() as graphs:
            miniinductor.compile(f)(x).backward()
    finally:
        sys.path.remove(str(tmp_path))
    assert [cg.graph.name for cg in graphs] == ["forward", "backward"]
    for cg in graphs:
        for k in GraphProvenance(cg).kernels:
            assert [s.line for s in k.source_lines] == [4] and k.source_lines[0].file.endswith("net.py"), (cg.graph.name, k)


# ------------------------------------------------------------------ explain --provenance
def test_explain_provenance_on_the_zoo_gpt2(tmp_path):
    run = subprocess.run([sys.executable, "-m", "miniinductor", "explain", "gpt2", "--provenance", "--no-trace",
                          "--report", str(tmp_path / "r.html")], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    text = run.stdout[run.stdout.index("provenance:"):]
    counts = re.findall(r"^graph \w+: (\d+) kernels, (\d+) with user source lines$", text, re.M)
    assert counts and all(a == b != "0" for a, b in counts), text
    blocks = re.split(r"^  (?=\S)", text, flags=re.M)[1:]
    assert len(blocks) == int(counts[0][0])
    for block in blocks:   # each kernel lists file:line of the model's source, and the line's code matches
        located = re.findall(r"^      (\S+\.py):(\d+)  (.*)$", block, re.M)
        assert located, block
        for path, line, code in located:
            source = (ROOT / path).read_text().splitlines()[int(line) - 1]   # paths are relative to the cwd, ROOT
            assert source.strip() == code.strip(), (path, line)
    assert "miniinductor/tools/zoo/models.py:" in text and "miniinductor/tools/models.py:" in text
