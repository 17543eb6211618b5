"""What a new user reads before the first run says true things (issue 16).

README.md, docs/install.md and .ci/install agree about graphviz and chromium, and the test
counts they quote match the tests that need them; .ci/install installs numpy with torch
and imports torch only after `pip install -e .[dev]` (bar one silenced check); every
hand-written docs page is in the site's nav; an OpInfo pass rate is printed with the
number of samples that did not run beside it; the pytest configuration silences the known
third-party warnings and none of ours. No compiling here.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TEXTS = ["README.md", "docs/install.md", ".ci/install"]


def _flat(text: str) -> str:
    """One line, comment marks, backticks and runs of spaces gone."""
    return " ".join(" ".join(re.sub(r"^\s*#", "", line) for line in text.splitlines()).replace("`", "").split())


def test_install_texts_agree_on_graphviz_and_chromium():
    """Each text says both are needed by the tests (not optional) and names the tests,
    with the numbers of tests the test files really have."""
    debug = (ROOT / "tests/tools/test_debug.py").read_text()
    browser = (ROOT / "tests/tools/test_report_browser.py").read_text()
    need_dot = debug.count("    require_dot()")
    assert need_dot and "pytest.fail(" in debug.split("def require_dot")[1].split("\ndef ")[0]
    need_chromium = len(re.findall(r"^def test_\w+\(report, tmp_path\)", browser, flags=re.M))
    assert need_chromium and "pytest.fail(" in browser.split("def find_chromium")[1].split("\ndef ")[0]
    for name in INSTALL_TEXTS:
        text = _flat((ROOT / name).read_text())
        for words in ("graphviz", "chromium", f"{need_dot} tests in tests/tools/test_debug.py",
                      f"{need_chromium} tests in tests/tools/test_report_browser.py"):
            assert words in text, f"{name} does not say {words!r}"
        for sentence in re.split(r"(?<=[.:;])\s", text):
            if re.search(r"graphviz|chromium", sentence, flags=re.I):
                assert "optional" not in sentence.lower(), f"{name} calls them optional: {sentence!r}"


def test_ci_install_installs_numpy_with_torch_and_imports_torch_late():
    lines = [line.strip() for line in (ROOT / ".ci/install").read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    editable = next(i for i, line in enumerate(lines) if "pip install" in line and '-e ".[dev]"' in line)
    torch_install = [line for line in lines if re.search(r"pip install .*torch==", line)]
    assert torch_install and all("numpy" in line for line in torch_install), torch_install
    for line in lines[:editable]:
        if "import torch" in line:   # only the guarded check, its output silenced
            assert line.startswith('if ! "$PY" -c') and ">/dev/null 2>&1" in line, line


def test_every_docs_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    in_nav = set(re.findall(r"[\w/.-]+\.md", str(config["nav"])))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - in_nav == set(), f"docs pages missing from mkdocs.yml's nav: {sorted(pages - in_nav)}"


def test_pass_rate_says_how_many_samples_did_not_run():
    from opinfo_common import format_summary, run_round_robin, summarize

    class Op:
        def __init__(self, name):
            self.name, self.variant_test_name = name, ""

    ops, samples = [Op("a"), Op("b")], {"a": [1, 2, 3], "b": [1]}
    results, elapsed, not_run = run_round_robin(ops, samples, lambda op, s: {"status": "pass", "native": True},
                                                budget_s=-1, samples_per_op=3)   # out of time at once
    assert not_run == 4 and not any(results.values())
    results, elapsed, not_run = run_round_robin(ops, samples, lambda op, s: {"status": "pass", "native": True},
                                                budget_s=60, samples_per_op=2)
    assert not_run == 0 and sum(map(len, results.values())) == 3
    text = format_summary(summarize({"a": [{"status": "pass", "native": True, "sample": 0}]}, {}, 1.0, 3, 1.0, 2))
    assert re.search(r"pass rate 100\.0% \(1/1 samples; 3 not run", text), text


def test_known_third_party_warnings_are_filtered_and_ours_are_not():
    """pyproject's filterwarnings (active in this test) drop the known third-party warnings
    by message and module; the same messages from a miniinductor module still show."""
    third_party = [("divide by zero encountered in divide", RuntimeWarning, "triton.runtime.interpreter"),
                   ("invalid value encountered in fmod", RuntimeWarning, "triton.runtime.interpreter"),
                   ("`torch.jit.script_method` is deprecated. Please switch", DeprecationWarning, "torch.jit._script"),
                   ("torch.cholesky is deprecated in favor of torch.linalg.cholesky", UserWarning, "test_common")]
    # the same messages from our modules (bar torch.cholesky's, torch's wherever it is raised)
    ours = [(message, category, "miniinductor.codegen.cpp") for message, category, _ in third_party[:3]] + [
        ("miniinductor runs this forward graph eagerly", UserWarning, "miniinductor.compile_fx")]
    with warnings.catch_warnings(record=True) as seen:
        for message, category, module in third_party + ours:
            warnings.warn_explicit(message, category, f"{module}.py", 1, module=module, registry={})
    assert [str(w.message) for w in seen] == [message for message, _, _ in ours]
