"""The C++ kernels' own float32 exp (cpp_prelude.h, `mi_expf`): accurate to Sleef's bound over
a dense sweep of inputs and at every edge (-inf, +inf, NaN, the underflow and overflow
thresholds, tiny values), and a masked softmax with -inf in it, against eager, with every
buffer the compiled code allocates poisoned. Then the explicit vectors of pointwise kernels
(ext/cpu_fast/vec.py): sizes below, at and above a vector with tails, at both vector widths, NaN
and infinities, every op the vector path maps, broadcasts along and across the inner loop, and
which kernels take the path (a plain pointwise one) and which fall back (a gather, a transpose, a
reduction)."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import check, compile_fn, extension_on, requires_miniinductor

import miniinductor
from miniinductor import compile_fx
from miniinductor.lowering import graph as lowering_graph
from miniinductor.runtime import cpp_builder

pytestmark = requires_miniinductor
#: the explicit vectors' tests (the exp's run with every extension off too: the core's kernels call it)
fast = pytest.mark.skipif(not extension_on("cpu_fast"), reason="explicit vectors: extension cpu_fast")

FLT_MIN = torch.finfo(torch.float32).tiny
#: Sleef's expf (ATen's Vectorized<float>::exp) is within 1 ulp of the exact exp; ours (its
#: algorithm with a degree-6 polynomial of our own) measured 1.06 ulp over all 2^32 float32
#: inputs; 1.5 ulp leaves room for a compiler's other contraction of the fmas, and is far
#: below what a wrong coefficient or a lost low part of ln2 gives (~1e2 ulp)
MAX_ULP = 1.5


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


# --------------------------------------------------------------------------- explicit vectors
@pytest.fixture(params=[16, 8], ids=["512-bit", "256-bit"])
def lanes(request, monkeypatch):
    """Kernels built with vectors of 16 floats (AVX-512) or 8, whatever this CPU's ATen uses."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512" if request.param == 16 else "AVX2")
    cpp_builder.vector_lanes.cache_clear()
    cpp_builder.vector_width_flags.cache_clear()
    yield request.param
    cpp_builder.vector_lanes.cache_clear()
    cpp_builder.vector_width_flags.cache_clear()


def with_policy(monkeypatch, **fields):
    original = lowering_graph.policy_for
    policy_for = lambda *args: dataclasses.replace(original(*args), **fields)   # noqa: E731
    monkeypatch.setattr(lowering_graph, "policy_for", policy_for)
    monkeypatch.setattr(compile_fx, "policy_for", policy_for)
    torch._dynamo.reset()


