"""Every tutorial in tutorials/ runs to completion as a script.

Each tutorial asserts its own results against eager PyTorch, so exit code 0 means the
whole walk-through still works. Each runs in a fresh subprocess (no Dynamo caches or
metrics shared with the test process) with its own empty kernel cache, so the
tutorial pays for -- and exercises -- a cold build. They run two at a time.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
TIMEOUT_S = 300   # each tutorial aims for well under 60 s on 2 CPU cores


def run_script(path: Path, cache_dir: Path, timeout=TIMEOUT_S) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["MINIINDUCTOR_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def tail(text: str, n: int = 80) -> str:
    return "\n".join(text.splitlines()[-n:])


def test_tutorials_exist():
    assert len(TUTORIALS) >= 6, f"expected six tutorials, found {[p.name for p in TUTORIALS]}"


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_structure(path):
    """Percent format: markdown cells, code cells, and the 'you will learn' opening."""
    text = path.read_text()
    assert text.startswith("# %% [markdown]"), "a tutorial opens with a markdown cell"
    assert "In this tutorial you will learn" in text
    assert len(re.findall(r"^# %%$", text, flags=re.M)) >= 3, "too few code cells"
    assert "torch.testing.assert_close" in text, "a tutorial checks its results against eager"


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """The selected tutorials, two at a time (each keeps about one core busy): path → future of
    (result or TimeoutExpired, seconds)."""
    def timed(path):
        start = time.perf_counter()
        try:
            result = run_script(path, tmp_path_factory.mktemp(path.stem) / "cache")
        except subprocess.TimeoutExpired as exc:
            result = exc
        return result, time.perf_counter() - start
    selected = [item.callspec.params["path"] for item in request.session.items
                if item.module is request.module and item.originalname == "test_tutorial_runs"]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    try:
        yield {path: pool.submit(timed, path) for path in selected}
    finally:
        pool.shutdown(cancel_futures=True)   # after a failure (-x), start no more of them


#: the slowest tutorial (~26 s: the accuracy debugger runs every graph twice, interpreted and
#: compiled) runs with the sweeps, which CI runs after the quick suite
SWEEP_TUTORIALS = {"11_accuracy_debugger"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.sweep) if p.stem in SWEEP_TUTORIALS else p
                                  for p in TUTORIALS], ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(path, runs):
    result, elapsed = runs[path].result()
    if isinstance(result, subprocess.TimeoutExpired):
        out = (result.stdout or b"").decode() if isinstance(result.stdout, bytes) else (result.stdout or "")
        pytest.fail(f"{path.name} did not finish in {TIMEOUT_S} s; last output:\n{tail(out)}")
    output = result.stdout + ("\n--- stderr ---\n" + result.stderr if result.stderr else "")
    assert result.returncode == 0, (
        f"{path.name} exited with {result.returncode} after {elapsed:.1f} s; "
        f"last lines of its output:\n{tail(output)}")
    done = f"tutorial {int(path.name[:2])} done"
    assert done in result.stdout, f"{path.name} did not reach its end ({done!r} not printed)"
