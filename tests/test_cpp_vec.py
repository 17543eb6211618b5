"""The C++ kernels' own float32 exp (cpp_prelude.h, `mi_expf`): accurate to Sleef's bound over
a dense sweep of inputs and at every edge (-inf, +inf, NaN, the underflow and overflow
thresholds, tiny values), and a masked softmax with -inf in it, against eager, with every
buffer the compiled code allocates poisoned."""
from __future__ import annotations

import pytest
import torch
from conftest import check, requires_miniinductor

import miniinductor

pytestmark = requires_miniinductor

FLT_MIN = torch.finfo(torch.float32).tiny
#: Sleef's expf (ATen's Vectorized<float>::exp) is within 1 ulp of the exact exp; ours, the same
#: polynomial with the scale by 2^q done on the exponent bits, measured 1.24 ulp over all 2^32
#: float32 inputs; 2 ulp leaves room for a compiler's other contraction of the fmas, and is
#: still far below what a wrong coefficient or a lost low part of ln2 gives (~1e2 ulp)
MAX_ULP = 2.0


def exp_inputs() -> torch.Tensor:
    specials = [float("-inf"), float("inf"), float("nan"), 0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45,
                -87.5, -87.3365478515625, -87.33654022216796875, -87.3365325927734375, -103.97, -104.0,
                -1e4, 88.72283172607421875, 88.722839355468750, 88.8, 1e4, 3.4e38, -3.4e38]
    # every 4099th float32 bit pattern (all exponents, signs, NaN payloads), and a dense sweep
    # of the range where exp is neither 0 nor inf
    bits = torch.arange(-2**31, 2**31 - 1, 4099, dtype=torch.int64).to(torch.int32).view(torch.float32)
    dense = torch.linspace(-90.0, 90.0, 1_000_003)
    return torch.cat([torch.tensor(specials), bits, dense, dense.nextafter(torch.tensor(0.0))])


def test_exp_is_within_sleef_ulp_bound_everywhere():
    x = exp_inputs()
    result = miniinductor.explain(torch.exp, x)
    assert "mi_exp(" in result.kernels[0].source, result.kernels[0].source
    got, exact = result.outputs, torch.exp(x.double())
    assert got.isnan().equal(x.isnan())
    normal = exact.abs() >= FLT_MIN
    # results that would be denormal are 0 (as at::vec's exp_u20): off by less than FLT_MIN
    assert ((got[~normal & ~x.isnan()].double() - exact[~normal & ~x.isnan()]).abs() < FLT_MIN).all()
    finite = normal & (exact < torch.finfo(torch.float32).max)
    ulp = torch.ldexp(torch.ones_like(exact), torch.frexp(exact)[1] - 24)
    err = ((got.double() - exact).abs() / ulp)[finite]
    assert err.max() <= MAX_ULP, (err.max(), x[finite][err.argmax()])
    # the overflow threshold is exact: the largest float with a finite exp, and the next one
    assert got[torch.isinf(exact.float())].isinf().all() and torch.isfinite(got[finite]).all()
    edges = miniinductor.compile(torch.exp)(torch.tensor([float("-inf"), float("inf"), -104.0, -1e4, 1e4]))
    assert edges.tolist() == [0.0, float("inf"), 0.0, 0.0, float("inf")]


@pytest.mark.parametrize("seq", [7, 33, 128])
def test_causal_masked_softmax(poisoned_buffers, seq):
    """Attention scores masked with -inf above the diagonal (every row's exp sees -inf), fused
    with the scale and the mask, then with a NaN in a query (its rows NaN, as eager's)."""
    mask = torch.ones(seq, seq, dtype=torch.bool).tril()

    def fn(q, k):
        scores = (q @ k.transpose(-1, -2)) * 0.125
        scores = scores.masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, -1), torch.sigmoid(scores), torch.exp(scores - 80)

    q, k = torch.randn(2, 4, seq, 32), torch.randn(2, 4, seq, 32)
    check(fn, q, k)
    q[0, 0, 0] = float("nan")
    check(fn, q, k)
