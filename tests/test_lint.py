"""ruff (pyproject.toml's [tool.ruff]: pycodestyle, pyflakes, import order, bugbear) finds
nothing in the package, the tests, the tutorials, the exercises or the benchmarks."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    result = subprocess.run([*cmd, "check", "--no-cache", "miniinductor", "tests", "tutorials", "exercises",
                             "benchmarks", "docs"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check (fix with `ruff check --fix`):\n{result.stdout}{result.stderr}"
