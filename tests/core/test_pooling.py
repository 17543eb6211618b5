"""Pooling and BatchNorm lowered natively (lowering/pooling.py, ext/pool_grad/ for the
backwards of pooling, capture/decompositions.py).

Every case runs forward and backward (a compiled forward whose backward graph is compiled
too) on both CPU code generators, C++ and Triton (interpreted), and on a GPU where there is
one (Triton compiled; it reads the padding through masked loads, the CPU through clamped
reads: codegen/policy.py `clamped_window_reads`), with fresh random inputs,
and compares the output and the gradient of every input with eager -- and checks that
no pooling or BatchNorm op ran as an ATen fallback.

Tolerances: max pooling picks values and sums the same gradients in eager's order:
exact, indices included (inputs take a few values only, so windows hold ties, which must
pick the first maximum as eager does; NaN and -inf cases likewise). Average pooling sums a
window in another order in the C++ kernels (one float32 ulp); its backward adds each
window's share in eager's order. BatchNorm's mean and variance sum in another order:
float32 ulps, as in tests/core/test_zoo.py.
"""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("TRITON_INTERPRET", "1")

from conftest import compile_fn, extension_on, metrics, requires_miniinductor  # noqa: E402

import miniinductor  # noqa: E402

pytestmark = requires_miniinductor

BACKENDS = {"cpp": {}, "triton": {"cpu_backend": "triton"}}
if torch.cuda.is_available():   # Triton compiled for the GPU (the device runs these too)
    BACKENDS["cuda"] = {}
EXACT = dict(rtol=0, atol=0, equal_nan=True)
AVG_TOL = dict(rtol=1.3e-6, atol=1e-6)
BN_TOL = dict(rtol=1e-5, atol=1e-5)


def ties(*shape):
    """Values from {-1, -0.5, 0, 0.5, 1}: most windows hold their maximum more than once."""
    return torch.randint(-2, 3, shape).float() / 2


#: the backwards of pooling, lowered by the pool_grad extension (ATen calls while it is off)
POOL_GRADS = () if extension_on("pool_grad") else (
    "aten.max_pool2d_with_indices_backward.default", "aten.avg_pool2d_backward.default",
    "aten._adaptive_avg_pool2d_backward.default")


def no_fallback(*words):
    hits = {op: n for op, n in metrics().fallback_ops.items() if any(w in op for w in words) and op not in POOL_GRADS}
    assert not hits, f"fell back to ATen: {hits}"


def check_forward_backward(fn, x, backend, tol):
    """fn(x) compiled vs eager: outputs (a tensor or a tuple) and x's gradient. The GPU case
    (compiled on the GPU) is compared with eager on the CPU: eager's CUDA avg_pool2d backward
    is wrong for a channels-last input with padding in torch 2.11 (pytorch/pytorch#188344, fixed
    later), and its max-pooling backward adds gradients with atomics in no fixed order (so the
    gradient is compared with AVG_TOL there)."""
    grad_tol = AVG_TOL if backend == "cuda" and tol == EXACT else tol
    x_c, x_e = (x.cuda() if backend == "cuda" else x.clone()).requires_grad_(), x.clone().requires_grad_()
    out_c, out_e = compile_fn(fn, **BACKENDS[backend])(x_c), fn(x_e)
    out_c, out_e = (out_c, out_e) if isinstance(out_e, tuple) else ((out_c,), (out_e,))
    for k, (a, e) in enumerate(zip(out_c, out_e)):
        torch.testing.assert_close(a.cpu(), e, **tol, msg=lambda m: f"output {k}: {m}")
    grad = torch.randn_like(out_e[0])
    out_c[0].backward(grad.to(out_c[0].device))
    out_e[0].backward(grad)
    torch.testing.assert_close(x_c.grad.cpu(), x_e.grad, **grad_tol, msg=lambda m: f"input gradient: {m}")
    no_fallback("pool", "batch_norm")


