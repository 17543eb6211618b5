"""The `freezing` extension (ext/freezing/freeze.py): for inference, parameters become
constants and what depends on them alone is folded at compile time.

Freezing must really fold (fewer graph inputs, constants holding the folded values, the
weight's transpose and the `scale * 2` gone from the compiled graph) and still match eager
on fresh inputs; with gradients needed it must do nothing and say so once. With autocast,
the folded weights are stored in low precision.

Tolerances: float32 results use assert_close's defaults (folding runs the same ATen ops,
only earlier). bfloat16 results use conftest's bf16 tolerance (two bf16 ulps, rtol 1.6e-2):
the matmuls see the same bf16 operands as eager under autocast, but our fused pointwise
kernels compute in float32 and round once where eager may round between ops.
"""
from __future__ import annotations

import copy
import logging
import re

import pytest
import torch
import torch.nn as nn
from conftest import check, extension_on
from test_autocast import BF16_TOL, aten_code, compile_once, mlp, under_autocast

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.ext.freezing import freeze
from miniinductor.tools.models import GPT2Block

pytestmark = pytest.mark.skipif(not extension_on("freezing"), reason="the freezing extension is off")
TRANSPOSE = re.compile(r"aten\.(t|permute)\.default")   # a linear's t(weight), decomposed or not


class ScaledLinear(nn.Module):
    """relu(x @ W.T + b) * (scale * 2): a weight to transpose and a buffer to scale."""

    def __init__(self, n_in=16, n_out=8):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)
        self.register_buffer("scale", torch.rand(n_out) + 0.5)

    def forward(self, x):                     # [N, n_in] -> [N, n_out]
        return torch.relu(self.lin(x)) * (self.scale * 2)


def test_freezing_folds_parameters_into_constants():
    model = ScaledLinear().eval()
    x = torch.randn(4, 16)
    _, plain = compile_once(model, x)
    compiled, frozen = compile_once(model, x, freezing=True)

    # without freezing: weight, bias, x and scale are inputs, t(weight) and scale * 2 run per call
    assert len(plain.graph.graph_input_names) == 4 and not plain.graph.constants
    assert TRANSPOSE.search(aten_code(plain)) and "reinterpret(" in plain.wrapper_source
    assert str(plain.graph).count("ops.mul") == 2
    # with freezing: only x is an input; the transpose and the scaling were done at compile time
    assert len(frozen.graph.graph_input_names) == 1
    assert not TRANSPOSE.search(aten_code(frozen)) and "reinterpret(" not in frozen.wrapper_source
    assert str(frozen.graph).count("ops.mul") == 1
    constants = list(frozen.graph.constants.values())
    assert any(torch.equal(c, model.scale * 2) for c in constants), "scale * 2 was not folded"
    assert any(torch.equal(c, model.lin.weight.t()) for c in constants), "t(weight) was not folded"

    with torch.no_grad():   # fresh inputs, second call: the frozen inputs are dropped from each call
        check(model, torch.randn(4, 16), compiled=compiled)


def test_freezing_preset_and_torch_compile_options_fold_too():
    model = ScaledLinear().eval()
    x = torch.randn(3, 16)
    for compiled in (miniinductor.compile(model, preset="freezing"),
                     torch.compile(model, backend="miniinductor", options={"freezing": True})):
        torch._dynamo.reset()
        with torch.no_grad(), collect_compiled() as graphs:
            check(model, x, compiled=compiled)
        assert graphs[0].graph.config.freezing and len(graphs[0].graph.graph_input_names) == 1


def test_a_folded_parameter_changed_after_compiling_is_not_seen():
    """The documented caveat (as in Inductor): constants were computed at compile time."""
    model = ScaledLinear().eval()
    x = torch.randn(4, 16)
    compiled, _ = compile_once(model, x, freezing=True)
    with torch.no_grad():
        before = model(x)
        model.scale.mul_(3)
        torch.testing.assert_close(compiled(x), before)
        assert not torch.allclose(model(x), before)


def test_freezing_gpt2_block_matches_eager():
    block = GPT2Block(d_model=64, n_head=4, max_seq=32).eval()
    x = torch.randn(2, 16, 64)
    _, plain = compile_once(block, x)
    compiled, cg = compile_once(block, x, freezing=True)
    assert len(plain.graph.graph_input_names) == 14 and len(cg.graph.graph_input_names) == 1
    # the four linear layers' weight transposes were folded (the attention's permutes remain)
    assert len(TRANSPOSE.findall(aten_code(plain))) - len(TRANSPOSE.findall(aten_code(cg))) == 4
    with torch.no_grad():
        # matmul results are the same ATen calls; the fused layer norms and softmax may
        # sum in another order, so allow a few float32 ulps of a value of size ~10
        check(block, torch.randn(2, 16, 64), compiled=compiled, rtol=1e-4, atol=1e-4)


