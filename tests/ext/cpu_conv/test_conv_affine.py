"""A per-channel affine chain after a convolution folded into its weight and bias
(ext/cpu_conv/conv_affine.py), C++ backend: outputs against eager (values and strides, via
conftest.check), the kernels that are left, and the graphs it must leave alone.

Tolerance: the folded convolution multiplies the weight by the BatchNorm scale before the
convolution sums, eager after: the same products rounded in another order, ~1e-6 relative
to outputs of size ~10 (conftest's float32 default, rtol 1.3e-6 / atol 1e-5, would be
tight for sums of 147-576 products): rtol = atol = 1e-4; a wrong fold (a missed shift, a
scale on the wrong axis) is off by O(1).
"""
from __future__ import annotations

import pytest
import torch
from conftest import TEST_OPTIONS, check, check_grads, requires_miniinductor, skip_unless_extension
from torch import nn

import miniinductor
from miniinductor.compile_fx import collect_compiled

pytestmark = [requires_miniinductor, skip_unless_extension("cpu_conv")]
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def aten_convolutions(monkeypatch):
    """The folding is read off ATen's convolution call: Winograd (test_winograd.py) would
    take the 3x3 ones, after the folding."""
    monkeypatch.setitem(TEST_OPTIONS, "winograd", False)


def randomised(model: nn.Module) -> nn.Module:
    """Eval BatchNorms with statistics and affine parameters far from the identity."""
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.normal_()
                m.running_var.uniform_(0.25, 4.0)
                m.weight.normal_()
                m.bias.normal_()
    return model.eval()


def compiled_graph(fn, *args):
    torch._dynamo.reset()
    with collect_compiled() as graphs, torch.no_grad():
        miniinductor.compile(fn, winograd=False)(*args)
    (graph,) = graphs
    return graph


@pytest.mark.parametrize("bias", [True, False])
def test_conv_batchnorm_max_pool(bias):
    """conv -> BN -> max pool: the BatchNorm's arithmetic goes into the weight and bias (a
    [C]-sized kernel before the convolution); the pooling reads the convolution's output."""
    model = randomised(nn.Sequential(nn.Conv2d(32, 64, 3, padding=1, bias=bias), nn.BatchNorm2d(64), nn.MaxPool2d(2)))
    x = torch.randn(2, 32, 12, 12)
    with torch.no_grad():
        check(model, x, **TOL)
    graph = compiled_graph(model, x)
    after = [n for n in graph.kernels if n in graph.wrapper_source.split("torch.convolution(")[1]]
    assert len(after) == 1 and "max_pool2d" in after[0] and not any(op in after[0] for op in ("sub", "mul")), after


def test_conv_batchnorm_relu_without_a_pool_stays_one_epilogue():
    """No pool after it: folding would save no pass (the BatchNorm + ReLU are one kernel with
    the layout copy), so the BatchNorm stays there."""
    model = randomised(nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU()))
    x = torch.randn(2, 32, 12, 12)
    with torch.no_grad():
        check(model, x, **TOL)
    graph = compiled_graph(model, x)
    after = [n for n in graph.kernels if n in graph.wrapper_source.split("torch.convolution(")[1]]
    assert len(after) == 1 and "relu" in after[0] and "sub" in after[0], after


def test_resnet_stem_relu_goes_into_the_max_pool():
    """conv -> BN -> ReLU -> max pool: the ReLU is read inline by the pooling's windows, one
    kernel after the convolution."""
    model = randomised(nn.Sequential(nn.Conv2d(3, 16, 7, stride=2, padding=3), nn.BatchNorm2d(16), nn.ReLU(),
                                     nn.MaxPool2d(3, stride=2, padding=1)))
    x = torch.randn(2, 3, 40, 40)
    with torch.no_grad():
        check(model, x, **TOL)
    graph = compiled_graph(model, x)
    after = [n for n in graph.kernels if n in graph.wrapper_source.split("torch.convolution(")[1]]
    assert len(after) == 1 and "max_pool2d" in after[0] and "relu" in after[0], list(graph.kernels)


