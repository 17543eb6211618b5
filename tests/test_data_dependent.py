"""Graphs whose sizes depend on tensor data (Dynamo's unbacked symbols u0, u1, ...).

Our lowering sizes every buffer statically, so such a graph runs eagerly, and says which op
made its sizes data-dependent; before, these crashed inside the compiler (a guard on u0, or
`int + None` while sizing a buffer). Each case is compared with eager, forward and, where the
op is differentiable, backward; inputs are fresh random values with both signs, so masks
select a data-dependent count.
"""
import logging

import pytest
import torch

import miniinductor  # noqa: F401  (registers the backend)

CASES = {
    "nonzero": (lambda x: torch.nonzero(x > 0).float().sum(0) * 2, "aten.nonzero"),
    "masked_select": (lambda x: x[x > 0] * 3, "aten.index.Tensor"),
    "item_then_arange": (lambda x: torch.arange(int((x > 0).sum().item())) * x.sum(), "aten._local_scalar_dense"),
    "repeat_interleave": (lambda x: torch.repeat_interleave(x, (x > 0).long() + 1) + 1, "aten.repeat_interleave"),
    "split_by_tensor": (lambda x: [p * 2 for p in torch.split(x, [int((x > 0).sum().item()), int((x <= 0).sum().item())])],
                        "aten._local_scalar_dense"),
}


@pytest.fixture
def data_dependent_capture(monkeypatch):
    monkeypatch.setattr(torch._dynamo.config, "capture_scalar_outputs", True)
    monkeypatch.setattr(torch._dynamo.config, "capture_dynamic_output_shape_ops", True)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", CASES)
def test_data_dependent_graph_runs_eagerly_and_names_the_op(name, data_dependent_capture, caplog):
    fn, op = CASES[name]
    x = torch.randn(16)
    x[0], x[1] = 1.5, -1.5                 # at least one of each sign
    with caplog.at_level(logging.WARNING, logger="miniinductor"):
        out = torch.compile(fn, backend="miniinductor", fullgraph=True)(x)
    ref = fn(x)
    for a, b in zip(out if isinstance(out, list) else [out], ref if isinstance(ref, list) else [ref]):
        torch.testing.assert_close(a, b)
    assert f"data-dependent sizes (from {op}" in caplog.text, caplog.text


def test_data_dependent_graph_gradients(data_dependent_capture):
    fn = CASES["masked_select"][0]
    x = torch.randn(32, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    grad = torch.randn(int((x > 0).sum()))
    torch.compile(fn, backend="miniinductor")(x).backward(grad)
    fn(x_ref).backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad)
    assert x.grad.abs().sum() > 0
