"""Coverage sweep over PyTorch's OpInfo database (float32, CPU).

For every op in ``op_db`` (minus the exclusions below) up to 3 sample inputs
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
import json
import os
import random
import time
import traceback

import pytest
import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten

from conftest import (
    TERMINAL_REPORTS,
    USING_MINIINDUCTOR,
    clone_inputs,
    compile_fn,
    metrics,
)

RTOL, ATOL = 1e-4, 1e-5
PASS_RATE = 0.95
BUDGET_S = float(os.environ.get("MINIINDUCTOR_OPINFO_BUDGET_S", "360"))
SAMPLES_PER_OP = min(3, int(os.environ.get("MINIINDUCTOR_OPINFO_SAMPLES", "3")))
ONLY_OPS = {s for s in os.environ.get("MINIINDUCTOR_OPINFO_OPS", "").split(",") if s}

_RANDOM = "random output"
_UNINIT = "uninitialized memory (torch.empty family)"
_INPLACE = "in-place variant"
_SIGN = "decomposition not unique (signs/order of vectors)"

# Full OpInfo names ("name" or "name.variant_test_name") and why they are skipped.
EXCLUDED = {
    **{n: _RANDOM for n in [
        "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial",
        "normal", "normal.number_mean", "normal.in_place", "uniform", "rand_like", "randn",
        "randn_like", "randint", "randint_like", "nn.functional.dropout",
        "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
        "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
        "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
        "svd_lowrank", "pca_lowrank"]},
    **{n: _UNINIT for n in [
        "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
        "new_empty_strided"]},
    **{n: _INPLACE for n in ["resize_", "resize_as_", "zero_"]},
    **{n: _SIGN for n in [
        "svd", "linalg.svd", "linalg.eig", "linalg.eigvals", "linalg.eigh", "qr", "linalg.qr",
        "geqrf"]},
}


def _full_name(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _exclusion_reason(op):
    name = _full_name(op)
    if name in EXCLUDED:
        return EXCLUDED[name]
    if op.name in EXCLUDED:
        return EXCLUDED[op.name]
    if op.name.startswith("sparse.") or op.name.startswith("to_sparse"):
        return "sparse layout"
    if op.name.endswith("_") and not op.name.endswith("__"):
        return _INPLACE
    if torch.float32 not in op.supported_dtypes("cpu"):
        return "no float32 on CPU"
    return None


def _is_float(t):
    return t.is_floating_point() or t.is_complex()


def compare(actual, expected):
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    assert a_spec == e_spec, f"output structure {a_spec} != {e_spec}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"output {i}: {type(a)} is not a tensor"
            assert a.shape == e.shape, f"output {i}: shape {a.shape} != {e.shape}"
            assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype} != {e.dtype}"
            if _is_float(e):
                torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL, equal_nan=True,
                                           check_stride=False)
            else:  # integer and bool results are exact
                torch.testing.assert_close(a, e, rtol=0, atol=0, check_stride=False)
        elif isinstance(e, float):
            torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            assert a == e, f"output {i}: {a!r} != {e!r}"


def _first_line(exc):
    # Dynamo wraps backend errors ("backend='...' raised:" + traceback): show the cause.
    inner = getattr(exc, "inner_exception", None)
    if inner is not None:
        exc = inner
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]


def _make_fn(f, kwargs):
    return lambda *a: f(*a, **kwargs)


def _graphs_captured():
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _run_sample(op, sample):
    """Returns a result dict: status in pass/fail/skip, plus details."""
    args = (sample.input, *sample.args)
    fn = _make_fn(op.op, sample.kwargs)
    try:
        expected = fn(*clone_inputs(args))
        again = fn(*clone_inputs(args))
    except Exception as e:
        return {"status": "skip", "why": "eager raises: " + _first_line(e)}
    try:
        compare(again, expected)
    except Exception:
        return {"status": "skip", "why": "nondeterministic in eager"}

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    if USING_MINIINDUCTOR:
        metrics().reset()
    try:
        actual = compile_fn(fn)(*clone_inputs(args))
        if _graphs_captured() == 0:
            return {"status": "skip", "why": "Dynamo captured no graph"}
        compare(actual, expected)
    except Exception as e:
        err = _first_line(e)
        # Is this sample beyond Dynamo itself? Then it says nothing about us.
        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager", dynamic=False)(*clone_inputs(args))
        except Exception as e2:
            return {"status": "skip", "why": "not compilable by dynamo: " + _first_line(e2)}
        return {"status": "fail", "error": err,
                "trace": traceback.format_exc(limit=-3)}
    native = True
    fallbacks = {}
    if USING_MINIINDUCTOR:
        native = metrics().fallback_count == 0
        fallbacks = {str(k): v for k, v in metrics().fallback_ops.items()}
    return {"status": "pass", "native": native, "fallbacks": fallbacks}


def _select_ops():
    from torch.testing._internal.common_methods_invocations import op_db

    selected, excluded = [], {}
    for op in op_db:
        name = _full_name(op)
        if ONLY_OPS and name not in ONLY_OPS and op.name not in ONLY_OPS:
            continue
        reason = _exclusion_reason(op)
        if reason:
            excluded[name] = reason
        else:
            selected.append(op)
    # A fixed shuffle: if the budget cuts the sweep short, the ops that ran are a
    # representative sample of op_db rather than its first (alphabetical-ish) part.
    random.Random(0).shuffle(selected)
    return selected, excluded


def _samples(op):
    torch.manual_seed(0)
    try:
        return list(itertools.islice(op.sample_inputs("cpu", torch.float32), SAMPLES_PER_OP))
    except Exception:
        return []


def run_sweep(budget_s=BUDGET_S):
    ops, excluded = _select_ops()
    samples = {_full_name(op): _samples(op) for op in ops}
    results = {_full_name(op): [] for op in ops}
    start = time.monotonic()
    out_of_time = False
    for round_ in range(SAMPLES_PER_OP):          # round-robin over ops
        for op in ops:
            name = _full_name(op)
            if round_ >= len(samples[name]):
                continue
            if time.monotonic() - start > budget_s:
                out_of_time = True
                break
            res = _run_sample(op, samples[name][round_])
            res["sample"] = round_
            results[name].append(res)
        if out_of_time:
            break
    torch._dynamo.reset()
    return results, excluded, time.monotonic() - start, out_of_time


def summarize(results, excluded, elapsed, out_of_time):
    flat = [(name, r) for name, rs in results.items() for r in rs]
    passed = [(n, r) for n, r in flat if r["status"] == "pass"]
    failed = [(n, r) for n, r in flat if r["status"] == "fail"]
    skipped = [(n, r) for n, r in flat if r["status"] == "skip"]
    counted = len(passed) + len(failed)
    ops_run = {n for n, r in flat if r["status"] != "skip"}
    ops_all_native = {n for n in ops_run
                      if all(r["status"] == "pass" and r["native"] for r in results[n]
                             if r["status"] != "skip")}
    fallback_ops = {}
    for _, r in passed:
        for k, v in r.get("fallbacks", {}).items():
            fallback_ops[k] = fallback_ops.get(k, 0) + v
    skip_reasons = {}
    for _, r in skipped:
        key = r["why"].split(":")[0]
        skip_reasons[key] = skip_reasons.get(key, 0) + 1
    return {
        "backend": os.environ.get("MINIINDUCTOR_TEST_BACKEND", "miniinductor"),
        "pass_rate": len(passed) / counted if counted else 0.0,
        "samples_counted": counted,
        "samples_passed": len(passed),
        "samples_failed": len(failed),
        "samples_skipped": len(skipped),
        "skip_reasons": skip_reasons,
        "ops_selected": len(results),
        "ops_excluded": excluded,
        "ops_run": len(ops_run),
        "native_sample_share": (sum(r["native"] for _, r in passed) / len(passed)) if passed else 0.0,
        "native_op_share": len(ops_all_native) / len(ops_run) if ops_run else 0.0,
        "fallback_ops": dict(sorted(fallback_ops.items(), key=lambda kv: -kv[1])),
        "failures": [f"{n} [sample {r['sample']}]: {r['error']}" for n, r in failed],
        "elapsed_s": round(elapsed, 1),
        "budget_s": BUDGET_S,
        "cut_by_budget": out_of_time,
        "samples_per_op": SAMPLES_PER_OP,
    }


def format_summary(s):
    lines = [
        f"OpInfo sweep ({s['backend']}): pass rate {s['pass_rate']:.1%} "
        f"({s['samples_passed']}/{s['samples_counted']} samples) over {s['ops_run']} ops; "
        f"{s['samples_skipped']} samples skipped {s['skip_reasons']}; "
        f"{len(s['ops_excluded'])} ops excluded",
        f"native (no fallback): {s['native_sample_share']:.1%} of passing samples, "
        f"{s['native_op_share']:.1%} of ops",
        f"elapsed {s['elapsed_s']}s of budget {s['budget_s']}s"
        + (" (CUT BY BUDGET: not every sample ran)" if s["cut_by_budget"] else ""),
        f"top fallbacks: {dict(list(s['fallback_ops'].items())[:15])}",
        f"failures ({len(s['failures'])}):",
        *("  " + f for f in s["failures"]),
    ]
    return "\n".join(lines)


@pytest.mark.timeout(int(BUDGET_S) + 480)  # budget + op_db import + one slow last sample
@pytest.mark.sweep
def test_opinfo_sweep(tmp_path):
    torch._dynamo.config.suppress_errors = False
    results, excluded, elapsed, out_of_time = run_sweep()
    summary = summarize(results, excluded, elapsed, out_of_time)
    text = format_summary(summary)
    report = tmp_path / "opinfo_report.json"
    report.write_text(json.dumps({"summary": summary, "results": results}, indent=1, default=str))
    extra = os.environ.get("MINIINDUCTOR_OPINFO_JSON")
    if extra:
        with open(extra, "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1, default=str)
    print(text)
    print(f"JSON report: {report}")
    TERMINAL_REPORTS.append(text + f"\nJSON report: {report}")
    assert summary["samples_counted"] > 0, "no OpInfo sample ran"
    assert summary["pass_rate"] >= PASS_RATE, text
