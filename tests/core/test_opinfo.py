"""Coverage sweep over PyTorch's OpInfo database (float32, CPU).

For every op in ``op_db`` (minus the exclusions in opinfo_common.py) up to 3 sample inputs
are compiled with miniinductor and compared with eager.  One test runs the
whole sweep and asserts a pass rate of at least 95% over the samples that
(1) run in eager, (2) are deterministic in eager, and (3) Dynamo itself can
capture.  It reports the rate, the failures (op + first line of the error) and
the share of samples/ops lowered natively (no ExternKernel fallback).

Runtime is capped by a time budget: samples run round-robin (first sample of
every op, then second samples, ...), so a budget cut still covers as many ops
as possible.  Environment knobs:

  MINIINDUCTOR_OPINFO_BUDGET_S     seconds for the sweep (default 360)
  MINIINDUCTOR_OPINFO_SAMPLES      samples per op, at most 3 (default 3)
  MINIINDUCTOR_OPINFO_OPS          comma-separated op names to restrict to
  MINIINDUCTOR_OPINFO_JSON         also write the JSON report to this path
"""

from __future__ import annotations

import itertools
import os
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
    run_round_robin,
    select_ops,
    summarize,
)

PASS_RATE = 0.95
BUDGET_S = float(os.environ.get("MINIINDUCTOR_OPINFO_BUDGET_S", "360"))
SAMPLES_PER_OP = min(3, int(os.environ.get("MINIINDUCTOR_OPINFO_SAMPLES", "3")))
ONLY_OPS = {s for s in os.environ.get("MINIINDUCTOR_OPINFO_OPS", "").split(",") if s}


def _make_fn(f, kwargs):
    return lambda *a: f(*a, **kwargs)


def _run_sample(op, sample):
    """Returns a result dict: status in pass/fail/skip, plus details."""
    args = (sample.input, *sample.args)
    fn = _make_fn(op.op, sample.kwargs)
    try:
        expected = fn(*clone_inputs(args))
        again = fn(*clone_inputs(args))
    except Exception as e:
        return {"status": "skip", "why": "eager raises: " + first_line(e)}
    try:
        compare(again, expected)
    except Exception:
        return {"status": "skip", "why": "nondeterministic in eager"}

    reset_compile_state()
    try:
        actual = compile_fn(fn)(*clone_inputs(args))
        if graphs_captured() == 0:
            return {"status": "skip", "why": "Dynamo captured no graph"}
        compare(actual, expected)
    except Exception as e:
        err = first_line(e)
        # Is this sample beyond Dynamo itself? Then it says nothing about us.
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager", dynamic=False)(*clone_inputs(args))
        except Exception as e2:
            return {"status": "skip", "why": "not compilable by dynamo: " + first_line(e2)}
        return {"status": "fail", "error": err,
                "trace": traceback.format_exc(limit=-3)}
    return {"status": "pass", **fallback_info()}


def _samples(op):
    torch.manual_seed(0)
    try:
        return list(itertools.islice(op.sample_inputs("cpu", torch.float32), SAMPLES_PER_OP))
    except Exception:
        return []


def run_sweep(budget_s=BUDGET_S):
    ops, excluded = select_ops(ONLY_OPS)
    samples = {full_name(op): _samples(op) for op in ops}
    results, elapsed, out_of_time = run_round_robin(ops, samples, _run_sample, budget_s,
                                                    SAMPLES_PER_OP)
    return results, excluded, elapsed, out_of_time


@pytest.mark.timeout(int(BUDGET_S) + 480)  # budget + op_db import + one slow last sample
@pytest.mark.sweep
def test_opinfo_sweep(tmp_path):
    torch._dynamo.config.suppress_errors = False
    results, excluded, elapsed, out_of_time = run_sweep()
    summary = summarize(results, excluded, elapsed, out_of_time, BUDGET_S, SAMPLES_PER_OP)
    text = format_summary(summary)
    report(summary, results, text, tmp_path / "opinfo_report.json",
           os.environ.get("MINIINDUCTOR_OPINFO_JSON"))
    assert summary["samples_counted"] > 0, "no OpInfo sample ran"
    assert summary["pass_rate"] >= PASS_RATE, text
