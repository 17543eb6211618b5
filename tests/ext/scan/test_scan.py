"""Scans (ext/scan): cumsum, cumprod and logcumsumexp compiled into our kernels, on both
backends (C++, and Triton through its interpreter), against eager.

Each test draws fresh random inputs (non-zero: randn, or integers in [-4, 4] without 0) and
checks that the compiled graph has no ATen scan left in it, and eager's values, dtypes and
strides. Tolerances: a scan of n float32 values rounds n times, each time by at most half an
ulp of the running value; eager's CPU kernel accumulates float32 in double (exact to our
precision), ours in float (C++: in order; Triton: in a tree), so the difference is bounded
by about n ulps of the largest running value (`float_tol`). float16/bfloat16 accumulate in
float32 on both sides and round each output once: at most one ulp of the output apart.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton decorates anything

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import extension_on  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.compile_fx import collect_compiled  # noqa: E402

pytestmark = pytest.mark.skipif(not extension_on("scan"), reason="the scan extension is off")

BACKENDS = {"cpp": {}, "triton": {"cpu_backend": "triton"}}
SCANS = {"cumsum": torch.cumsum, "cumprod": torch.cumprod, "logcumsumexp": torch.logcumsumexp}
EPS32 = torch.finfo(torch.float32).eps


def float_tol(n: int, scale: float) -> dict:
    """n roundings of a running value of magnitude up to `scale`, an ulp (eps * scale) each."""
    return dict(rtol=n * EPS32, atol=n * EPS32 * scale)


def compile_and_check(fn, *args, backend="cpp", **tol):
    """`fn` compiled with miniinductor on `backend`: its result against eager's (values,
    dtype and strides); returns the compiled graphs' wrapper sources."""
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        out = miniinductor.compile(fn, **BACKENDS[backend])(*args)
    expected = fn(*args)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if out.numel():
        assert out.stride() == expected.stride()
    torch.testing.assert_close(out, expected, **tol)
    sources = [g.wrapper_source for g in graphs]
    assert not any(f"aten.{op}" in s for s in sources for op in (*SCANS, "flip")), "a scan ran as an ATen call"
    return sources, graphs


