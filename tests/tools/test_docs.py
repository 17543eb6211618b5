"""The docs site builds (`mkdocs build --strict`), its generated pages cover the code, and
the Quick start page's code runs.

The build writes into a temporary site folder. The generated pages (docs/hooks.py) must
name every `Config` field (with the docstring under it), every module under
miniinductor/ and every tutorial, so a new option, module or tutorial cannot be left out.
"""
from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_hooks():
    """docs/hooks.py as a module (it needs mkdocs installed)."""
    spec = importlib.util.spec_from_file_location("miniinductor_docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks():
    try:
        return _load_hooks()
    except ImportError as exc:
        pytest.fail(f"{exc.name} is missing: install the dev extra, pip install -e '.[dev]'")


def _env(**extra) -> dict:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", **extra)   # Material's banner about MkDocs 2.0
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"{exc.name} is missing: install the dev extra, pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr[-6000:]}"
    return out


def page(site: Path, name: str) -> str:
    path = site / name / "index.html"
    assert path.is_file(), f"{name} was not built"
    return path.read_text()


def test_hand_written_pages_built(site):
    for name in ("install", "quickstart", "architecture", "debugging", "benchmarks", "what_works"):
        page(site, name)
    assert (site / "index.html").is_file()


def test_config_reference_lists_every_field(site, hooks):
    from miniinductor.config import Config
    text = html.unescape(re.sub(r"<[^>]+>", "", page(site, "reference/config")))
    fields = {name: help_text for name, _, _, help_text in hooks.config_fields()}
    for name in Config.field_help():
        assert fields.get(name), f"option {name} has no help (the reference shows it)"
        assert name in text and fields[name] in text, f"option {name} is missing from the reference"


def test_module_map_lists_every_module(site):
    html = page(site, "reference/modules")
    for path in sorted((ROOT / "miniinductor").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        assert f"<code>{name}</code>" in html, f"{name} is missing from the module map"
    assert "torch/_inductor/scheduler.py" in html


def test_cli_page_and_tutorials(site):
    assert "miniinductor explain --help" in page(site, "reference/cli")
    tutorials = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
    index = page(site, "tutorials")
    for path in tutorials:
        html = page(site, f"tutorials/{path.stem}")
        assert 'class="language-python' in html or "highlight" in html, f"{path.name}: no code blocks"
        assert f"{path.stem}/" in index


def test_tutorial_conversion(tmp_path, hooks):
    script = tmp_path / "01_x.py"
    script.write_text("# %% [markdown]\n# # Title\n#\n# Some *text*, see [next](02_y.py).\n\n"
                      "# %%\nimport torch\n\nx = 1\n\n# %% [markdown]\n# ## Part\n\n# %%\n\n")
    md = hooks.tutorial_markdown(script)
    assert md.startswith("# Title\n")
    assert "Some *text*, see [next](02_y.md)." in md
    assert "```python\nimport torch\n\nx = 1\n```" in md and "## Part" in md
    assert md.count("```python") == 1   # the empty last cell is dropped


def test_quickstart_code_runs(tmp_path):
    text = (ROOT / "docs" / "quickstart.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    assert blocks, "quickstart.md has no python blocks"
    script = tmp_path / "quickstart.py"
    script.write_text("\n\n".join(blocks) + "\nprint('quickstart: all ran')\n")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                            env=_env(MINIINDUCTOR_CACHE_DIR=str(tmp_path / "cache")), timeout=600)
    assert result.returncode == 0, f"quick start failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert "quickstart: all ran" in result.stdout
    assert (tmp_path / "f_report.html").is_file() and (tmp_path / "f_trace").is_dir()


def test_what_works_names_real_tests():
    """Every `tests/<folder>/test_x.py::test_y[case]` that docs/what_works.md cites exists (a row
    that names only a file, such as tests/core/test_distributed.py, is not checked)."""
    text = (ROOT / "docs" / "what_works.md").read_text()
    cited = re.findall(r"`tests/((?:\w+/)*test_\w+\.py)::(\w+)(?:\[(\w+)\])?`", text)
    assert len(cited) >= 10, cited
    for file, test, case in cited:
        source = (ROOT / "tests" / file).read_text()
        assert re.search(rf"^def {test}\(", source, flags=re.M), f"{file} has no {test}"
        assert case == "" or f'"{case}"' in source, f"{file}::{test} has no case {case}"
