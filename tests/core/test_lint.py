"""ruff (pyproject.toml's [tool.ruff]: pycodestyle, pyflakes, import order, bugbear) finds
nothing in the package, the tests, the tutorials, the exercises or the benchmarks."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    result = subprocess.run([*cmd, "check", "--no-cache", "miniinductor", "tests", "tutorials", "exercises",
                             "benchmarks", "docs"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check (fix with `ruff check --fix`):\n{result.stdout}{result.stderr}"


def test_no_test_monkeypatches_torch_modules():
    """torch's config and backend modules (torch._dynamo.config, torch.backends.cuda.matmul)
    answer attributes through __getattr__: pytest 9.2's monkeypatch deletes such an attribute
    on undo, and every later test in that process then fails. Use the config's own
    `patch(...)` context manager, or set and restore in a try/finally."""
    import re
    pattern = re.compile(r"monkeypatch\.setattr\(\s*[\"']?torch\.(_dynamo|_inductor|_functorch|backends)[\w.]*config\b"
                         r"|monkeypatch\.setattr\(\s*[\"']?torch\.backends\.cuda\.matmul\b")
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "tests").rglob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == [], offenders
