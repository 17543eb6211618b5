"""Graphs whose sizes depend on tensor data (Dynamo's unbacked symbols u0, u1, ...).

The op that makes a data-dependent size (nonzero, `.item()`, a boolean mask,
repeat_interleave by a tensor) runs in ATen; the wrapper reads the size from its result
(`u0 = buf1.size(0)`) and the rest of the graph is compiled around it, its kernels taking u0
as an argument like any size symbol -- one compile for every count. Where that cannot be
done, the whole graph runs eagerly and says which op made its sizes data-dependent (before,
these crashed inside the compiler). Each case is compared with eager on several fresh inputs
with both signs (so each makes another count), forward and, where the op is
differentiable, backward.
"""
import logging
import re

import pytest
import torch

import miniinductor  # noqa: F401  (registers the backend)
from miniinductor.compile_fx import collect_compiled

CASES = {
    "nonzero": (lambda x: torch.nonzero(x > 0).float().sum(0) * 2, "aten.nonzero"),
    "masked_select": (lambda x: x[x > 0] * 3, "aten.index.Tensor"),
    "item_then_arange": (lambda x: torch.arange(int((x > 0).sum().item())) * x.sum(), "aten._local_scalar_dense"),
    "repeat_interleave": (lambda x: torch.repeat_interleave(x, (x > 0).long() + 1) + 1, "aten.repeat_interleave"),
    "split_by_tensor": (lambda x: [p * 2 for p in torch.split(x, [int((x > 0).sum().item()), int((x <= 0).sum().item())])],
                        "aten._local_scalar_dense"),
}


@pytest.fixture
def data_dependent_capture():
    # torch's config modules have their own patch(); pytest's monkeypatch would delete the
    # attribute on undo (pytest 9.2 does), breaking every later test in the process
    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        torch._dynamo.reset()
        yield
        torch._dynamo.reset()


@pytest.mark.parametrize("name", CASES)
def test_data_dependent_op_runs_in_aten_and_the_rest_compiles(name, data_dependent_capture, caplog):
    fn, op = CASES[name]
    compiled = torch.compile(fn, backend="miniinductor", fullgraph=True)
    with caplog.at_level(logging.INFO, logger="miniinductor"), collect_compiled() as graphs:
        for n in (16, 16, 16, 23):
            x = torch.randn(n)
            x[0], x[1] = 1.5, -1.5                 # at least one of each sign
            out, ref = compiled(x), fn(x)
            for a, b in zip(out if isinstance(out, list) else [out], ref if isinstance(ref, list) else [ref]):
                torch.testing.assert_close(a, b)
    assert len(graphs) <= 2 and all(g.kernels for g in graphs), caplog.text   # (23: a new input size)
    assert f"{op}" in caplog.text and "ran in ATen (data-dependent sizes); the rest is compiled" in caplog.text
    symbols = re.findall(r"^    (u\d+) = buf\d+", graphs[0].wrapper_source, re.M)
    assert symbols, graphs[0].wrapper_source   # bound from the op's result, then passed to the kernels


def test_graph_that_cannot_be_compiled_around_runs_eagerly(data_dependent_capture, caplog, monkeypatch):
    """If compiling around the data-dependent op fails, the graph runs eagerly and says why."""
    from miniinductor.codegen import wrapper
    monkeypatch.setattr(wrapper.WrapperCodeGen, "generate", lambda *a, **k: 1 / 0)
    fn, op = CASES["nonzero"]
    x = torch.randn(16)
    with caplog.at_level(logging.WARNING, logger="miniinductor"):
        out = torch.compile(fn, backend="miniinductor", fullgraph=True)(x)
    torch.testing.assert_close(out, fn(x))
    assert f"data-dependent sizes (from {op}" in caplog.text and "ZeroDivisionError" in caplog.text


def test_data_dependent_graph_gradients(data_dependent_capture):
    fn = CASES["masked_select"][0]
    x = torch.randn(32, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    grad = torch.randn(int((x > 0).sum()))
    torch.compile(fn, backend="miniinductor")(x).backward(grad)
    fn(x_ref).backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad)
    assert x.grad.abs().sum() > 0
