"""Gradient sweep over PyTorch's OpInfo database (CPU; float32, float64 where an op's
backward has no float32).

For every op of ``op_db`` that ``supports_autograd`` (minus the exclusions in
opinfo_common.py) up to 2 samples run as a training loop would: a compiled function
calls the op on the sample (its floating inputs ``requires_grad``), then, *outside* the
compiled call, ``torch.autograd.grad`` takes the gradient of every differentiable input
for fixed random output gradients.  Outputs and input gradients are compared with eager
run on identical copies of the inputs.  A sample fails at the ``forward`` stage (the
compiled call raised or its outputs differ: the output sweep's business, reported
here) or at the ``backward`` stage (wrong or failing gradients).

The test fails if an op whose forward passes has a backward failure that is not in
``GRAD_EXCEPTIONS`` (each with its reason).  Samples are skipped (and counted) when
eager raises, when eager's outputs or gradients are not deterministic, or when
Dynamo + AOTAutograd themselves (backend="aot_eager") cannot run them.

Runtime is capped by a time budget, round-robin as in the output sweep.  Measured on
2 shared cores: with an empty C++ kernel cache the 270 s budget runs the first sample of
all 502 ops (5.5 min in all); with a warm cache both samples of every op run in 165 s.
Knobs:

  MINIINDUCTOR_OPINFO_GRAD_BUDGET_S   seconds for the sweep (default 270)
  MINIINDUCTOR_OPINFO_GRAD_SAMPLES    samples per op, at most 3 (default 2)
  MINIINDUCTOR_OPINFO_OPS             comma-separated op names to restrict to
  MINIINDUCTOR_OPINFO_GRAD_JSON       also write the JSON report to this path
"""

from __future__ import annotations

import itertools
import os
import traceback

