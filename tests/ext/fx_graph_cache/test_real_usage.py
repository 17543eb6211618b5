"""The compiled-graph cache on what users run, as they run it: the cache on (its default), a
library model trained in one process and then again in a second one with the same cache
folder. The rest of the suite runs with the cache off (tests/conftest.py), so this is where
the default path meets real models: the second process must hit (its graphs loaded, not
compiled) and still match eager, outputs and gradients, within test_real_models' tolerances,
and give the first process's numbers bit for bit. Each process is a subprocess (a crash loses
one case): a transformers model with its default (SDPA) attention and nn.TransformerEncoder in
training (the ATen level), BERT in inference (the capture level too).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from miniinductor.tools.real_models import available

ROOT = Path(__file__).resolve().parents[3]
GRAD_RTOL, OUTPUT_RTOL, LOSS_RTOL = 1e-3, 1e-4, 1e-5   # tests/core/test_real_models.py's

SCRIPT = """
import json, sys, torch
from miniinductor.ext import fx_graph_cache
from miniinductor.tools.real_models.compare import compare_training, summarize
result = compare_training(sys.argv[1], steps=2)
print("RESULT " + json.dumps({"summary": summarize(result), "losses": result["losses"],
                              "aten": fx_graph_cache.counters, "capture": fx_graph_cache.capture_counters}))
"""


def run(name: str, cache: Path) -> dict:
    env = {**os.environ, "MINIINDUCTOR_CACHE_DIR": str(cache), "MINIINDUCTOR_FX_GRAPH_CACHE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, name], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


@pytest.mark.sweep   # ~45 s: with the sweeps (.ci/run), not the quick suite
@pytest.mark.parametrize("name", ["gpt2-sdpa", "nn-encoder-causal"])
def test_a_second_process_trains_from_the_cache(name, tmp_path):
    if not available(name):
        pytest.skip(f"{name} needs a package that is not installed")
    cold, warm = run(name, tmp_path / "cache"), run(name, tmp_path / "cache")
    assert cold["aten"]["miss"] >= 2 and cold["aten"]["hit"] == 0, cold["aten"]      # forward + backward
    assert warm["aten"]["hit"] == cold["aten"]["miss"] and warm["aten"]["miss"] == 0, warm["aten"]
    for result in (cold, warm):
        summary = result["summary"]
        assert summary["loss"] <= LOSS_RTOL and summary["output"] <= OUTPUT_RTOL, summary
        assert summary["grad"] <= GRAD_RTOL and summary["param"] <= 1e-4, summary
    assert warm["losses"] == cold["losses"]   # the same kernels: the same bits


INFERENCE = """
import json, sys, torch
from miniinductor.ext import fx_graph_cache
from miniinductor.tools.real_models import make_batch, make_model
from miniinductor.tools.real_models.models import main_output
model = make_model(sys.argv[1], 0).eval()
inputs, _ = make_batch(sys.argv[1], torch.Generator().manual_seed(1))
with torch.no_grad():
    eager = main_output(model(**inputs))
    out = main_output(torch.compile(model, backend="miniinductor")(**inputs))
torch.save(out, sys.argv[2])
print("RESULT " + json.dumps({"error": ((out - eager).norm() / eager.norm()).item(),
                              "aten": fx_graph_cache.counters, "capture": fx_graph_cache.capture_counters}))
"""


@pytest.mark.sweep   # ~20 s: with the sweeps too (the quick suite stays under 8 minutes on 2 cores)
@pytest.mark.parametrize("name", ["bert-sdpa"])
def test_a_second_process_infers_from_the_capture_level(name, tmp_path):
    """Inference under no_grad: the second process skips AOTAutograd too (the capture level)."""
    if not available(name):
        pytest.skip(f"{name} needs a package that is not installed")
    env = {**os.environ, "MINIINDUCTOR_CACHE_DIR": str(tmp_path / "cache"), "MINIINDUCTOR_FX_GRAPH_CACHE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    results = []
    for run_name in ("cold", "warm"):
        done = subprocess.run([sys.executable, "-c", INFERENCE, name, str(tmp_path / f"{run_name}.pt")], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        results.append(json.loads(line[len("RESULT "):]))
    cold, warm = results
    assert cold["capture"]["miss"] == 1 and warm["capture"]["hit"] == 1 and warm["aten"]["miss"] == 0, results
    assert cold["error"] <= OUTPUT_RTOL and warm["error"] <= OUTPUT_RTOL, results
    assert torch.equal(torch.load(tmp_path / "cold.pt"), torch.load(tmp_path / "warm.pt"))
