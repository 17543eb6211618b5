"""`debug_accuracy`'s decomposition level: is the ATen graph already wrong before we compile it?

Every buffer check in accuracy.py compares a compiled buffer with its reference computed
from the *decomposed* ATen graph, so a wrong decomposition (a decomposition-table entry
that computes something else than the op it replaces) passes every one of them. This level
compiles the function again through the same capture (AOTAutograd with our decomposition
table, the joint-graph passes, the partitioner; capture/aot.py) but hands each ATen graph,
forward and backward, to a "compiler" that runs it eagerly (`eager_graphs`), and compares
outputs and gradients with eager. If they already differ, a decomposition (or capture) is
wrong. Which decomposition: the ones that really ran while tracing are recorded, and
bisection over them (each rerun with a subset removed from the table: those ops then stay
in the graph as themselves) finds the one whose removal makes the results agree, in at
most 1 + 2 * log2(n) reruns. No Inductor twin: its accuracy minifier
(`torch/_dynamo/repro/after_aot.py`) shrinks the graph after decomposition instead.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from unittest import mock

from torch._functorch.aot_autograd import make_boxed_func

from .. import compile_fx
from ..capture import aot

#: at most this many reruns while bisecting (each traces the function again)
MAX_RERUNS = 16


@contextlib.contextmanager
def eager_graphs(without=(), seen: list | None = None):
    """Inside: `miniinductor.compile` captures as always but runs each ATen graph eagerly,
    with the decomposition table in force (a planted bug's included) minus the ops in
    `without`; every decomposition that runs while tracing is appended once to `seen`."""
    real_table = aot.decomposition_table

    def table(**kwargs):
        return {op: _recorded(op, d, seen) for op, d in real_table(**kwargs).items() if op not in without}

    def run_eagerly(gm, example_inputs, config=None, name="graph", dynamo_gm=None):
        return make_boxed_func(gm.forward)
    with mock.patch.object(aot, "decomposition_table", table), \
            mock.patch.object(compile_fx, "compile_fx_inner", run_eagerly):
        yield


def _recorded(op, decomposition, seen):
    if seen is None:
        return decomposition

    @functools.wraps(decomposition)
    def decompose(*args, **kwargs):
        if op not in seen:
            seen.append(op)
        return decomposition(*args, **kwargs)
    return decompose


@dataclasses.dataclass
class DecompositionCheck:
    """The decomposed graphs run eagerly against eager: their error, the decompositions that
    ran, and the ones whose removal makes the results agree (None: not searched or none)."""

    agrees: bool
    error: float
    outputs_error: float          # over the outputs only (the rest is gradients)
    decomposed: list = dataclasses.field(default_factory=list)
    culprits: list | None = None
    reruns: int = 0
    failed: str = ""              # why the level could not run

    @property
    def wrong(self) -> bool:
        """Did the decomposed graph, run eagerly, depart from eager?"""
        return not self.agrees and not self.failed

    def __str__(self):
        if self.failed:
            return f"could not run the decomposed graphs eagerly: {self.failed}"
        if self.agrees:
            return f"the decomposed graph run eagerly agrees with eager (max error {self.error:.3g})"
        where = "in the outputs" if self.outputs_error >= self.error else \
            f"in the gradients; the outputs agree within {self.outputs_error:.3g}"
        lines = ["the decomposed graph run eagerly already differs from eager: a decomposition is wrong",
                 f"max error {self.error:.3g}, {where}"]
        used = f"({self.reruns} reruns over the {len(self.decomposed)} decompositions used)"
        if self.culprits and len(self.culprits) == 1:
            lines.append(f"without the decomposition of {self.culprits[0]} it agrees: that one is wrong {used}")
        elif self.culprits:
            lines.append(f"it agrees only without all of {', '.join(map(str, self.culprits))} {used}")
        else:
            lines.append(f"removing all {len(self.decomposed)} decompositions used does not fix it: the error comes "
                         "from capture's other passes (joint graph, partitioner) or AOTAutograd")
        return "\n    ".join(lines)


def check_decompositions(job) -> DecompositionCheck:
    """`job` (accuracy._Job): rerun(**options) → results judged by `job.judge_split`."""
    seen = []
    try:
        with eager_graphs(seen=seen):
            ok, err, out_err = job.judge_split(job.run())
    except Exception as exc:   # a graph that cannot run eagerly: say so, do not hide the rest
        return DecompositionCheck(False, float("nan"), float("nan"), failed=f"{type(exc).__name__}: {exc}")
    check = DecompositionCheck(ok, err, out_err, decomposed=sorted(seen, key=str))
    if not ok and seen:
        check.culprits = _bisect(job, check)
    return check


def _bisect(job, check) -> list | None:
    """The smallest run of suspects found whose removal from the table makes the results
    agree (one op when a single decomposition is wrong); None if removing all does not."""
    def fixed(without) -> bool:
        check.reruns += 1
        try:
            with eager_graphs(without=set(without)):
                return job.judge_split(job.run())[0]
        except Exception:
            return False
    suspects = list(check.decomposed)
    if not fixed(suspects):
        return None
    while len(suspects) > 1 and check.reruns + 2 <= MAX_RERUNS:
        half = len(suspects) // 2
        if fixed(suspects[:half]):
            suspects = suspects[:half]
        elif fixed(suspects[half:]):
            suspects = suspects[half:]
        else:
            break   # it takes ops of both halves: more than one decomposition is wrong
    return suspects
