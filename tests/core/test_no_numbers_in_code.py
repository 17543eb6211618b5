"""No measured timing or speed figure in the package's docstrings and comments.

A figure in a comment ("80 -> 19 us", "1.2 ms", "0.7x", "3% faster") is true of one machine on
one day and silently goes stale; the comment says why ("faster than X at these sizes") and the
figure goes to docs/benchmarks.md (current) or a dated page of docs/journal/ (historical).
Every docstring (module, class, function, and attribute docstrings: any string expression
statement) and every comment of miniinductor/**/*.py is matched against FIGURE; a hit fails
unless ALLOWED names it. ALLOWED holds arithmetic facts and definitions, which stay, and, marked
TODO(issue 35), figures in files other work is rewriting now (to move once those settle).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "miniinductor"

#: a time (ms, us, µs, ns, s), a ratio (0.7x), a before -> after pair, a percentage (76%; not
#: C's or Python's `%` operator, which has a space before it), a rate
FIGURE = re.compile(r"\d+(\.\d+)? ?(ms|us|µs|ns|s)\b|\d+(\.\d+)?x\b|\d+(\.\d+)? ?(->|→) ?\d+"
                    r"|\d+(\.\d+)?%|GB/s|TFLOP")

#: (file path suffix, substring of the hit's line): hits that are not measurements
ALLOWED = [
    ("cpu_fast/loops.py", "30 x 30 -> 900"),                  # H and W merged: 30 * 30 = 900
    ("cpu_conv/onednn.py", "enough for ~2 ms"),                  # ROUND_S = 2e-3 s, its definition
    ("lowering/reductions.py", "20x less"),                      # an accuracy, not a speed
    ("cpu_conv/winograd.py", "2.25x fewer multiplies"),          # 36 / 16 multiply-adds a tile
    ("cpu_conv/winograd_kernel.py", "(2.25x fewer)"),            # the same
    ("scheduler/scheduler.py", "Sizes without the 1s"),          # the size-1 dims
    ("zoo/__init__.py", "floored at 1% of the step's largest gradient"),  # a tolerance
]


def texts(source: str):
    """(line, text) of every docstring line and every comment of a module's source."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for k, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + k, line
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def figures(path: Path, source: str) -> list[tuple[str, int, str]]:
    """(path, line, text) of each docstring line or comment of `source` with a FIGURE in it."""
    rel = path.relative_to(ROOT).as_posix() if path.is_absolute() else path.as_posix()
    return [(rel, line, text.strip()) for line, text in texts(source) if FIGURE.search(text)]


def allowed_by(rel: str, text: str) -> list[tuple[str, str]]:
    return [(suffix, part) for suffix, part in ALLOWED
            if (rel == suffix or rel.endswith("/" + suffix)) and part in text]


def package_figures() -> list[tuple[str, int, str]]:
    return [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in figures(path, path.read_text())]


def test_no_measured_figures_in_docstrings_or_comments():
    hits = [f"{rel}:{line}: {text}" for rel, line, text in package_figures() if not allowed_by(rel, text)]
    assert hits == [], ("measured figures in docstrings or comments (say why in words; move the figure to "
                        "docs/benchmarks.md or a docs/journal/ page; or, for an arithmetic fact, add it to "
                        "ALLOWED):\n" + "\n".join(hits))


def test_every_allowed_entry_is_still_used():
    """An ALLOWED entry that matches nothing any more is removed, so that the list only shrinks."""
    used = {entry for rel, _, text in package_figures() for entry in allowed_by(rel, text)}
    assert [entry for entry in ALLOWED if entry not in used] == []


def test_the_scan_reads_docstrings_and_comments():
    source = ('"""Module: 80 -> 19 us."""\n'
              "x = 1   # 3 ms faster\n"
              "y = 2\n"
              '"""Attribute docstring: 0.7x eager."""\n'
              "def f():\n"
              '    """12% of the bandwidth, 40 GB/s."""\n'
              "    return 'not a docstring: 5 ms'\n")
    assert [line for _, line, _ in figures(Path("miniinductor/example.py"), source)] == [1, 4, 6, 2]
