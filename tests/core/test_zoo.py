"""The model zoo (miniinductor/tools/zoo/) trained for a few steps, compiled vs eager.

Each model runs `zoo.compare_training` in its own subprocess (a segfault in a generated
kernel fails that model only): 3 SGD steps (momentum 0.9) of a compiled copy and an eager
deepcopy on the same fresh random inputs, then an eval-mode forward under no_grad. The
test compares the loss of every step, EVERY parameter's gradient at every step, the
floating buffers after training (BatchNorm running statistics) and the eval output.
These are sweeps (`-m sweep`, run by .ci/run); the whole zoo takes about 3 minutes on 2
cores. The quick suite has the regression tests of what the zoo found: a code
generation bug (Whisper in eval) and training BatchNorm falling back to ATen (ResNet). (Even a one-layer GPT-2 takes 10-50 s, mostly compiling three
graphs, too slow for the quick suite.)

Tolerances (float32, eps = 1.2e-7). The compiled graph calls the same ATen matmuls and
convolutions as eager; what differs is the order in which fused reductions (LayerNorm,
RMSNorm, softmax, their backward row sums, bias gradients summed over the batch, the
loss) accumulate, which moves results by a few ulps of the terms summed, and those
differences propagate through 2 layers and 3 steps. Measured on CPU: losses and eval
outputs within 5e-7 relative, gradients within 2e-6 relative to their max. We allow:
  * loss: 1e-5 relative;
  * eval output, buffers: 1e-5 relative to the eager tensor's max |value|;
  * each gradient: 1e-4 x its own max |value| (50x the measured worst; a wrong index or
    a dropped term gives errors of order 1), that max floored at 1% of the model's
    largest gradient at that step (zoo.relative_grad_errors). The floor is for gradients
    that are mathematically zero, such as the attention key bias (softmax is invariant
    to the per-row constant q.b_k): both sides are cancellation noise of order eps x the
    terms summed, so an error relative to their own max (measured 0.4e-9 vs an error of
    1e-8) means nothing.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import compile_fn, extension_on, metrics, requires_miniinductor

from miniinductor.tools.zoo import ZOO, relative_grad_errors

ROOT = Path(__file__).resolve().parents[2]
LOSS_RTOL = 1e-5
OUTPUT_RTOL = 1e-5
GRAD_RTOL = 1e-4     # of max |grad|, floored at 1% of the step's largest (zoo.relative_grad_errors)

# The worker compiles as conftest.compile_fn does: miniinductor with $MINIINDUCTOR_TEST_OPTIONS,
# or the Dynamo backend named by $MINIINDUCTOR_TEST_BACKEND (to check the harness itself).
WORKER = """
import json, os, sys
import torch
import miniinductor
from miniinductor.tools.zoo import compare_training
backend = os.environ.get("MINIINDUCTOR_TEST_BACKEND", "miniinductor")
options = json.loads(os.environ.get("MINIINDUCTOR_TEST_OPTIONS") or "{}")
compile = (lambda m: miniinductor.compile(m, **options)) if backend == "miniinductor" else (
    lambda m: torch.compile(m, backend=backend, dynamic=False))
