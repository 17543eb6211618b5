"""The HTML compile report in a real headless browser (Debian's `chromium` package).

Loads the report of a real compile (a GPT-2 block), takes a screenshot, and checks that
the page's script ran to its end (it adds a marker element last) with nothing logged to
the console: no uncaught exception, no error. Chromium is required, not optional: when
it is missing the test fails and says how to install it.
"""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import torch

import miniinductor
from miniinductor.tools.models import GPT2Block

CHROMIUM_NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def find_chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.fail("no headless browser found: .ci/install should install Debian's `chromium` package "
                "(apt-get install -y chromium fonts-dejavu-core); the report test needs a real browser")


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    profile.mkdir()
    cmd = [find_chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}"
    return result


def console_lines(stderr: str) -> list[str]:
    """Chromium logs each console message (console.error, uncaught exceptions) as CONSOLE."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def png_info(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the decoded pixel rows): no PIL needed."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    with torch.no_grad():
        result = miniinductor.explain(GPT2Block(64, 4, 32), torch.randn(2, 16, 64))
    path = tmp_path_factory.mktemp("report") / "report.html"
    return result.write_report(path, timings={"eager": 1.0, "miniinductor": 0.8})


def test_report_screenshot(report, tmp_path):
    shot = tmp_path / "report.png"
    run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", report.as_uri())
    assert shot.is_file(), "chromium wrote no screenshot"
    width, height, distinct = png_info(shot)
    assert (width, height) == (1400, 2000)
    assert shot.stat().st_size > 30_000 and distinct > 64, "the screenshot looks blank"


def test_report_script_runs_without_console_errors(report, tmp_path):
    result = run_chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", report.as_uri())
    dom = result.stdout
    assert 'id="report-js-ok"' in dom and 'data-js-ready="1"' in dom, "the report's script did not finish"
    for section in ("summary", "timings", "g0-phases", "g0-kernels", "g0-fusion-graph", "g0-decisions",
                    "g0-memory", "g0-passes", "g0-pv"):
        assert f'id="{section}"' in dom, section
    assert "<svg" in dom
    # explain() keeps each pass's before and after: the pass viewer shows the first change
    assert 'data-pv-ready="1"' in dom and "no snapshots" not in dom
    assert re.search(r'class="pv-item changed on"', dom) and 'class="pv-add"' in dom
    assert console_lines(result.stderr) == [], "\n".join(console_lines(result.stderr))


def test_report_links_a_kernel_to_its_origins(report, tmp_path):
    """Opening report.html#pin=g0:<first kernel> pins it: its ATen ops, IR buffers and code light up."""
    kernel0 = re.search(r'id="g0-kernel-((?:cpp|triton)_\w+_0)"', report.read_text()).group(1)
    result = run_chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom",
                          report.as_uri() + f"#pin=g0:{kernel0}")
    dom = result.stdout
    assert console_lines(result.stderr) == []
    for anchor in (f"g0-kernel-{kernel0}", f"g0-code-{kernel0}", "g0-ir-buf0", "g0-aten-add_1"):
        tag = dom[dom.rindex("<", 0, dom.index(f'id="{anchor}"')):dom.index(">", dom.index(f'id="{anchor}"'))]
        assert re.search(r'class="[^"]*\bhl\b', tag), f"{anchor} not highlighted: {tag}"