def _input(shape, scan):
    """randn; for cumprod values near 1 (products of hundreds stay in range)."""
    x = torch.randn(shape)
    return 1 + 0.02 * x if scan == "cumprod" else x


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_of_softmax_is_one_scan_kernel(backend):
    """The issue's case: the softmax's max and sum and the scan of its output share one kernel
    (scan_fusion), which reads each row once."""
    x = torch.randn(16, 300)
    sources, graphs = compile_and_check(lambda x: torch.cumsum(x.softmax(-1), -1), x, backend=backend,
                                        **float_tol(300, 1.0))
    names = [k for g in graphs for k in g.kernels]
    assert len(names) == 1 and "cumsum" in names[0], names


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,dim", [((6, 300), 0), ((3, 5000), 1)])
def test_softmax_scans_that_cannot_share_its_kernel(backend, shape, dim):
    """Along the first dim, or rows longer than one block: the scan is a kernel of its own."""
    x = torch.randn(shape)
    n = shape[dim]
    compile_and_check(lambda x: torch.cumsum(x.softmax(dim), dim), x, backend=backend, **float_tol(n, 1.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_every_scan_along_every_dim(backend, scan, dim):
    """A 3-d input scanned along each dim (the first two: strided loads along the scan)."""
    x = _input((6, 37, 20), scan)
    n = x.shape[dim]
    scale = 4 * n ** 0.5 if scan == "cumsum" else 2.0 if scan == "cumprod" else 2 + n ** 0.5
    compile_and_check(lambda x: SCANS[scan](x * 2, dim), x, backend=backend, **float_tol(n, scale))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_transposed_input_keeps_eager_strides(backend):
    x = torch.randn(40, 24)
    compile_and_check(lambda x: torch.cumsum(x.t() + 1, 1), x, backend=backend, **float_tol(40, 50.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,dim", [((50,), 0), ((1, 30), 1), ((7, 1), 1), ((1,), 0), ((0, 5), 1), ((4, 0), 1)])
def test_rank_one_size_one_and_empty(backend, shape, dim):
    x = torch.randn(shape)
    compile_and_check(lambda x: torch.cumsum(x, dim) + torch.logcumsumexp(x, dim), x, backend=backend,
                      **float_tol(max(shape), 40.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.bool])
def test_integers_and_bools_scan_to_int64(backend, dtype):
    """Exact: integer sums; cumprod of int8 values in [-4, 4] (no 0) wraps as eager's int64 does."""
    x = torch.randint(1, 5, (5, 33)) * (torch.randint(0, 2, (5, 33)) * 2 - 1)
    x = (x > 0) if dtype == torch.bool else x.to(dtype)
    compile_and_check(lambda x: torch.cumsum(x, 1) + torch.cumprod(x, 1), x, backend=backend, rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dtype_argument(backend):
    x = torch.randint(1, 9, (4, 25), dtype=torch.int32)
    compile_and_check(lambda x: torch.cumsum(x, 1, dtype=torch.float64), x, backend=backend, rtol=0, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_accumulates_in_float32(backend, dtype):
    """At most one ulp of the output apart (both accumulate in float32, round once)."""
    x = torch.randn(6, 200).to(dtype)
    ulp = torch.finfo(dtype).eps
    compile_and_check(lambda x: torch.cumsum(x, 1), x, backend=backend, rtol=ulp, atol=ulp)
    compile_and_check(lambda x: torch.logcumsumexp(x, 1), x, backend=backend, rtol=ulp, atol=ulp)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_longer_than_one_block_are_looped(backend):
    """Triton: 5000 > PERSISTENT_REDUCTION_MAX, so the row is scanned a block at a time with a
    carried prefix (C++: the same loop as any row)."""
    x = torch.randn(3, 5000)
    sources, graphs = compile_and_check(lambda x: torch.cumsum(x, 1), x, backend=backend,
                                        **float_tol(5000, 4 * 5000 ** 0.5))
    if backend == "triton":
        assert any(k.startswith("triton_red_fused_cumsum") for g in graphs for k in g.kernels)
    y = 1 + 0.001 * torch.randn(2, 4500)
    compile_and_check(lambda y: torch.logcumsumexp(y, 1) + torch.cumprod(y, 1), y, backend=backend,
                      **float_tol(4500, 20.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_backward_gives_eager_gradients(backend):
    """Autograd's backward of cumsum is flip(cumsum(flip(grad))): one scan kernel of ours."""
    x = torch.randn(8, 120, requires_grad=True)
    weight = torch.randn(8, 120)

    def loss(x):
        return (torch.cumsum(x.softmax(-1), 1) * weight).sum()
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        (grad,) = torch.autograd.grad(miniinductor.compile(loss, **BACKENDS[backend])(x), x)
    (expected,) = torch.autograd.grad(loss(x), x)
    torch.testing.assert_close(grad, expected, **float_tol(120, 8 * 120 ** 0.5))
    backward = [g for g in graphs if g.context.name == "backward"]
    assert backward and not any("aten.cumsum" in g.wrapper_source or "aten.flip" in g.wrapper_source
                                for g in backward)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_algorithms_change_nothing(backend):
    """Scans are deterministic: under use_deterministic_algorithms they compile the same and
    give the same bits twice."""
    x = torch.randn(8, 64)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first, _ = compile_and_check(lambda x: torch.cumsum(x, 1), x, backend=backend, **float_tol(64, 32.0))
        out1 = miniinductor.compile(lambda x: torch.cumsum(x, 1), **BACKENDS[backend])(x)
        out2 = miniinductor.compile(lambda x: torch.cumsum(x, 1), **BACKENDS[backend])(x)
    finally:
        torch.use_deterministic_algorithms(previous)
    assert torch.equal(out1, out2)


def test_with_the_extension_off_scans_run_as_aten_calls():
    x = torch.randn(4, 10)
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        out = miniinductor.compile(lambda x: torch.cumsum(x, 1), extensions=())(x)
    torch.testing.assert_close(out, torch.cumsum(x, 1))
    assert "aten.cumsum" in graphs[0].wrapper_source


def test_the_ir_interpreter_evaluates_scans():
    """ir/interpreter.py (the accuracy debugger's reference) computes a Scan as torch's scan."""
    from miniinductor.ir.interpreter import graph_outputs, run_graph
    x = torch.randn(5, 9)

    def fn(x):
        return torch.cumsum(x * 2, 1), torch.logcumsumexp(x, 0), torch.cumprod(x.flip(1), 1)
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        miniinductor.compile(fn)(x)
    outputs = graph_outputs(graphs[0].graph, run_graph(graphs[0].graph, [x]))
    for value, expected in zip(outputs, fn(x)):
        torch.testing.assert_close(value, expected, **float_tol(9, 10.0))
