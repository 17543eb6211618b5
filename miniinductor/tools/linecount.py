"""`python -m miniinductor lines`: where the code is, folder by folder, against the budget.

The core path (everything outside `triton/`, `ext/` and `tools/`) is what a learner reads
to follow a graph from Dynamo to a kernel; it is held to CORE_BUDGET lines. The Triton
backend, the extensions and the tools are counted apart. Lines are `wc -l` lines of .py files.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the most lines the core path may have
CORE_BUDGET = 7000
#: folders outside the core path (the rest of the package is the core)
OUTSIDE_CORE = ("triton", "ext", "tools")


def part_of(path: Path) -> str:
    """'core', 'triton', 'ext/<name>' or 'tools' for a file of the package."""
    parts = path.relative_to(ROOT).parts
    if parts[0] == "ext" and len(parts) > 2:
        return f"ext/{parts[1]}"
    return parts[0] if parts[0] in OUTSIDE_CORE else "core"


def folder_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return "(root)" if len(parts) == 1 else "/".join(parts[:-1] if parts[0] != "ext" else parts[:2])


def count_lines(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """{part: {folder: lines}} over every .py file under `root`."""
    counts: dict[str, dict[str, int]] = {}
    for path in sorted(root.rglob("*.py")):
        folders = counts.setdefault(part_of(path), {})
        folder = folder_of(path)
        folders[folder] = folders.get(folder, 0) + len(path.read_text().splitlines())
    return counts


def largest(root: Path = ROOT) -> tuple[tuple[int, str], tuple[int, str]]:
    """((lines, file), (lines, function)): the largest file and the longest function."""
    files, functions = [], []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        name = str(path.relative_to(root))
        files.append((len(text.splitlines()), name))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{name}: {node.name}"))
    return max(files), max(functions)


def report(root: Path = ROOT) -> str:
    counts = count_lines(root)
    rows = []
    for part in ["core", "triton", "ext", *sorted(p for p in counts if p.startswith("ext/")), "tools"]:
        if part not in counts:
            continue
        total = sum(counts[part].values())
        budget = f" (budget {CORE_BUDGET})" if part == "core" else ""
        rows.append(f"{part:22s} {total:6d}{budget}")
        if len(counts[part]) > 1:
            rows += [f"  {folder:20s} {n:6d}" for folder, n in counts[part].items()]
    (file_n, file_name), (fn_n, fn_name) = largest(root)
    rows.append(f"largest file: {file_name} ({file_n} lines); longest function: {fn_name} ({fn_n} lines)")
    return "\n".join(rows)


def add_arguments(parser):
    pass


def main(args=None) -> int:
    print(report())
    return 0
