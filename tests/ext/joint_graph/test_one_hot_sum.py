"""ext/joint_graph/rewrites.sum_of_one_hot: the backward of a cross-entropy sums nll_loss's one-hot
gradient over each row; the rewrite replaces that pass over [rows, vocab] by the one value
per row. Gradients against eager (a NaN output gradient included), and the row sum gone from
the graph."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import check_grads, compile_fn, extension_on, requires_miniinductor

from miniinductor.compile_fx import collect_compiled

pytestmark = [requires_miniinductor,
              pytest.mark.skipif(not extension_on("joint_graph"), reason="the joint_graph extension is off")]
ROWS, VOCAB = 6, 1000
# float32 log-softmax gradients: exp and a subtraction from different (but equally exact) row
# statistics than eager's; bfloat16 outputs are compared by conftest's bfloat16 rule
TOL = dict(rtol=1e-4, atol=1e-5)


def row_sums(graphs) -> list:
    """The backward graph's sums over a [rows, vocab] tensor."""
    backward = graphs[-1].graph.module.graph
    return [n for n in backward.find_nodes(op="call_function", target=torch.ops.aten.sum.dim_IntList)
            if list(n.args[0].meta["val"].shape) == [ROWS, VOCAB]]


@pytest.mark.parametrize("backend", ["cpp", pytest.param("triton", marks=pytest.mark.sweep)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kwargs", [{}, {"ignore_index": 2}, {"reduction": "sum"}, {"reduction": "none"}, "weight"])
def test_cross_entropy_gradients_without_the_row_sum(backend, dtype, kwargs):
    weighted = kwargs == "weight"   # a class weight varies along the row: the sum is a real one, left alone
    if weighted:
        kwargs = {"weight": torch.rand(VOCAB, dtype=dtype) + 0.5}
    x = torch.randn(ROWS, VOCAB, dtype=dtype, requires_grad=True)
    t = torch.randint(0, VOCAB, (ROWS,))
    t[1] = 2    # the ignored row, where ignore_index=2

    def fn(x, t):
        return F.cross_entropy(x, t, **kwargs)
    with collect_compiled() as graphs:
        check_grads(fn, x, t, compiled=compile_fn(fn, cpu_backend=backend), **(TOL if dtype == torch.float32 else {}))
    assert len(row_sums(graphs)) == weighted


def test_nan_output_gradients_give_nan_rows():
    x, t = torch.randn(ROWS, VOCAB, requires_grad=True), torch.randint(0, VOCAB, (ROWS,))
    grad = torch.randn(ROWS)
    grad[4] = float("nan")

    def fn(x, t):
        return F.cross_entropy(x, t, reduction="none")
    (expected,) = torch.autograd.grad(fn(x, t), x, grad)
    with collect_compiled() as graphs:
        (actual,) = torch.autograd.grad(compile_fn(fn)(x, t), x, grad)
    assert row_sums(graphs) == []
    assert expected[4].isnan().all() and not expected[:4].isnan().any()
    torch.testing.assert_close(actual, expected, equal_nan=True, **TOL)


def test_a_sum_along_another_dim_is_left_alone():
    """The one-hot is along dim 1; a sum over dim 0 of the same product is a real sum."""
    def fn(x, t, g):
        hot = torch.zeros_like(x).scatter(1, t[:, None], -1.0) * g[:, None]
        return hot.sum(0), hot.sum(1)
    x, t, g = torch.randn(ROWS, VOCAB), torch.randint(0, VOCAB, (ROWS,)), torch.randn(ROWS, requires_grad=True)
    with collect_compiled() as graphs:
        check_grads(fn, x, t, g, compiled=compile_fn(fn), **TOL)
    forward = graphs[0].graph.module.graph
    sums = forward.find_nodes(op="call_function", target=torch.ops.aten.sum.dim_IntList)
    assert [n.args[1] for n in sums] == [[0]]


def test_a_sum_of_a_scalar_is_left_alone():
    """A 0-d sum (logsumexp of a scalar over dim 0) has no row: the rewrite passes it by (it
    divided by the rank, 0, and the compile failed: OpInfo's logsumexp gradient sample 0)."""
    fn = lambda x: torch.logsumexp(x, 0, keepdim=True) * 3   # noqa: E731
    check_grads(fn, torch.randn((), requires_grad=True), compiled=compile_fn(fn), **TOL)
