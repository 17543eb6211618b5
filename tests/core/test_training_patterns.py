"""The training patterns people write, each compiled and compared with eager PyTorch.

Each case lives in tests/training_patterns_cases.py and runs in a process of its own, forked
from one runner process that paid for the imports once (`python tests/training_patterns_cases.py
OUT_DIR CASE...`), so that a segfault -- as `loss.backward()` inside a compiled function once
caused -- fails that one case, not the others or the suite. A case compares losses, every
parameter's gradient and the parameters after a few optimizer steps (and optimizer state,
BatchNorm buffers, mutated inputs and aliasing where they apply) with eager, raising on the
first difference beyond its tolerance (the tolerances are justified in that file's
docstring); its log ends with `RESULT {json}`: what it compared and the largest differences.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import USING_MINIINDUCTOR

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNNER = ROOT / "tests" / "training_patterns_cases.py"

CASES = [
    "backward_inside_cpp", "backward_inside_triton", "backward_inside_dynamic",
    "optimizer_sgd_momentum", "optimizer_adam_foreach", "optimizer_adamw", "foreach_ops",
    "checkpointing", "compiled_autograd", "gradient_accumulation", "batchnorm_train_eval",
    "input_mutation_and_views", "inference_mode",
]

pytestmark = pytest.mark.skipif(not USING_MINIINDUCTOR, reason="the cases compile with miniinductor")


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """name → (exit status or None, log), for the cases selected in this session."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    out = tmp_path_factory.mktemp("patterns")
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")] + [p for p in [env.get("PYTHONPATH")] if p])
    runner = subprocess.run([sys.executable, str(RUNNER), str(out), *selected], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=540)   # under pytest-timeout's 600
    found = {}
    for name in selected:
        exit_file, log = out / f"{name}.exit", out / f"{name}.log"
        found[name] = (int(exit_file.read_text()) if exit_file.exists() else None,
                       log.read_text() if log.exists() else "")
    return found, runner


@pytest.mark.parametrize("name", CASES)
def test_training_pattern(results, name):
    (status, log), runner = results[0][name], results[1]
    detail = (f"exit {status}\n--- log\n{log[-6000:]}\n--- runner (exit {runner.returncode})\n"
              f"{runner.stdout[-2000:]}{runner.stderr[-2000:]}")
    assert status == 0, detail
    lines = [line for line in log.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, detail
    summary = json.loads(lines[0].removeprefix("RESULT "))
    assert summary["compared"] > 0 and summary["graphs"] > 0, summary
    print(name, summary)


def test_every_case_is_listed():
    """The runner's cases and this module's list are the same set."""
    source = RUNNER.read_text()
    defined = {line.split("(")[0].removeprefix("def case_") for line in source.splitlines()
               if line.startswith("def case_")}
    assert defined == set(CASES)
