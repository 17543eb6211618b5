"""No function over FUNCTION_MAX lines and no file over FILE_MAX lines in miniinductor/**.

A function's length is `end_lineno - lineno + 1` of its `def` (ast; nested functions counted
on their own too, and inside the function that holds them); a file's, its number of lines.
The allow-lists name what was over the limit when this test was written: they may only
shrink (an entry that is no longer over its limit fails `test_allow_lists_only_shrink`).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "miniinductor"
FUNCTION_MAX = 60
FILE_MAX = 500

#: (file path suffix, function name) allowed over FUNCTION_MAX for now
LONG_FUNCTIONS: list[tuple[str, str]] = []
#: file path suffixes allowed over FILE_MAX for now
LONG_FILES = [
]


def _matches(rel: str, suffix: str) -> bool:
    return rel == suffix or rel.endswith("/" + suffix)


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text()


def long_functions() -> list[tuple[str, str, int, int]]:
    """(file, function, line, length) of every function over FUNCTION_MAX lines."""
    found = []
    for rel, source in _sources():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_MAX:
                    found.append((rel, node.name, node.lineno, length))
    return found


def long_files() -> list[tuple[str, int]]:
    """(file, lines) of every file over FILE_MAX lines."""
    return [(rel, len(source.splitlines())) for rel, source in _sources() if len(source.splitlines()) > FILE_MAX]


def test_no_function_over_the_limit():
    over = [f"{rel}:{line}: {name} is {length} lines" for rel, name, line, length in long_functions()
            if not any(_matches(rel, suffix) and name == allowed for suffix, allowed in LONG_FUNCTIONS)]
    assert over == [], f"functions over {FUNCTION_MAX} lines (split them into named helpers):\n" + "\n".join(over)


def test_no_file_over_the_limit():
    over = [f"{rel}: {lines} lines" for rel, lines in long_files()
            if not any(_matches(rel, suffix) for suffix in LONG_FILES)]
    assert over == [], f"files over {FILE_MAX} lines (split them into modules):\n" + "\n".join(over)


def test_allow_lists_only_shrink():
    functions = {(rel, name) for rel, name, _, _ in long_functions()}
    files = {rel for rel, _ in long_files()}
    stale = [entry for entry in LONG_FUNCTIONS if not any(_matches(rel, entry[0]) and name == entry[1]
                                                         for rel, name in functions)]
    stale += [suffix for suffix in LONG_FILES if not any(_matches(rel, suffix) for rel in files)]
    assert stale == [], f"no longer over the limit, remove from the allow-list: {stale}"


def test_the_core_path_is_within_its_budget():
    """The core path (everything outside triton/, ext/ and tools/) is what a learner reads: at
    most CORE_BUDGET lines (`python -m miniinductor lines`)."""
    from miniinductor.tools.linecount import CORE_BUDGET, count_lines
    core = sum(count_lines()["core"].values())
    assert core <= CORE_BUDGET, f"the core path is {core} lines, over its budget of {CORE_BUDGET}"
