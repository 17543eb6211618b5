"""Graded exercises: swap a learner's function into the real compiler and check it.

``python -m miniinductor exercise list | run N [--solution] | check-all``

Each `exercises/NN_name.py` at the top of the repository names the function it replaces
as one dotted path (``TARGET = "miniinductor.scheduler.fusion.shared_bytes"``) and defines
a stub of it with the same name; `exercises/solutions/NN_name.py` holds a reference
answer; `exercises/checks.py` holds one check per exercise (named like the file without
its number), which compiles real functions with miniinductor and raises `Failure` with a
plain-words explanation when something is off. `run` puts the learner's function where
the real one lives (`swap`: the attribute, every `from ... import` copy of it inside
miniinductor, and its entries in the lowering table), runs the check, and always puts the
original back. `check-all` verifies that every reference passes and every stub fails.

Real Inductor has no exercises; this is the teaching layer over its twins, each named in
its exercise's docstring.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "exercises"


class Failure(Exception):
    """A check's verdict, in words: what the learner's function did and what was expected."""


# --------------------------------------------------------------------------- finding and swapping
def exercise_files() -> list[Path]:
    return sorted(p for p in ROOT.glob("[0-9][0-9]_*.py"))


def find(number: str) -> Path:
    if not ROOT.is_dir():
        raise Failure(f"no exercises folder at {ROOT}: the exercises come with a clone of the repository")
    for path in exercise_files():
        if path.name.startswith(f"{int(number):02d}_"):
            return path
    raise Failure(f"no exercise {number}: `python -m miniinductor exercise list` shows them")


def load(path: Path):
    """Import a file fresh (a learner's edits are picked up every run)."""
    spec = importlib.util.spec_from_file_location(f"miniinductor_exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resolve(target: str):
    """'pkg.module.Class.attr' → (owner object, attribute name)."""
    parts = target.split(".")
    for k in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for name in parts[k:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1]
    raise ValueError(f"cannot import any module of {target!r}")


@contextlib.contextmanager
def swap(target: str, replacement):
    """Put `replacement` where `target` lives, and wherever miniinductor holds the same
    function under another reference (a `from x import f` copy, a lowering-table entry);
    restore every one of them on the way out, whatever happens inside."""
    from miniinductor.lowering.registry import lowerings
    owner, name = resolve(target)
    raw = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name)
    original = getattr(owner, name)
    new = staticmethod(replacement) if isinstance(raw, staticmethod) else replacement
    undo = [(owner, name, raw)]
    setattr(owner, name, new)
    for module in [m for k, m in sys.modules.items() if k.startswith("miniinductor.") and m is not None]:
        for attr, value in list(vars(module).items()):
            if value is original and module is not owner:
                undo.append((module, attr, value))
                setattr(module, attr, replacement)
    table = [op for op, fn in lowerings.items() if fn is original]
    lowerings.update(dict.fromkeys(table, replacement))
    _reset()
    try:
        yield
    finally:
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)
        lowerings.update(dict.fromkeys(table, original))
        _reset()


def _reset():
    """Forget what was compiled or cached with the other function in place."""
    import torch._dynamo

    from miniinductor.capture.decompositions import decomposition_table
    decomposition_table.cache_clear()
    torch._dynamo.reset()


# --------------------------------------------------------------------------- helpers for checks
def compile_and_run(fn, *inputs, on_compiled=None, **options):
    """fn(*inputs) compiled with miniinductor (inference): (outputs, compiled graphs)."""
    import torch
    import torch._dynamo

    import miniinductor
    from miniinductor.compile_fx import collect_compiled
    torch._dynamo.reset()
    with torch.no_grad(), collect_compiled(on_compiled) as graphs:
        try:
            out = miniinductor.compile(fn, **options)(*inputs)
        except Failure:
            raise
        except Exception as exc:  # Dynamo wraps what the compiler raised
            inner = getattr(exc, "inner_exception", None)
            raise (inner if inner is not None else exc) from None
    return out, graphs


def externs(graphs) -> list:
    """The ExternKernel calls (ATen fallbacks and library calls) of compiled graphs."""
    from miniinductor.ir.nodes import ExternKernel
    return [b for g in graphs for b in g.graph.buffers if isinstance(b, ExternKernel)]


def expect_close(what: str, got, expected, rtol=1e-4, atol=1e-5):
    import torch
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise Failure(f"{what}: got shape {list(got.shape)} {got.dtype}, eager gives "
                      f"{list(expected.shape)} {expected.dtype}")
    if not torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True):
        bad = ~torch.isclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
        where = [int(i) for i in bad.nonzero()[0]]
        raise Failure(f"{what}: wrong values at {bad.sum().item()} of {got.numel()} elements; "
                      f"first at index {where}: got {got[tuple(where)].item():.6g}, eager gives "
                      f"{expected[tuple(where)].item():.6g}")