def specials(x):
    flat = x.clone().view(-1)
    for k, v in zip((0, flat.numel() // 2, flat.numel() - 1), (float("nan"), float("inf"), float("-inf"))):
        flat[k] = v   # first, middle, last (the tail's last element)
    return flat.view(x.shape)


def every_vector_op(x, y, b):
    """The ops with a vector form, x and y [rows, n], b [n] (along the inner loop) and the rows'
    first column (across it: a splat)."""
    col = x[:, :1]
    a = torch.maximum(x, y) - torch.minimum(x * 2, b) / (y.abs() + 1) + (-x)
    c = torch.where(x > y, torch.exp(x), torch.sigmoid(y)) * torch.relu(b - col)
    d = torch.where((x <= 0) & ~(y == b) | (x != x), x.square(), torch.rsqrt(y.abs() + 1))
    e = (x >= b).float() + (y < col).float() + torch.floor(x) - torch.ceil(y) + torch.trunc(b) + torch.round(x)
    return a + c, d + e.reciprocal(), torch.sqrt(x.abs()), torch.isnan(y).float() + torch.exp(-x.abs())


@fast
@pytest.mark.parametrize("n", [1, 7, 17, 1000003])
def test_every_vector_op_with_tails(poisoned_buffers, lanes, n):
    rows = 3 if n < 1000 else 1
    x, y, b = torch.randn(rows, n), torch.randn(rows, n), torch.randn(n)
    check(every_vector_op, x, y, b)
    check(every_vector_op, specials(x), specials(y), specials(b))
    if n >= lanes:
        assert all(k.source.count("mi_vload") for k in miniinductor.explain(every_vector_op, x, y, b).kernels)


@fast
def test_symbolic_length(poisoned_buffers):
    """One kernel generic in the length: its loop bound and whole steps are decided at run time."""
    compiled = compile_fn(every_vector_op, dynamic=True)
    for n in (40, 17, 1, 1031):
        check(every_vector_op, torch.randn(2, n), torch.randn(2, n), specials(torch.randn(n)), compiled=compiled)


@fast
@pytest.mark.parametrize("n", [7, 17, 1031])
def test_libmvec_calls(poisoned_buffers, n):
    fn = lambda x: (torch.tanh(x) + torch.erf(x) + torch.log1p(x.abs()) + torch.sin(x),)   # noqa: E731
    x = specials(torch.randn(3, n))
    check(fn, x, rtol=1e-5, atol=1e-5)
    (kernel,) = miniinductor.explain(fn, x).kernels
    # [3, n] contiguous: one loop of 3n (its dims merged where n is not a whole number of vectors)
    length = n if n % cpp_builder.vector_lanes() == 0 else 3 * n
    assert ("mi_v_tanh(" in kernel.source) == (length >= cpp_builder.vector_lanes()), kernel.source


@fast
@pytest.mark.parametrize("n", [7, 17, 1031])
def test_reductions_beside_vector_kernels(poisoned_buffers, n):
    """Reductions keep their lane loops (not explicit vectors); their epilogues may not."""
    def fn(x):
        return x.sum(-1), x.amax(-1), x.amin(-1), torch.softmax(x, -1), x - x.mean(-1, keepdim=True)
    check(fn, torch.randn(5, n), rtol=1e-4, atol=1e-5)
    check(fn, specials(torch.randn(5, n)), rtol=1e-4, atol=1e-5)


@fast
def test_which_kernels_take_explicit_vectors(monkeypatch):
    def vectorized(fn, *args) -> list[bool]:
        check(fn, *args)
        kernels = miniinductor.explain(fn, *args).kernels
        assert all("// explicit vectors (cpp_vec.py): " in k.source for k in kernels)
        return [("explicit vectors (cpp_vec.py): yes" in k.source) == ("mi_vload" in k.source) == ("mi_vstore" in k.source)
                and "mi_vload" in k.source for k in kernels]

    assert vectorized(lambda x, y: x * 2 + y, torch.randn(1000), torch.randn(1000)) == [True]
    assert vectorized(lambda w, i: w[i] * 2, torch.randn(100, 64), torch.randint(0, 100, (7,))) == [False]
    assert vectorized(lambda x: x.t() + 1, torch.randn(64, 48)) == [True]   # x's layout: loops reordered
    assert vectorized(lambda x: (x.t() + 1).contiguous(), torch.randn(64, 48)) == [False]   # a tiled transpose
    assert vectorized(lambda x: x.sum(-1), torch.randn(8, 100)) == [False]
    assert vectorized(lambda x: torch.tanh(x) + 1, torch.randn(1000)) == [True]
    assert vectorized(lambda x: x.to(torch.int32) + 1, torch.randn(1000)) == [False]
    assert vectorized(lambda x: x + torch.arange(1000), torch.randn(1000)) == [False]   # index arithmetic along it
    channels_last = torch.randn(2, 32, 5, 6).contiguous(memory_format=torch.channels_last)
    assert vectorized(lambda x: torch.relu(x) * 2, channels_last) == [True]   # reordered: vectors along C
    with_policy(monkeypatch, explicit_vectors=False)
    assert vectorized(lambda x, y: x * 2 + y, torch.randn(1000), torch.randn(1000)) == [False]


@fast
@pytest.mark.parametrize("c", [16, 24, 64])
def test_scalars_beside_vectors(poisoned_buffers, lanes, c):
    """Values constant along the vectors' index stay scalars: a pooling window's bounds checks
    and divisor (channels-last: vectors along C), a mask of the row index. C=24 leaves a tail."""
    import torch.nn.functional as F
    x = specials(torch.randn(2, c, 9, 11)).contiguous(memory_format=torch.channels_last)
    pools = lambda x: (F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2, 1, 1, count_include_pad=False))   # noqa: E731
    check(pools, x)
    rows = lambda x: torch.where(torch.arange(x.shape[0])[:, None] % 3 == 1, x * 2, x.exp())   # noqa: E731
    y = specials(torch.randn(10, 4 * c))
    check(rows, y)
    for fn, arg in ((pools, x), (rows, y)):
        for kernel in miniinductor.explain(fn, arg).kernels:
            assert "explicit vectors (cpp_vec.py): yes" in kernel.source and "mi_vload(" in kernel.source, kernel.source
