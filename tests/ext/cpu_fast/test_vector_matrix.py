"""A single row times a matrix on the CPU (lowering/matmul.vector_matrix): `x [1, K] @ w.t()`
becomes a reduction kernel of ours, with the bias and the activation fused in, instead of
a BLAS call; outputs and gradients against eager, and which shapes take the path."""
from __future__ import annotations

import pytest
import torch
from conftest import check, check_grads, extension_on, requires_miniinductor

import miniinductor
from miniinductor.ext.cpu_fast import VECTOR_MATRIX_MAX

pytestmark = [requires_miniinductor, pytest.mark.skipif(not extension_on("cpu_fast"), reason="the C++ kernels' fast forms: extension cpu_fast")]

# float32 dot products of up to 1024 terms summed in another order than BLAS's
TOL = dict(rtol=1e-4, atol=1e-5)


def externs(fn, *inputs):
    """The ATen matmul calls left in `fn`'s wrappers (and the outputs checked against eager)."""
    result = miniinductor.explain(fn, *inputs)
    torch.testing.assert_close(result.outputs, fn(*inputs), **TOL)
    return sum(cg.wrapper_source.count(call) for cg in result.graphs
               for call in ("torch.addmm(", "torch.mm(", "torch._addmm_activation("))


def mlp(width, layers=3, bias=True):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width, bias=bias), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods).eval()


@pytest.mark.parametrize("width", [1, 7, 64, 257])
@pytest.mark.parametrize("bias", [True, False])
def test_batch1_mlp_is_our_kernels(width, bias):
    model = mlp(width, bias=bias)
    with torch.no_grad():
        assert externs(model, torch.randn(1, width)) == 0
        check(model, torch.randn(1, width), **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_addmm_alpha_beta_and_mm(dtype):
    w, b = torch.randn(96, 80, dtype=dtype), torch.randn(96, dtype=dtype)

    def fn(x):
        return (torch.addmm(b, x, w.t(), beta=0.5, alpha=2.0), torch.addmm(b, x, w.t(), beta=0),
                torch.mm(x, w.t()).tanh())
    x = torch.randn(1, 80, dtype=dtype)
    assert externs(fn, x) == 0
    check(fn, torch.randn(1, 80, dtype=dtype), **TOL)


def test_nan_and_inf_propagate():
    w = torch.randn(16, 32)
    x = torch.randn(1, 32)
    x[0, 3], w[5, 7] = float("nan"), float("inf")
    check(lambda x, w: torch.mm(x, w.t()), x, w, **TOL)


@pytest.mark.parametrize("case", ["two rows", "weight read across k", "too big", "integers"])
def test_other_matmuls_stay_aten(case):
    if case == "two rows":
        fn, inputs = (lambda x, w: x @ w.t()), (torch.randn(2, 64), torch.randn(48, 64))
    elif case == "weight read across k":   # w [K, N] row-major: the reduction would stride by N
        fn, inputs = (lambda x, w: x @ w), (torch.randn(1, 64), torch.randn(64, 48))
    elif case == "too big":
        k = 1024
        n = VECTOR_MATRIX_MAX // k + 1
        fn, inputs = (lambda x, w: x @ w.t()), (torch.randn(1, k), torch.randn(n, k))
    else:
        fn, inputs = (lambda x, w: x @ w.t()), (torch.randint(-5, 5, (1, 64)), torch.randint(-5, 5, (48, 64)))
    assert externs(fn, *inputs) == 1


def test_training_batch1_gradients():
    """The forward's addmm is our kernel; the backward's matmuls (w's gradient an outer
    product, x's a row times w read across k) stay ATen: every gradient against eager."""
    model = mlp(48).train()
    x = torch.randn(1, 48, requires_grad=True)
    compiled = miniinductor.compile(model)
    check_grads(model, x, compiled=compiled, **TOL)
    out = compiled(torch.randn(1, 48))
    out.sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_symbolic_row_count_stays_aten():
    """With a dynamic batch the row count is a symbol: ATen, whatever it is at run time."""
    model = mlp(32, layers=1)
    compiled = miniinductor.compile(model, dynamic=True)
    with torch.no_grad():
        for rows in (1, 3, 5):
            x = torch.randn(rows, 32)
            torch.testing.assert_close(compiled(x), model(x), **TOL)
