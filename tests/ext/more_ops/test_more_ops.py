"""ext/more_ops: the ops the core alone runs as ATen calls, decomposed into ops it lowers.

Every op tagged both core and pointwise is lowered or decomposed (enumerated from the
installed torch); the activations (ReLU6 through hardtanh, ELU, SELU, leaky ReLU), min/max
along a dim with their indices (ties included), group norm after a convolution in training,
and 3-d max pooling: each compiled, on the C++ backend and Triton (interpreted on the CPU),
outputs and gradients against eager, with no fallback left in any graph (the census).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import check, check_grads, compile_fn, extension_on, requires_miniinductor

from miniinductor.capture.decompositions import decomposition_table
from miniinductor.compile_fx import collect_compiled
from miniinductor.lowering.registry import find_lowering
from miniinductor.tools.debug.census import census

pytestmark = [requires_miniinductor,
              pytest.mark.skipif(not extension_on("more_ops"), reason="the more_ops extension is off")]
BACKENDS = ["cpp", pytest.param("triton", marks=pytest.mark.sweep)]
aten = torch.ops.aten
#: core and pointwise ops with no sensible kernel: none so far (random ops are not tagged pointwise)
NOT_LOWERED: set[str] = set()


def core_pointwise_overloads():
    for name in dir(aten):
        packet = getattr(aten, name)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags and torch.Tag.pointwise in op.tags and overload != "out":
                yield op


def test_every_core_pointwise_op_is_lowered_or_decomposed():
    table = decomposition_table(True, "cpp", None)
    ops = list(core_pointwise_overloads())
    assert len(ops) > 50   # the enumeration found the tagged ops
    missing = [str(op) for op in ops if find_lowering(op) is None and op not in table and str(op) not in NOT_LOWERED]
    assert missing == []


def compiled_without_fallbacks(fn, backend):
    """fn compiled; `.graphs` holds every graph it compiles, for `no_fallbacks`."""
    graphs = []

    def call(*args):
        with collect_compiled() as found:
            out = compiled(*args)
        graphs.extend(found)
        return out
    compiled = compile_fn(fn, cpu_backend=backend)
    call.graphs = graphs
    return call


def no_fallbacks(compiled):
    assert compiled.graphs and census(compiled.graphs) == {}


def activations(x):
    return (F.relu6(x), F.hardtanh(x, -0.5, 0.25), F.elu(x), F.elu(x, alpha=0.3), F.selu(x),
            F.celu(x, alpha=2.0), F.leaky_relu(x), F.leaky_relu(x, 0.2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_activations_forward_and_gradients(backend):
    # values across both sides of every kink (ReLU6's 6 included); pointwise, so eager's
    # float32 tolerances (conftest's defaults) hold: expm1 is libm's or libdevice's
    x = (torch.randn(4, 33) * 4).requires_grad_()
    compiled = compiled_without_fallbacks(activations, backend)
    check_grads(lambda x: activations(x), x, compiled=compiled)
    no_fallbacks(compiled)


def min_max(x):
    v, i = x.max(1)
    w, j = x.min(-1, keepdim=True)
    return v, i, w, j, torch.max(x, 0).values


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_max_dim_values_indices_and_ties(backend):
    # few distinct values: most rows hold their extreme twice or more, and the index must be
    # the first, as eager's; exact (a selection, no arithmetic)
    ties = torch.randint(1, 4, (5, 7, 6)).float()
    compiled = compiled_without_fallbacks(min_max, backend)
    check(min_max, ties, compiled=compiled)
    x = torch.randn(5, 7, 6, requires_grad=True)
    check_grads(lambda x: min_max(x)[0].sum() + min_max(x)[2].sum() * 2, x,
                compiled=compiled_without_fallbacks(lambda x: min_max(x)[0].sum() + min_max(x)[2].sum() * 2, backend))
    no_fallbacks(compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_group_norm_after_a_convolution_trains_like_eager(backend):
    torch.manual_seed(torch.initial_seed() % 1000)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(4, 8), nn.ReLU6(), nn.Conv2d(8, 4, 3))
    x = torch.randn(2, 3, 10, 10, requires_grad=True)
    compiled = compiled_without_fallbacks(model, backend)
    # the group statistics are sums over 2 x 64 values, in another order than eager's: float32
    # sums of that length agree to about 1e-6 relative; the gradients (sums over the batch and
    # the image) to a few 1e-6 of their largest value
    check_grads(lambda x: model(x).square().sum(), x, compiled=lambda x: compiled(x).square().sum(),
                rtol=1e-4, atol=1e-4)
    no_fallbacks(compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool3d_with_indices(backend):
    x = torch.randn(2, 3, 6, 7, 8)

    def fn(x):
        return F.max_pool3d(x, 3, stride=2, padding=1, return_indices=True)
    compiled = compiled_without_fallbacks(fn, backend)
    check(fn, x, compiled=compiled)   # exact: a selection
    no_fallbacks(compiled)


def test_with_the_extension_off_the_ops_run_as_aten_calls():
    compiled = compile_fn(activations, extensions=[])
    with collect_compiled() as graphs:
        compiled(torch.randn(8))
    assert {"aten.hardtanh.default", "aten.elu.default", "aten.leaky_relu.default"} <= set(census(graphs))


def more_pointwise(a, b):
    return (torch.fmax(a, b), torch.fmin(a, b), torch.round(a * 10, decimals=2),
            torch.round(a * 1000, decimals=-2), a.flip(0, -1) * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fmax_fmin_round_decimals_flip(backend):
    a, b = torch.randn(6, 9), torch.randn(6, 9)
    a[0, :3], b[0, 1:4] = float("nan"), float("nan")   # NaN in one, the other, both
    compiled = compiled_without_fallbacks(more_pointwise, backend)
    check(more_pointwise, a, b, compiled=compiled)   # the same float32 operations as eager's kernels
    no_fallbacks(compiled)
    x = torch.randn(3, 4, 5, requires_grad=True)
    check_grads(lambda x: x.flip(1) * x, x, compiled=compile_fn(lambda x: x.flip(1) * x, cpu_backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_erfinv_as_aten_computes_it(backend, dtype):
    # ATen's rational guess and two Newton steps, the same formula in the same precision; the
    # steps' erf and exp are libm's / libdevice's, not eager's. erfinv's condition number
    # |y erfinv'(y) / erfinv(y)| is below 100 for |y| <= 0.999, so an ulp of difference in
    # the steps gives some 1e-5 relative in float32; float64 keeps the same margin of its ulp
    y = (torch.rand(500, dtype=dtype) * 1.998 - 0.999)
    edges = torch.tensor([1.0, -1.0, 1.5, -2.0, 0.0], dtype=dtype)   # +-inf, NaN past 1, 0
    fn = torch.erfinv
    compiled = compiled_without_fallbacks(fn, backend)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-14)
    check(fn, torch.cat([y, edges]), compiled=compiled, **tol)
    no_fallbacks(compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rrelu_in_eval_and_ldexp(backend):
    x, e = torch.randn(4, 9), torch.randint(-3, 4, (4, 9))

    def fn(x, e):   # rrelu out of training: the mean slope; ldexp: x * 2**e, exact in float32
        return F.rrelu(x, training=False), torch.ldexp(x, e)
    compiled = compiled_without_fallbacks(fn, backend)
    check(fn, x, e, compiled=compiled)
    no_fallbacks(compiled)


def pools(x):
    return (F.avg_pool3d(x, 3, 2, 1), F.avg_pool3d(x, 2), F.avg_pool3d(x, (2, 3, 2), (1, 2, 2), divisor_override=5),
            F.adaptive_avg_pool3d(x, (3, 7, 4)), F.adaptive_avg_pool3d(x, 1),
            *F.adaptive_max_pool2d(x[:, 0], (7, 2), return_indices=True),
            *F.adaptive_max_pool2d(x[:, 1], 1, return_indices=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_3d_average_and_adaptive_pooling(backend):
    # sums of at most 27 window values in another order than eager's kernel (float32: a few
    # ulps of the window's sum); the max pools are selections, exact
    x = torch.randn(2, 3, 6, 7, 8, requires_grad=True)
    compiled = compiled_without_fallbacks(pools, backend)
    with torch.no_grad():
        check(pools, x.detach(), compiled=compiled, rtol=1e-5, atol=1e-6)
    no_fallbacks(compiled)
    # training: the backwards (avg_pool3d_backward, adaptive_max_pool2d_backward) are ATen calls
    loss = lambda x: sum(p.float().sum() * (k + 1) for k, p in enumerate(pools(x)) if p.is_floating_point())  # noqa: E731
    check_grads(loss, x, compiled=compile_fn(loss, cpu_backend=backend), rtol=1e-5, atol=1e-5)


def test_avg_pool3d_it_cannot_express_runs_as_an_aten_call():
    x = torch.randn(1, 2, 5, 5, 5)

    def fn(x):   # padding left out of the count
        return F.avg_pool3d(x, 3, 2, 1, count_include_pad=False)
    with collect_compiled() as graphs:
        check(fn, x, compiled=compile_fn(fn))
    assert list(census(graphs)) == ["aten.avg_pool3d.default"]