def test_freezing_keeps_mutated_buffers_as_inputs():
    """BatchNorm in training mode under no_grad updates its running statistics: those
    buffers must stay inputs (as in Inductor), or the second call would read stale ones."""
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8)).train()
    eager = copy.deepcopy(model)
    torch._dynamo.reset()
    compiled = miniinductor.compile(model, freezing=True)
    with torch.no_grad(), collect_compiled() as graphs:
        for _ in range(3):
            x = torch.randn(5, 6)
            torch.testing.assert_close(compiled(x), eager(x))
    bn, bn_eager = model[1], eager[1]
    torch.testing.assert_close(bn.running_mean, bn_eager.running_mean)
    torch.testing.assert_close(bn.running_var, bn_eager.running_var)
    assert bn.num_batches_tracked.item() == 3
    # the linear's weight and bias and the batch norm's affine weight and bias were frozen;
    # x, running_mean, running_var and num_batches_tracked stay inputs
    assert len(graphs[0].graph.graph_input_names) == 4


class ConvBN(nn.Module):
    """conv -> BatchNorm -> ReLU, then a conv whose output is also read beside its BatchNorm."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.register_buffer("column_scale", torch.rand(10) + 0.5)   # one value per column, not per channel
        for bn in (self.bn1, self.bn2):
            bn.weight.data.normal_()
            bn.bias.data.normal_()
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2)

    def forward(self, x):                                           # [N, 3, H, 10]
        z = self.conv2(torch.relu(self.bn1(self.conv1(x))))
        return self.bn2(z) + z * self.column_scale


def test_freezing_folds_eval_batch_norm_into_the_convolution():
    """Eval BatchNorm after a convolution is (x - mean) * invstd * weight + bias by constants:
    freezing folds it into the convolution's weight and bias (Inductor's binary folding).
    Not where the convolution's output is read elsewhere too, nor a scale that is not one
    value per channel."""
    model = ConvBN().eval()
    x = torch.randn(2, 3, 6, 10)
    _, plain = compile_once(model, x)
    compiled, frozen = compile_once(model, x, freezing=True)
    subs = lambda cg: aten_code(cg).count("aten.sub.Tensor")   # noqa: E731  (one per BatchNorm)
    assert subs(plain) == 2 and subs(frozen) == 1, aten_code(frozen)
    assert aten_code(frozen).count("aten.convolution.default") == 2
    bn = model.bn1
    scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach()
    folded_weight = model.conv1.weight.detach() * scale[:, None, None, None]
    folded_bias = (bn.bias - bn.running_mean * scale).detach()
    constants = list(frozen.graph.constants.values())
    for want, what in ((folded_weight, "weight"), (folded_bias, "bias")):
        assert any(c.shape == want.shape and torch.allclose(c, want, rtol=1e-5, atol=1e-6) for c in constants), \
            f"conv1's folded {what} is not among the constants"
    with torch.no_grad():   # folding rounds the products in another order: float32 ulps
        for _ in range(2):
            check(model, torch.randn(2, 3, 6, 10), compiled=compiled, rtol=1e-5, atol=1e-5)


def test_freezing_is_ignored_when_gradients_are_needed(caplog):
    freeze._say_once.cache_clear()
    model = ScaledLinear()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 16)
    torch._dynamo.reset()
    with caplog.at_level(logging.WARNING, logger="miniinductor"), collect_compiled() as graphs:
        out = miniinductor.compile(model, freezing=True)(x)
        out.sum().backward()
        torch._dynamo.reset()
        miniinductor.compile(nn.Linear(3, 3), freezing=True)(torch.randn(2, 3)).sum().backward()
    said = [r for r in caplog.records if "freezing is for inference" in r.getMessage()]
    assert len(said) == 1, "the user is told once, not once per graph"
    assert [g.graph.name for g in graphs[:2]] == ["forward", "backward"]
    assert not graphs[0].graph.constants and len(graphs[0].graph.graph_input_names) == 4
    ref = reference(x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(model.lin.weight.grad, reference.lin.weight.grad)


# ------------------------------------------------------------------ with autocast
def test_autocast_with_freezing_stores_weights_in_low_precision():
    model = mlp()
    x = torch.randn(8, 32)
    compiled, cg = compile_once(model, x, autocast_enabled=True, freezing=True)
    # only the input's cast is left in the graph; the weights' and biases' were folded
    assert aten_code(cg).count("_to_copy.default(") == 1
    constants = list(cg.graph.constants.values())
    assert all(c.dtype == torch.bfloat16 for c in constants) and len(constants) == 4
    assert any(torch.equal(c, model[0].weight.to(torch.bfloat16).t()) for c in constants)
    with torch.no_grad():
        out = check(under_autocast(model), torch.randn(8, 32), compiled=compiled, **BF16_TOL)
    assert out.dtype == torch.bfloat16
