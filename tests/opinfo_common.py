"""Shared machinery of the OpInfo sweeps (tests/core/test_opinfo.py: outputs,
tests/core/test_opinfo_grad.py: gradients).

Selecting ops from PyTorch's ``op_db`` (minus the exclusions below), running
their samples round-robin under a time budget (first sample of every op, then
second samples, ...: a budget cut still covers as many ops as possible),
comparing results with eager, and summarizing/reporting the outcome (text
for the terminal, JSON for tools).  A sweep supplies one function that runs
one sample and returns a result dict with ``status`` in pass/fail/skip.
"""

from __future__ import annotations

import json
import os
import random
import time

import torch
import torch._dynamo
from conftest import TERMINAL_REPORTS, USING_MINIINDUCTOR, metrics
from torch.utils._pytree import tree_flatten

RTOL, ATOL = 1e-4, 1e-5

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


def full_name(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def exclusion_reason(op):
    name = full_name(op)
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


def compare(actual, expected, rtol=RTOL, atol=ATOL, what="output"):
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    assert a_spec == e_spec, f"{what} structure {a_spec} != {e_spec}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{what} {i}: {type(a)} is not a tensor"
            assert a.shape == e.shape, f"{what} {i}: shape {a.shape} != {e.shape}"
            assert a.dtype == e.dtype, f"{what} {i}: dtype {a.dtype} != {e.dtype}"
            if _is_float(e):
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                           check_stride=False,
                                           msg=lambda m, i=i: f"{what} {i}: {m}")
            else:  # integer and bool results are exact
                torch.testing.assert_close(a, e, rtol=0, atol=0, check_stride=False)
        elif isinstance(e, float):
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert a == e, f"{what} {i}: {a!r} != {e!r}"


def first_line(exc):
    # Dynamo wraps backend errors ("backend='...' raised:" + traceback): show the cause.
    inner = getattr(exc, "inner_exception", None)
    if inner is not None:
        exc = inner
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]


def graphs_captured():
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def reset_compile_state():
    """Before each sample: an empty Dynamo cache, counters and miniinductor metrics."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    if USING_MINIINDUCTOR:
        metrics().reset()


def fallback_info():
    """Whether the sample compiled without ExternKernel fallbacks, and which ops fell back."""
    if not USING_MINIINDUCTOR:
        return {"native": True, "fallbacks": {}}
    return {"native": metrics().fallback_count == 0,
            "fallbacks": {str(k): v for k, v in metrics().fallback_ops.items()}}


def select_ops(only_ops=(), extra_reason=None):
    """The ops of ``op_db`` to sweep, in a fixed shuffled order, and {name: why} of the
    excluded ones.  ``extra_reason(op)`` may exclude more (e.g. no autograd)."""
    from torch.testing._internal.common_methods_invocations import op_db

    selected, excluded = [], {}
    for op in op_db:
        name = full_name(op)
        if only_ops and name not in only_ops and op.name not in only_ops:
            continue
        reason = (extra_reason and extra_reason(op)) or exclusion_reason(op)
        if reason:
            excluded[name] = reason
        else:
            selected.append(op)
    # A fixed shuffle: if the budget cuts the sweep short, the ops that ran are a
    # representative sample of op_db rather than its first (alphabetical-ish) part.
    random.Random(0).shuffle(selected)
    return selected, excluded


def run_round_robin(ops, samples, run_sample, budget_s, samples_per_op):
    """Run ``run_sample(op, sample)`` round-robin over ``samples`` ({name: [sample]})
    until ``budget_s`` seconds have passed.  Returns (results, elapsed_s, not_run): the
    number of samples the budget left out (0 when every sample ran)."""
    results = {full_name(op): [] for op in ops}
    start = time.monotonic()
    out_of_time = False
    for round_ in range(samples_per_op):
        for op in ops:
            name = full_name(op)
            if round_ >= len(samples[name]):
                continue
            if time.monotonic() - start > budget_s:
                out_of_time = True
                break
            res = run_sample(op, samples[name][round_])
            res["sample"] = round_
            results[name].append(res)
        if out_of_time:
            break
    torch._dynamo.reset()
    planned = sum(min(len(samples[full_name(op)]), samples_per_op) for op in ops)
    return results, time.monotonic() - start, planned - sum(map(len, results.values()))


def summarize(results, excluded, elapsed, not_run, budget_s, samples_per_op):
    flat = [(name, r) for name, rs in results.items() for r in rs]
    passed = [(n, r) for n, r in flat if r["status"] == "pass"]
    failed = [(n, r) for n, r in flat if r["status"] == "fail"]
    skipped = [(n, r) for n, r in flat if r["status"] == "skip"]
    counted = len(passed) + len(failed)
    ops_run = {n for n, r in flat if r["status"] != "skip"}
    ran = {n: [r for r in results[n] if r["status"] != "skip"] for n in ops_run}
    ops_all_passed = {n for n in ops_run if all(r["status"] == "pass" for r in ran[n])}
    ops_all_native = {n for n in ops_all_passed if all(r["native"] for r in ran[n])}
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
        "ops_all_passed": len(ops_all_passed),
        "native_sample_share": (sum(r["native"] for _, r in passed) / len(passed)) if passed else 0.0,
        "native_op_share": len(ops_all_native) / len(ops_run) if ops_run else 0.0,
        "fallback_ops": dict(sorted(fallback_ops.items(), key=lambda kv: -kv[1])),
        "failures": [f"{n} [sample {r['sample']}]: {r['error']}" for n, r in failed],
        "elapsed_s": round(elapsed, 1),
        "budget_s": budget_s,
        "cut_by_budget": bool(not_run),
        "samples_not_run": int(not_run),
        "samples_per_op": samples_per_op,
    }


def format_summary(s, title="OpInfo sweep"):
    lines = [
        f"{title} ({s['backend']}): pass rate {s['pass_rate']:.1%} "
        f"({s['samples_passed']}/{s['samples_counted']} samples; {s['samples_not_run']} not run, "
        f"cut by the time budget) over {s['ops_run']} ops, "
        f"{s['ops_all_passed']} ops passed every sample; "
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


def report(summary, results, text, path, extra_path=None):
    """Write the JSON report (and a copy to ``extra_path``), print and show ``text``."""
    payload = {"summary": summary, "results": results}
    for p in filter(None, [path, extra_path]):
        with open(p, "w") as f:
            json.dump(payload, f, indent=1, default=str)
    print(text)
    print(f"JSON report: {path}")
    TERMINAL_REPORTS.append(text + f"\nJSON report: {path}")
