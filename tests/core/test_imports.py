"""The package's import graph: no cycles, and each phase imports only the phases below it.

Built with `ast` from every `miniinductor/**/*.py`: module-level *and* function-level
imports of the package (`from . import x`, `from ..ir.nodes import y`, `import
miniinductor.z`), so that a lazy import hidden in a function counts as much as one at the
top. The order is docs/architecture.md's: capture → lowering → ir → scheduler → codegen →
runtime, with compile_fx.py driving them and tools/ (debug/, the CLI, demo, zoo, ...) on top of everything.
The Triton backend (triton/) and the extensions (ext/) import the core; the core imports neither.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2] / "miniinductor"

#: phase folders, in the order data flows: each may import only folders after it
PHASES = ["capture", "lowering", "ir", "scheduler", "codegen", "runtime"]
#: low-level modules every phase may import
BASE = {"config", "passes", "metrics", "logs", "virtualized", "ops_handler"}
#: ir/ is the vocabulary every phase speaks (so every phase may import it); it imports
#: nothing outward but these
IR_MAY_IMPORT = {"virtualized", "ops_handler"}

#: cycles that are known and owned elsewhere; each is to be removed, not to grow
KNOWN_CYCLES: list[set[str]] = []   # none left (triton/tiling.py broke the last)
#: imports against the phase order, on purpose, with the reason
ALLOWED = {
    ("codegen.wrapper", "scheduler"): "the wrapper walks the schedule: it tells kernels (FusedGroup) from extern calls",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)   # "" is the package itself


def _exists(name: str) -> bool:
    base = ROOT.joinpath(*name.split(".")) if name else ROOT
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _with_parents(name: str, me: str) -> list[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first -- unless `me` is inside that
    package (it is already being imported), and never the root package (loaded first)."""
    parts = name.split(".") if name else []
    names = [".".join(parts[:k]) for k in range(1, len(parts) + 1)]
    return [n for n in names if _exists(n) and (n == name or not me.startswith(n + "."))]


def imports_of(path: Path) -> set[str]:
    """Every module of the package that `path` imports, anywhere in the file."""
    me = module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    package = [p for p in package if p]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            elif node.module and node.module.split(".")[0] == "miniinductor":
                target = ".".join(node.module.split(".")[1:])
            else:
                continue
            for alias in node.names:   # `from . import x`: x may be a module
                sub = f"{target}.{alias.name}" if target else alias.name
                found.update(_with_parents(sub if _exists(sub) else target, me) or [target])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "miniinductor":
                    found.update(_with_parents(".".join(alias.name.split(".")[1:]), me))
    found.discard(me)
    return found


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in sorted(ROOT.rglob("*.py")):
        me = module_name(path)
        graph.add_node(me)
        graph.add_edges_from((me, target) for target in imports_of(path))
    return graph


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert ("codegen.wrapper", "codegen.memory_planning") in graph.edges       # from .x import
    assert ("lowering.graph", "ir.nodes") in graph.edges                       # from ..x.y import
    assert ("compile_fx", "lowering") in graph.edges                           # a package
    assert len(graph) > 40


def test_no_import_cycles():
    graph = import_graph()
    cycles = [set(c) for c in nx.simple_cycles(graph)]
    unknown = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not unknown, f"import cycles: {unknown}"


def _rank(module: str):
    head = module.split(".")[0]
    if head in PHASES and "." in module:
        return PHASES.index(head)
    return None


def test_each_phase_imports_only_the_phases_below_it():
    bad = []
    for a, b in import_graph().edges:
        head_a, head_b = a.split(".")[0], b.split(".")[0]
        if _rank(a) is None or head_a == head_b or (a, b) in ALLOWED or head_b == "triton":
            continue   # (an import of triton/: test_the_core_never_imports_the_triton_backend)
        if head_a == "ir":
            ok = b in IR_MAY_IMPORT
        else:
            ok = b in BASE or head_b == "ir" or (head_b in PHASES and PHASES.index(head_b) > PHASES.index(head_a))
        if not ok:
            bad.append(f"{a} → {b}")
    assert not bad, "imports against the phase order:\n" + "\n".join(sorted(bad))


def test_only_tools_and_the_package_import_tools():
    """tools/ (debug/, the CLI, demo, tour, exercises, zoo, models, real_models) sits above
    the compiler: the core never imports it; the package's __init__ re-exports a few of its
    names and wires the trace writer in, and __main__ is the CLI's shim."""
    graph = import_graph()
    bad = [f"{a} → {b}" for a, b in graph.edges
           if b.split(".")[0] == "tools" and a.split(".")[0] not in ("tools", "", "__main__")]
    assert not bad, bad


def test_the_core_never_imports_an_extension():
    """ext/ registers itself into passes.py's tables; only the package root imports it."""
    bad = [f"{a} → {b}" for a, b in import_graph().edges
           if b.split(".")[0] == "ext" and a.split(".")[0] != "ext" and a != ""]
    assert not bad, bad


def test_an_extension_imports_no_other_extension():
    """ext/<name> imports the core alone, so that each extension can be left out by itself."""
    bad = [f"{a} → {b}" for a, b in import_graph().edges
           if a.startswith("ext.") and b.startswith("ext.") and a.split(".")[1] != b.split(".")[1]]
    assert not bad, bad


def _core(module: str) -> bool:
    """The core: every module but the package root (the composition root, which imports
    everything), the CLI shim, triton/, ext/ and tools/."""
    return module not in ("", "__main__") and module.split(".")[0] not in ("triton", "ext", "tools")


def test_the_core_never_imports_the_triton_backend():
    """triton/ registers itself into passes.py's tables (triton/backend.py, imported by the
    package root); the core only reads the tables."""
    bad = [f"{a} → {b}" for a, b in import_graph().edges
           if b.split(".")[0] == "triton" and _core(a)]
    assert not bad, bad


def test_the_triton_backend_imports_neither_ext_nor_tools():
    bad = [f"{a} → {b}" for a, b in import_graph().edges
           if a.split(".")[0] == "triton" and b.split(".")[0] in ("ext", "tools")]
    assert not bad, bad