# --------------------------------------------------------------------------- running
def run(number: str, solution: bool = False, quiet: bool = False) -> bool:
    """Run exercise `number` with the learner's stub (or the reference solution)."""
    path = find(number)
    source = ROOT / "solutions" / path.name if solution else path
    checks = load(ROOT / "checks.py")
    check = getattr(checks, path.stem[3:])
    say = (lambda *a: None) if quiet else print
    shown = source.relative_to(ROOT.parent)
    started = time.perf_counter()
    try:
        exercise = load(source)
        name = exercise.TARGET.rpartition(".")[2]
        replacement = getattr(exercise, name)
    except Exception as exc:
        say(f"FAIL  {path.stem}: {shown} does not load (it must define TARGET and a function named like "
            f"TARGET's last part): {type(exc).__name__}: {exc}")
        return False
    log = logging.getLogger("miniinductor")
    level = log.level
    if quiet:   # check-all: no "falling back to ATen" warnings from the stubs
        log.setLevel(logging.ERROR)
    try:
        with swap(exercise.TARGET, replacement):
            check()
    except Failure as exc:
        say(f"FAIL  {path.stem}  ({shown} as {exercise.TARGET})\n  {exc}"
            + ("" if solution else f"\n  (the docstring of {shown} gives the rules and a worked example)"))
        return False
    except Exception as exc:
        say(f"FAIL  {path.stem}: {_explain_crash(exc, source)}")
        return False
    finally:
        log.setLevel(level)
    say(f"PASS  {path.stem}  ({shown} as {exercise.TARGET}, {time.perf_counter() - started:.1f} s)")
    return True


def _explain_crash(exc: BaseException, source: Path) -> str:
    """An exception that no check anticipated: say in words where it came from."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == source.resolve()]
    kind = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if isinstance(exc, NotImplementedError):
        return f"your function is still the stub: it raised {kind}"
    if frames:
        f = frames[-1]
        return f"your function raised {kind}\n  at {source.name} line {f.lineno}: {f.line}"
    return (f"the compiler failed with {kind} while using your function (it returned something the "
            f"rest of the compiler cannot use; see the docstring for what it must return)\n"
            + "".join(traceback.format_exception(exc)[-6:]))


def in_child(job) -> int:
    """Run `job` in a forked process (where fork exists): a wrong rule can make a compiled
    kernel write outside its buffers, and the crash should be explained, not inherited."""
    if not hasattr(os, "fork"):
        return 0 if job() else 1
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if job() else 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        print(f"FAIL: the process crashed (signal {os.WTERMSIG(status)}) while running the compiled code: "
              "a kernel read or wrote outside its buffers. With your function in place the compiler "
              "produced loops or buffers that do not fit the data; compare with the docstring's rules.")
        return 1
    return os.WEXITSTATUS(status)


def check_all() -> bool:
    """Every reference solution passes, every stub fails."""
    ok = True
    for path in exercise_files():
        number = path.name[:2]
        good = run(number, solution=True, quiet=True)
        bad = not run(number, solution=False, quiet=True)
        print(f"{path.stem:32s} solution {'passes' if good else 'FAILS'}; stub {'fails' if bad else 'PASSES'}")
        if not good:
            run(number, solution=True)   # again, saying why
        if not bad:
            print("  the stub passes the checks: they do not test what the exercise teaches")
        ok &= good and bad
    print("check-all:", "ok" if ok else "PROBLEMS (see above)")
    return ok


def list_exercises() -> None:
    for path in exercise_files():
        module = load(path)
        title = (module.__doc__ or "").strip().splitlines()[0]
        print(f"{path.name[:2]}  {title}\n    replaces {module.TARGET}")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="list the exercises and the function each replaces")
    run_parser = sub.add_parser("run", help="swap exercises/NN_*.py into the compiler and check it")
    run_parser.add_argument("number", metavar="N")
    run_parser.add_argument("--solution", action="store_true", help="run the reference solution instead")
    sub.add_parser("check-all", help="every reference solution passes and every stub fails")


def main(args) -> int:
    if args.action == "list":
        list_exercises()
        return 0
    if args.action == "run":
        try:
            find(args.number)
        except Failure as exc:
            print(exc, file=sys.stderr)
            return 2
        return in_child(lambda: run(args.number, args.solution))
    return 0 if check_all() else 1