MAX_CASES = {  # (kernel, stride, padding, dilation, ceil_mode)
    "k2s2": (2, 2, 0, 1, False),
    "k3s1p1": (3, 1, 1, 1, False),
    "k3s2p1_ceil": (3, 2, 1, 1, True),
    "k2s1p1_dil2": (2, 1, 1, 2, False),
    "k3s2p1_dil2_ceil": (3, 2, 1, 2, True),
    "k23_s12_p10": ((2, 3), (1, 2), (1, 0), 1, False),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool2d(case, backend):
    k, s, p, d, ceil = MAX_CASES[case]

    def fn(x):
        return F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    check_forward_backward(fn, ties(2, 3, 9, 10), backend, EXACT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool2d_nan_inf_unbatched(backend):
    """NaN wins its window (eager takes the last NaN); a window of -inf values and padding
    points at its first position inside the input, as eager's does."""
    x = ties(3, 7, 8)
    x[0, :3, :3] = float("-inf")
    x[1, 2, 2] = x[1, 2, 3] = x[2, 5, 5] = float("nan")
    check_forward_backward(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x, backend, EXACT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool2d_epilogue_and_prologue(backend):
    """The pooled input is computed (BatchNorm-like arithmetic and a ReLU) and the output is
    used again: both sides are ordinary loop bodies. (The sigmoid's backward, fused, rounds
    its products in another order: one float32 ulp.)"""
    def fn(x):
        return F.max_pool2d(F.relu(x * 1.5 - 0.5), 3, 2, 1).sigmoid()
    check_forward_backward(fn, ties(2, 4, 8, 8), backend, AVG_TOL)


AVG_CASES = {  # (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    "k3s2p1": (3, 2, 1, False, True, None),
    "k3s2p1_exclude_pad": (3, 2, 1, False, False, None),
    "k3s2p1_ceil": (3, 2, 1, True, True, None),
    "k3s2p1_ceil_exclude_pad": (3, 2, 1, True, False, None),
    "k2_divisor3": (2, 2, 0, False, True, 3),
    "k32_s21_p10_exclude_pad": ((3, 2), (2, 1), (1, 0), False, False, None),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d(case, backend):
    k, s, p, ceil, include_pad, divisor = AVG_CASES[case]

    def fn(x):
        return F.avg_pool2d(x, k, s, p, ceil, include_pad, divisor)
    check_forward_backward(fn, torch.randn(2, 3, 9, 10), backend, AVG_TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [(3, 5), (4, 3), (12, 7), (1, 1)], ids=["divisible", "ragged", "upsampling", "global"])
def test_adaptive_avg_pool2d(size, backend):
    check_forward_backward(lambda x: F.adaptive_avg_pool2d(x, size), torch.randn(2, 3, 9, 10), backend, AVG_TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pooling_bfloat16_channels_last(backend):
    """bfloat16 (sums and gradient shares in float32, rounded once: a bfloat16 ulp or two
    from eager, which rounds after each add) and a channels-last input (the loads follow
    its strides)."""
    def fn(x):
        return (F.max_pool2d(x, 3, 2, 1) + F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
                + F.adaptive_avg_pool2d(x, (5, 5)))
    x = torch.randn(2, 3, 9, 10).to(torch.bfloat16)
    check_forward_backward(fn, x, backend, dict(rtol=1.6e-2, atol=1e-2))
    check_forward_backward(fn, x.float().to(memory_format=torch.channels_last), backend, AVG_TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_batch_norm(training, backend):
    """nn.BatchNorm2d: the output, the gradients of the input, weight and bias, and (in
    training) the running statistics, over two steps."""
    model = nn.BatchNorm2d(4)
    with torch.no_grad():
        model.weight.normal_()
        model.bias.normal_()
        model.running_mean.normal_()
        model.running_var.uniform_(0.5, 2)
    eager = nn.BatchNorm2d(4)
    eager.load_state_dict(model.state_dict())
    device = "cuda" if backend == "cuda" else "cpu"
    model, eager = model.to(device), eager.to(device)
    model.train(training)
    eager.train(training)
    compiled = compile_fn(model, **BACKENDS[backend])
    for _ in range(2):
        x = torch.randn(3, 4, 5, 6, device=device) * 2 + 1
        x_c, x_e = x.clone().requires_grad_(), x.clone().requires_grad_()
        out_c, out_e = compiled(x_c), eager(x_e)
        torch.testing.assert_close(out_c, out_e, **BN_TOL)
        grad = torch.randn_like(out_e)
        out_c.backward(grad)
        out_e.backward(grad)
        torch.testing.assert_close(x_c.grad, x_e.grad, **BN_TOL, msg=lambda m: f"input gradient: {m}")
        for name in ("weight", "bias"):
            torch.testing.assert_close(getattr(model, name).grad, getattr(eager, name).grad,
                                       rtol=1e-4, atol=1e-5, msg=lambda m: f"grad of {name}: {m}")
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(model, name), getattr(eager, name), **BN_TOL,
                                       msg=lambda m: f"{name}: {m}")
    no_fallback("batch_norm")


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_resnet_has_no_pooling_or_batch_norm_fallback(backend):
    """The zoo's ResNet (BatchNorm, max pooling, adaptive average pooling): a training step
    (forward and backward) and an eval forward. Only the convolutions and matmuls are ATen
    calls, and the losses and gradients match eager."""
    from miniinductor.tools import zoo
    result = zoo.compare_training("resnet", lambda m: compile_fn(m, **BACKENDS[backend]), steps=1)
    assert set(metrics().fallback_ops) <= {"aten.convolution.default", "aten.convolution_backward.default",
                                           "aten.addmm.default", "aten.mm.default",
                                           "miniinductor.winograd_conv3x3.default", *POOL_GRADS}, \
        dict(metrics().fallback_ops)
    (loss_e, loss_c), = result["losses"]
    assert abs(loss_e - loss_c) <= 1e-5 * abs(loss_e)
    worst = zoo.worst_grads(result, 1)[0]
    assert worst[0] < 1e-4, worst
    assert result["eval"][0] <= 1e-5 * result["eval"][1], result["eval"]


def test_new_empty_strided_is_decomposed():
    """Backward graphs (compiled autograd's, for one) allocate gradients with
    `new_empty_strided`: an empty_strided now, with the same strides, not an ATen call."""
    def fn(x):
        y = x.new_empty_strided((4, 3), (1, 4))
        y.copy_(x.t() * 2)
        return y + 1
    x = torch.randn(3, 4)
    out = compile_fn(fn)(x)
    torch.testing.assert_close(out, fn(x), **EXACT)
    assert out.stride() == (1, 4)
    assert not metrics().fallback_ops, dict(metrics().fallback_ops)


def test_channels_last_max_pool_reads_without_masks():
    """A channels-last input (a CPU inference graph's, after its convolution): the output is
    stored channels-last as eager's is, the C++ loop runs over channels innermost, and each
    window position is read at a clamped index with no masked load (g++ vectorises it), the
    padding's positions discarded by the comparison's own `valid`. Values and indices exact."""
    x = ties(2, 24, 9, 11).to(memory_format=torch.channels_last)
    fn = lambda x: torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])  # noqa: E731
    result = miniinductor.explain(fn, x)
    for k, (a, e) in enumerate(zip(result.outputs, fn(x))):
        torch.testing.assert_close(a, e, **EXACT, msg=lambda m: f"output {k}: {m}")
        assert a.stride() == e.stride(), f"output {k}: strides {a.stride()} against eager's {e.stride()}"
    (source,) = [k.source for cg in result.graphs for k in cg.kernels.values()]
    loops = [line.split()[2] for line in source.splitlines() if line.strip().startswith("for (int64_t")]
    assert loops[-1] == "i1", f"innermost loop over {loops[-1]}, not the channels:\n{source}"
    assert "[&]" not in source and "mi_clamp_index(static_cast<int32_t>(2*i3 - 1), 10)" in source, source
    fresh = torch.randn(2, 24, 9, 11).to(memory_format=torch.channels_last)
    for a, e in zip(compile_fn(fn)(fresh), fn(fresh)):
        torch.testing.assert_close(a, e, **EXACT)
