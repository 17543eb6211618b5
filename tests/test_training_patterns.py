"""The training patterns people write, each compiled and compared with eager PyTorch.

Each case lives in tests/training_patterns_cases.py and runs in a process of its own
(`python tests/training_patterns_cases.py CASE`), so that a segfault -- as `loss.backward()`
inside a compiled function once caused -- fails that one case, not the suite. A case
compares losses, every parameter's gradient and the parameters after a few optimizer steps
(and optimizer state, BatchNorm buffers, mutated inputs and aliasing where they apply) with
eager, raising on the first difference beyond its tolerance (the tolerances are justified in
that file's docstring); it prints `RESULT {json}` with what it compared and the largest
differences. The selected cases start two at a time (the imports alone cost seconds each).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import USING_MINIINDUCTOR

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNNER = HERE / "training_patterns_cases.py"

# case → extra environment
CASES = {
    "backward_inside_cpp": {},
    "backward_inside_triton": {"TRITON_INTERPRET": "1"},
    "backward_inside_dynamic": {},
    "optimizer_sgd_momentum": {},
    "optimizer_adam_foreach": {},
    "optimizer_adamw": {},
    "foreach_ops": {},
    "checkpointing": {},
    "compiled_autograd": {},
    "gradient_accumulation": {},
    "batchnorm_train_eval": {},
    "input_mutation_and_views": {},
    "inference_mode": {},
}

pytestmark = pytest.mark.skipif(not USING_MINIINDUCTOR, reason="the cases compile with miniinductor")


def run_case(name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **CASES[name])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, str(RUNNER), name], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def results(request):
    """name → CompletedProcess, for the cases selected in this session."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_case, name) for name in selected}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("name", CASES)
def test_training_pattern(results, name):
    result = results[name]
    detail = f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-6000:]}"
    assert result.returncode == 0, detail
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
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
