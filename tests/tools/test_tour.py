"""`python -m miniinductor tour`: every phase's section is printed with a real artifact in it.

Run in-process through `main(argv)` (the command line itself is covered by test_cli.py):
one compile of the tour's small model, then each section is checked for its own artifact,
so a section that printed its paragraph over an empty or wrong file would fail.
"""
from __future__ import annotations

import re

from miniinductor.tools.cli import main

# section title → strings its artifact must contain (kernel names are not hard-coded)
SECTIONS = {
    "1. FX graph (Dynamo)": ["class GraphModule", "def forward(", "layer_norm"],
    "2. ATen graph (AOTAutograd + decompositions)": ["torch.ops.aten.addmm", "torch.ops.prims.var"],
    "3. Loop IR (lowering)": ["Reduction(", "Pointwise(", "ops.load("],
    "4. Fused groups (scheduler)": ["nodes before fusion", "extern:", "fusion: ", ": fused ("],
    "5. Kernels (codegen)": ['extern "C" void', "for (int64_t"],
    "6. Wrapper": ["def call(args)", "del ", "return ("],
    "7. Memory plan": ["eager estimate peak", "live="],
    "8. Timings": ["median ms", "miniinductor", "eager"],
}


def test_tour_prints_every_phase(tmp_path, capsys):
    code = main(["tour", "--trace", str(tmp_path / "tour"), "--repeats", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    headers = list(re.finditer(r"^== (.+?) =+$", out, flags=re.M))
    assert [h.group(1) for h in headers] == list(SECTIONS), out[:3000]
    for h, nxt, (title, words) in zip(headers, headers[1:] + [None], SECTIONS.items()):
        body = out[h.end():nxt.start() if nxt else len(out)]
        paragraph, _, artifact = body.strip().partition("\n\n")
        assert len(paragraph.split()) > 30, f"{title}: no explanation paragraph:\n{body}"
        for word in words:
            assert word in artifact, f"{title}: {word!r} missing from its artifact:\n{artifact}"
    assert "(PASS)" in out
    folder = tmp_path / "tour" / "0_inference"
    for name in ("fx_graph.py", "aten_graph.txt", "ir_pre_fusion.txt", "schedule.txt", "kernels.cpp",
                 "output_code.py", "memory_plan.txt", "report.html"):
        assert (folder / name).stat().st_size > 0, name
