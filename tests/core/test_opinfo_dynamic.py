"""The OpInfo sweep with `dynamic=None`: every sample of an op a new shape (issue 13).

test_opinfo.py compiles each sample afresh, so every graph is static. Here each op's samples
go through ONE compiled callable, as a program calling an op with changing shapes would:
the first sample compiles static; a later one whose shape differs fails a guard and Dynamo
hands the graph over again with the changed sizes as symbols (automatic dynamic), which
miniinductor compiles once for every size (or per shape, where it cannot: capture/aot.py).
Each output is compared with eager (the tolerances of opinfo_common.compare).

The bar: the dynamic sweep passes wherever the static one does. A sample that fails here
is compiled again, alone and static: if that passes too, the failure is the symbolic
path's (status "fail"); if it fails as well, the static sweep reports it and this one
skips it ("fails static too"). The summary counts how many samples ran through a symbolic
graph, so a sweep that never went symbolic cannot pass unnoticed.

  MINIINDUCTOR_OPINFO_DYNAMIC_BUDGET_S   seconds for the sweep (default 420; all ops took 427 s alone, on 2 cores)
  MINIINDUCTOR_OPINFO_OPS                comma-separated op names to restrict to
"""
from __future__ import annotations

import itertools
import os
import time
import traceback

import pytest
import torch
import torch._dynamo
from conftest import clone_inputs, compile_fn
from opinfo_common import (
    compare,
    fallback_info,
    first_line,
    format_summary,
    full_name,
    graphs_captured,
    report,
    reset_compile_state,
    select_ops,
    summarize,
)

from miniinductor.compile_fx import collect_compiled

BUDGET_S = float(os.environ.get("MINIINDUCTOR_OPINFO_DYNAMIC_BUDGET_S", "420"))
SAMPLES_PER_OP = 3
ONLY_OPS = {s for s in os.environ.get("MINIINDUCTOR_OPINFO_OPS", "").split(",") if s}


def _call(op):
    return lambda *args, **kwargs: op.op(*args, **kwargs)


def _static_passes(op, sample, expected) -> bool:
    """Does this sample pass when compiled alone and static (as test_opinfo.py does)?"""
    reset_compile_state()
    try:
        actual = compile_fn(_call(op), dynamic=False)(*clone_inputs((sample.input, *sample.args)), **sample.kwargs)
        compare(actual, expected)
        return True
    except Exception:
        return False


def run_op(op, samples) -> list[dict]:
    """All of `op`'s samples through one compiled callable (dynamic=None); a result per sample."""
    results = []
    reset_compile_state()
    compiled = compile_fn(_call(op), dynamic=None)
    for i, sample in enumerate(samples):
        args, kwargs = (sample.input, *sample.args), sample.kwargs
        try:
            expected = op.op(*clone_inputs(args), **kwargs)
            compare(op.op(*clone_inputs(args), **kwargs), expected)
        except Exception as e:
            results.append({"status": "skip", "sample": i, "why": "eager raises or is nondeterministic: " + first_line(e)})
            continue
        try:
            with collect_compiled() as graphs:
                actual = compiled(*clone_inputs(args), **kwargs)
            if graphs_captured() == 0:
                results.append({"status": "skip", "sample": i, "why": "Dynamo captured no graph"})
                continue
            compare(actual, expected)
            symbolic = any(cg.graph.sizevars.symbolic for cg in graphs)
            results.append({"status": "pass", "sample": i, "symbolic": symbolic, **fallback_info()})
        except Exception as e:
            err, trace = first_line(e), traceback.format_exc(limit=-3)
            if _static_passes(op, sample, expected):
                results.append({"status": "fail", "sample": i, "error": err, "trace": trace})
            else:
                results.append({"status": "skip", "sample": i, "why": "fails static too: " + err})
            reset_compile_state()   # (the static check reset Dynamo: start the op's callable anew)
            compiled = compile_fn(_call(op), dynamic=None)
    return results


@pytest.mark.timeout(int(BUDGET_S) + 480)   # budget + op_db import + one slow last op
@pytest.mark.sweep
def test_opinfo_dynamic_sweep(tmp_path):
    torch._dynamo.config.suppress_errors = False
    ops, excluded = select_ops(ONLY_OPS)
    results, start, not_run = {}, time.monotonic(), 0
    for op in ops:
        torch.manual_seed(0)
        try:
            samples = list(itertools.islice(op.sample_inputs("cpu", torch.float32), SAMPLES_PER_OP))
        except Exception:
            samples = []
        if time.monotonic() - start > BUDGET_S:
            not_run += len(samples)
            continue
        results[full_name(op)] = run_op(op, samples)
    torch._dynamo.reset()
    summary = summarize(results, excluded, time.monotonic() - start, not_run, BUDGET_S, SAMPLES_PER_OP)
    symbolic = sum(r.get("symbolic", False) for rs in results.values() for r in rs)
    text = (format_summary(summary, title="OpInfo sweep, dynamic=None")
            + f"\nsamples that ran through a symbolic graph: {symbolic} of {summary['samples_passed']} passing")
    report(summary, results, text, tmp_path / "opinfo_dynamic_report.json", os.environ.get("MINIINDUCTOR_OPINFO_JSON"))
    assert summary["samples_counted"] > 0, "no OpInfo sample ran"
    assert symbolic >= summary["samples_passed"] // 4, "too few samples went symbolic to say anything\n" + text
    assert summary["samples_failed"] == 0, "passes static, fails with dynamic=None:\n" + text