result = compare_training(sys.argv[1], compile, **json.loads(sys.argv[2]))
print("ZOO_RESULT " + json.dumps(result))
"""


def run_zoo_model(name: str, **overrides) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", WORKER, name, json.dumps(overrides)], capture_output=True,
                          text=True, env=env, timeout=540, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("ZOO_RESULT ")]
    assert proc.returncode == 0 and lines, \
        f"{name}: worker exited with {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("ZOO_RESULT "):])


def check_result(name, result):
    # step by step, loss then gradients: the first thing that differs is the one named
    for step, ((eager, compiled), grads) in enumerate(zip(result["losses"], result["grads"])):
        assert abs(compiled - eager) <= LOSS_RTOL * abs(eager), \
            f"{name} step {step}: loss {compiled} vs eager {eager}"
        assert max(scale for _, scale, _ in grads.values()) > 0, f"{name} step {step}: all gradients are zero"
        for param, rel in relative_grad_errors(grads).items():
            err, scale, _ = grads[param]
            assert rel <= GRAD_RTOL, \
                f"{name} step {step}: grad of {param} off by {err:.3g} (max |grad| {scale:.3g})"
    for buf, (err, scale, _) in result["buffers"].items():
        assert err <= OUTPUT_RTOL * scale, f"{name}: buffer {buf} off by {err:.3g} (max {scale:.3g})"
    err, scale, _ = result["eval"]
    assert err <= OUTPUT_RTOL * scale, f"{name}: eval output off by {err:.3g} (max {scale:.3g})"


@pytest.mark.sweep
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_training(name):
    result = run_zoo_model(name)
    assert len(result["losses"]) == 3 and result["grads"]
    check_result(name, result)


def test_masked_indirect_load_then_reduction():
    """Whisper in eval: a cat (a C++ lambda per input, `masked`) of embedding lookups
    (indirect loads), realized, then re-read by a reduction fused into the same kernel.
    The lambda's CSE names leaked into the kernel's outer cache, so the reduction block
    reused `tmp5` declared inside the lambda: "error: 'tmp5' was not declared"."""
    def f(tokens, w, v, x):                                  # tokens [B, T], w, v [V], x [B, T, C]
        scale = torch.cat([w[tokens[:, :4]], w[tokens[:, 4:]] * 2], dim=1)   # [B, T]
        return scale, (x * scale[..., None] * v[tokens][..., None]).sum(-1)  # [B, T]

    tokens = torch.randint(-64, 64, (2, 8))                  # negative ids wrap, as in eager
    w, v, x = torch.randn(64), torch.randn(64), torch.randn(2, 8, 16)
    with torch.no_grad():
        expected = f(tokens, w, v, x)
        actual = compile_fn(f)(tokens, w, v, x)
    # the sum over 16 products reassociates: a few float32 ulps
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


@requires_miniinductor
def test_batchnorm_training_is_decomposed():
    """The zoo's ResNet: training BatchNorm (`_native_batch_norm_legit_functional`) was an
    opaque ATen fallback; it is decomposed now (batch mean/var reductions, the affine, the
    running-statistics update), so it fuses. Values, input and parameter gradients and the
    running statistics must still match eager over two steps."""
    model = nn.BatchNorm2d(6)
    eager = copy.deepcopy(model)
    compiled = compile_fn(model)
    for _ in range(2):
        x = torch.randn(4, 6, 5, 5, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        grad_out = torch.randn(4, 6, 5, 5)
        out, out_eager = compiled(x), eager(x_eager)
        (out * grad_out).sum().backward()
        (out_eager * grad_out).sum().backward()
        # per-channel means and variances over 100 values, summed in another order: float32 ulps
        torch.testing.assert_close(out, out_eager, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-4, atol=1e-5)
        for name in ("weight", "bias"):
            torch.testing.assert_close(getattr(model, name).grad, getattr(eager, name).grad,
                                       rtol=1e-4, atol=1e-5, msg=lambda m: f"grad of {name}: {m}")
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(model, name), getattr(eager, name), rtol=1e-5, atol=1e-6,
                                       msg=lambda m: f"{name}: {m}")
    assert not [op for op in metrics().fallback_ops if "batch_norm" in op], metrics().fallback_ops


@requires_miniinductor
def test_scatter_one_index_per_line_is_pointwise():
    """Every zoo language model's cross-entropy backward scatters into zeros
    (nll_loss_backward), which fell back to ATen; an index with one position per line is a
    pointwise `where` now. More than one index per line, or a reduce, still falls back."""
    x = torch.randn(4, 10)
    cases = [  # (fn, args, lowered?)
        (lambda x, t: x.scatter(1, t, -1.5), (x, torch.randint(0, 10, (4, 1))), True),
        (lambda x, t: torch.zeros_like(x).scatter(1, t, x[:, :1] * 2), (x, torch.randint(0, 10, (4, 1))), True),
        (lambda x, t: x.scatter(0, t, 3.0), (x, torch.randint(0, 4, (1, 10))), True),
        (lambda x, t: x.scatter(1, t, 7), (torch.randint(0, 9, (3, 5, 6)), torch.randint(0, 5, (3, 1, 6))), True),
        # (ext/scatter lowers this one as a scatter kernel)
        (lambda x, t: x.scatter(1, t, 3.0), (x, torch.randperm(10)[:3].expand(4, 3).contiguous()), extension_on("scatter")),
        (lambda x, t: x.scatter(1, t, 2.0, reduce="add"), (x, torch.randint(0, 10, (4, 1))), extension_on("scatter")),
    ]
    for k, (fn, args, lowered) in enumerate(cases):
        torch._dynamo.reset()
        metrics().reset()
        # a where picks each value as is: exact
        torch.testing.assert_close(compile_fn(fn)(*args), fn(*args), rtol=0, atol=0, msg=lambda m: f"case {k}: {m}")
        assert bool(metrics().fallback_ops) != lowered, (k, metrics().fallback_ops)

    torch._dynamo.reset()
    metrics().reset()
    logits, target = torch.randn(8, 10, requires_grad=True), torch.randint(0, 10, (8,))
    logits_eager = logits.detach().clone().requires_grad_()
    compile_fn(lambda w, t: F.cross_entropy(w * 2, t))(logits, target).backward()
    F.cross_entropy(logits_eager * 2, target).backward()
    # log_softmax's backward sums 10 terms per row in another order: float32 ulps
    torch.testing.assert_close(logits.grad, logits_eager.grad, rtol=1e-5, atol=1e-6)
    assert not metrics().fallback_ops, metrics().fallback_ops