def test_any_per_channel_chain_folds():
    """Not only BatchNorm: (conv * s - t) + u with [C, 1, 1] parameters, in either operand order,
    before a max pool."""
    conv = nn.Conv2d(8, 6, 3, bias=False)
    s, t, u = (torch.randn(6, 1, 1) for _ in range(3))

    def f(x):
        return nn.functional.max_pool2d(u + (s * conv(x) - t), 2)
    x = torch.randn(2, 8, 9, 9)
    with torch.no_grad():
        check(f, x, **TOL)
    graph = compiled_graph(f, x)
    after = [n for n in graph.kernels if n in graph.wrapper_source.split("torch.convolution(")[1]]
    assert not any(op in name for name in after for op in ("mul", "sub", "add")), after   # (a layout copy at most)


def test_left_alone_when_the_convolution_is_read_twice():
    conv = nn.Conv2d(4, 5, 3)
    scale = torch.randn(5, 1, 1)

    def f(x):
        y = conv(x)
        return y * scale, y
    with torch.no_grad():
        check(f, torch.randn(2, 4, 7, 7), **TOL)


def test_training_batchnorm_is_not_folded():
    """A training BatchNorm scales by its batch's statistics, computed from the convolution's
    own output: not foldable. Loss, the input's and every parameter's gradient, and the
    running statistics as eager's (two copies of the model: each call updates its buffers)."""
    import copy
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).train()
    model = copy.deepcopy(eager)
    x = torch.randn(4, 3, 10, 10)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = eager(xe).square().sum()
    expected.backward()
    torch._dynamo.reset()
    loss = miniinductor.compile(lambda x: model(x).square().sum())(xc)
    loss.backward()
    torch.testing.assert_close(loss, expected, **TOL)
    torch.testing.assert_close(xc.grad, xe.grad, **TOL)
    # the convolution's bias gradient is exactly 0 under a training BatchNorm (it subtracts the
    # batch mean): both sides hold rounding noise of sums the size of the weight's gradient,
    # so absolute errors are measured against the largest gradient (1e-4 of it)
    scale = max(p.grad.abs().max().item() for p in eager.parameters())
    for (name, a), b in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-4 * scale, msg=lambda m, name=name: f"{name}: {m}")
    torch.testing.assert_close(model[1].running_mean, eager[1].running_mean, **TOL)
    torch.testing.assert_close(model[1].running_var, eager[1].running_var, **TOL)


def test_eval_batchnorm_gradients_with_respect_to_the_input():
    """Eval BatchNorm in a graph that needs the input's gradient (a frozen backbone under
    fine-tuning): outputs and the input's gradient as eager's."""
    model = randomised(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()))
    x = torch.randn(2, 3, 10, 10, requires_grad=True)
    check_grads(lambda x: model(x).square().sum(), x, **TOL)


def test_max_pool_of_a_relu_pools_first():
    """max_pool(relu(x)) computed as relu(max_pool(x)), one kernel: the same values, a NaN
    in a window NaN either way, windows of negatives 0 either way."""
    def f(x):
        return nn.functional.max_pool2d(torch.relu(x), 3, stride=2, padding=1)
    x = torch.randn(2, 8, 11, 11)
    x[0, 1, 4, 4] = float("nan")
    x[1, 2, :5, :5] = -torch.rand(5, 5) - 0.1   # every window of this corner negative
    with torch.no_grad():
        check(f, x, rtol=0, atol=0)
    graph = compiled_graph(f, x)
    assert len(graph.kernels) == 1 and "relu" in next(iter(graph.kernels)), list(graph.kernels)


def test_max_pool_of_a_relu_in_training_keeps_its_order():
    """In training the pooling's indices feed the backward (they differ at ties among the
    ReLU's zeros): not rewritten; the input's gradient as eager's."""
    def f(x):
        return nn.functional.max_pool2d(torch.relu(x), 2).square().sum()
    x = torch.randn(2, 4, 8, 8, requires_grad=True)
    check_grads(f, x)