import pytest
import torch
import torch._dynamo
from conftest import clone_inputs, compile_fn, input_gradients
from opinfo_common import (
    ATOL,
    RTOL,
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
from torch.utils._pytree import tree_flatten, tree_map

BUDGET_S = float(os.environ.get("MINIINDUCTOR_OPINFO_GRAD_BUDGET_S", "270"))
SAMPLES_PER_OP = min(3, int(os.environ.get("MINIINDUCTOR_OPINFO_GRAD_SAMPLES", "2")))
ONLY_OPS = {s for s in os.environ.get("MINIINDUCTOR_OPINFO_OPS", "").split(",") if s}

# Gradients sum over broadcast and reduced dims, in another order than eager's kernels:
# the forward sweep's float32 tolerances (rtol 1e-4, atol 1e-5) hold for these small
# samples (tens to hundreds of elements of magnitude ~1 summed per gradient element).
# Where they do not, eager's own float32 rounding may be the larger error: e.g. layer_norm
# over one element (variance 0, rstd = 1/sqrt(eps) = 316), where eager's CPU kernel gets
# x*rstd - mean*rstd = 2e-6 and the compiled (x - mean)*rstd gets the exact 0.  So a
# gradient also passes if it is at most twice as far from eager run in float64 as eager
# in float32 is (plus the tolerances), as torch._dynamo.utils.same(fp64_ref=...) does.
GRAD_RTOL, GRAD_ATOL = RTOL, ATOL
FP64_MULTIPLIER = 2.0

# Ops (full OpInfo names) whose forward passes but whose backward is known to fail, and
# why.  Keep this short: the goal is to fix them.
GRAD_EXCEPTIONS: dict[str, str] = {}


def _no_autograd(op):
    return None if op.supports_autograd else "no autograd"


def _dtype(op):
    backward = op.supported_backward_dtypes("cpu")
    return torch.float32 if torch.float32 in backward else torch.float64


def _samples(op):
    torch.manual_seed(0)
    try:
        gen = op.sample_inputs("cpu", _dtype(op), requires_grad=True)
        return list(itertools.islice(gen, SAMPLES_PER_OP))
    except Exception:
        return []


def _call(op, sample):
    """(fn, inputs): ``fn(*inputs)`` calls the op on the sample.  The sample's args, and
    its kwargs holding tensors (a weight, say: their gradients are checked too), are
    arguments of the compiled function; other kwargs (Python values, functions: Dynamo
    takes no function as a graph input) are baked in."""
    tensor_kwargs = {k: v for k, v in sample.kwargs.items()
                     if any(isinstance(x, torch.Tensor) for x in tree_flatten(v)[0])}
    fixed = {k: v for k, v in sample.kwargs.items() if k not in tensor_kwargs}

    def fn(args, kwargs):
        return op.gradcheck_wrapper(op.op, *args, **kwargs, **fixed)

    return fn, ((sample.input, *sample.args), tensor_kwargs)


def _forward_backward(fn, inputs, process):
    out = fn(*inputs)
    return (out, *input_gradients(process(out), inputs))


def _as_float64(t):
    if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
        return t.detach().double().requires_grad_(t.requires_grad)
    return t


def _closer_to_float64(fn, inputs, process, grads, expected_grads):
    """Whether every gradient is at most FP64_MULTIPLIER times as far from eager's
    float64 gradient as eager's float32 one is (plus the tolerances)."""
    inputs64 = tree_map(_as_float64, clone_inputs(inputs))
    ref = input_gradients(process(fn(*inputs64)), inputs64, draw_dtype=torch.float32)[1]
    for a, e, r in zip(grads, expected_grads, ref):
        if a is None or e is None or r is None or a.dtype != torch.float32:
            return False
        r = r.float()
        bound = FP64_MULTIPLIER * (e - r).abs().max() + GRAD_ATOL + GRAD_RTOL * r.abs()
        if not ((a - r).abs() <= bound).all():
            return False
    return True


def _run_sample(op, sample):
    """Returns a result dict: status in pass/fail/skip (a failure names its stage)."""
    fn, inputs = _call(op, sample)
    process = sample.output_process_fn_grad
    try:
        expected = _forward_backward(fn, clone_inputs(inputs), process)
        again = _forward_backward(fn, clone_inputs(inputs), process)
    except Exception as e:
        return {"status": "skip", "why": "eager raises: " + first_line(e)}
    try:
        compare(again, expected)
    except Exception:
        return {"status": "skip", "why": "nondeterministic in eager"}
    n_grads = sum(g is not None for g in expected[2])
    if n_grads == 0:
        return {"status": "skip", "why": "no gradient: no differentiable output or input"}

    reset_compile_state()
    stage = "forward"
    try:
        compiled = compile_fn(fn)
        args = clone_inputs(inputs)
        out = compiled(*args)
        if graphs_captured() == 0:
            return {"status": "skip", "why": "Dynamo captured no graph"}
        compare(out, expected[0])
        stage = "backward"
        n_outs, grads = input_gradients(process(out), args)
        assert n_outs == expected[1], f"{n_outs} outputs require grad, eager {expected[1]}"
        try:
            compare(grads, expected[2], rtol=GRAD_RTOL, atol=GRAD_ATOL, what="gradient")
        except AssertionError:
            if not _closer_to_float64(fn, inputs, process, grads, expected[2]):
                raise
    except Exception as e:
        err = first_line(e)
        # Is this sample beyond Dynamo + AOTAutograd themselves? Then it says nothing
        # about us.
        torch._dynamo.reset()
        try:
            ref = torch.compile(fn, backend="aot_eager", dynamic=False)
            _forward_backward(ref, clone_inputs(inputs), process)
        except Exception as e2:
            return {"status": "skip", "why": "not compilable by aot_eager: " + first_line(e2)}
        return {"status": "fail", "stage": stage, "error": f"{stage}: {err}",
                "trace": traceback.format_exc(limit=-3)}
    return {"status": "pass", "dtype": str(_dtype(op)), "gradients": n_grads,
            **fallback_info()}


def run_sweep(budget_s=BUDGET_S):
    ops, excluded = select_ops(ONLY_OPS, extra_reason=_no_autograd)
    samples = {full_name(op): _samples(op) for op in ops}
    results, elapsed, out_of_time = run_round_robin(ops, samples, _run_sample, budget_s,
                                                    SAMPLES_PER_OP)
    return results, excluded, elapsed, out_of_time


def backward_failures(results):
    """{op: first backward error} for ops whose forward passed on every sample that ran
    but whose backward failed on one."""
    bad = {}
    for name, rs in results.items():
        if any(r["status"] == "fail" and r["stage"] == "forward" for r in rs):
            continue
        errs = [r["error"] for r in rs if r["status"] == "fail"]
        if errs:
            bad[name] = errs[0]
    return bad


@pytest.mark.timeout(int(BUDGET_S) + 480)  # budget + op_db import + one slow last sample
@pytest.mark.sweep
def test_opinfo_grad_sweep(tmp_path):
    torch._dynamo.config.suppress_errors = False
    results, excluded, elapsed, out_of_time = run_sweep()
    summary = summarize(results, excluded, elapsed, out_of_time, BUDGET_S, SAMPLES_PER_OP)
    bad = backward_failures(results)
    summary["ops_backward_failed"] = sorted(bad)
    summary["gradients_compared"] = sum(r.get("gradients", 0)
                                        for rs in results.values() for r in rs)
    summary["forward_failures"] = sum(r["status"] == "fail" and r["stage"] == "forward"
                                      for rs in results.values() for r in rs)
    text = format_summary(summary, title="OpInfo gradient sweep") + (
        f"\n{summary['gradients_compared']} input gradients compared in passing samples; "
        f"{summary['forward_failures']} samples failed at the forward stage; "
        f"{len(bad)} ops pass forward but fail backward; "
        f"known exceptions: {sorted(GRAD_EXCEPTIONS)}")
    report(summary, results, text, tmp_path / "opinfo_grad_report.json",
           os.environ.get("MINIINDUCTOR_OPINFO_GRAD_JSON"))
    assert summary["samples_counted"] > 0, "no OpInfo sample ran"
    unexpected = {n: e for n, e in bad.items() if n not in GRAD_EXCEPTIONS}
    assert not unexpected, "backward fails where forward passes:\n" + "\n".join(
        f"  {n}: {e}" for n, e in sorted(unexpected.items()))
