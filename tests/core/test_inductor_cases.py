"""Cases where Inductor's own test suite or the OpInfo gradients found us wrong (issue 34).

Restated in our words from what PyTorch's `test/inductor/test_torchinductor.py` checks
(`test_adaptive_avg_pool_with_output_size_0`, `test_as_strided`,
`test_conv2d_backward_channels_last`, `test_div_by_zero`, `test_insignificant_strides`),
plus `linalg.eigvalsh`'s gradient on an empty batch and `max_pool2d` compiled once for
every size. Each case compiles with miniinductor, runs eager on its own copies of fresh
random inputs (conftest's `check`, `check_grads`), and compares values, dtypes, shapes and
the strides of every dim longer than 1; some also compare every stride (below).

Tolerances, where not conftest's float32 defaults (1.3e-6 relative, 1e-5 absolute):
  * exact where both sides run the same arithmetic: ATen's convolution backward (an extern
    call handed eager's strides), as_strided (a view: no arithmetic), a division by zero
    (one IEEE operation: inf, -inf or NaN exactly, NaNs compared equal), max pooling (picks
    values; its backward adds gradients in eager's order, tests/core/test_pooling.py);
  * eigvalsh: LAPACK in both, its backward `V diag(g) V^T` in our matmuls: 1e-5.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import TEST_OPTIONS, check, check_grads, clone_inputs, extension_on, metrics, randn, requires_miniinductor

import miniinductor

pytestmark = requires_miniinductor   # reads miniinductor.metrics
aten = torch.ops.aten
EXACT = dict(rtol=0, atol=0)
generic_sizes = pytest.mark.skipif(TEST_OPTIONS.get("cpu_backend") == "triton",
                                   reason="Triton kernels are compiled per shape (tests/core/test_dynamic.py)")


def compiled(fn, **kwargs):
    return torch.compile(fn, backend="miniinductor", options=TEST_OPTIONS or None, **kwargs)


def same_strides_everywhere(fn, *args, **kwargs):
    """check(), and every output's strides equal to eager's, size-1 dims included: what a
    caller reading `.stride()` sees (eager's are well defined for the cases here: a view's
    size-1 dim takes the next dim's stride times its size, as_strided's the one it is given)."""
    out = check(fn, *args, compiled=compiled(fn, **kwargs))
    expected = fn(*clone_inputs(args))
    for k, (a, e) in enumerate(zip(*(o if isinstance(o, tuple) else (o,) for o in (out, expected)))):
        assert a.stride() == e.stride(), f"output {k}: strides {a.stride()} != eager {e.stride()}"


# ----------------------------------------------------------------------------- adaptive pooling
@pytest.mark.parametrize("module, shape", [
    (nn.AdaptiveAvgPool1d(0), (1, 2)),
    (nn.AdaptiveAvgPool2d(0), (1, 2, 3)),
    (nn.AdaptiveAvgPool2d((0, 2)), (2, 3, 5, 4)),
], ids=["1d", "2d", "2d_0x2"])
def test_adaptive_avg_pool_output_size_0(module, shape):
    """No windows: an empty result (eager has no gradient for it: its backward refuses an
    empty grad_output)."""
    check(module, randn(*shape))
    assert not metrics().fallback_ops, metrics().fallback_ops


def lowered_fallbacks() -> list[str]:
    """The ops that ran in ATen for want of a lowering, but the pooling backwards where the
    pool_grad extension (which lowers them) is off: ATen runs them then, by design."""
    return [op for op in metrics().fallback_ops if extension_on("pool_grad") or not ("pool" in op and "backward" in op)]


def test_adaptive_avg_pool_empty_batch():
    check_grads(nn.AdaptiveAvgPool2d((2, 3)), randn(0, 3, 5, 7, requires_grad=True))
    assert not lowered_fallbacks(), metrics().fallback_ops


# ----------------------------------------------------------------------------- as_strided
def _channels_last(*shape):
    return randn(*shape).to(memory_format=torch.channels_last)


AS_STRIDED = {   # name: (fn, input)
    # a plain reshaping of an input, and of a value computed from it
    "contiguous": (lambda x: (x.as_strided((8, 8, 64), (512, 64, 1)),
                              (x + 1).as_strided((8, 8, 64), (512, 64, 1)) + 2), randn(64, 64)),
    # the memory as_strided reads must be laid out as eager's: x + 1 of a channels-last x
    # is channels-last (stored NCHW, every element came from elsewhere)
    "channels_last": (lambda x: ((x * 2).as_strided((2, 6, 2, 3, 4), (216, 1, 108, 36, 6)) - 1,
                                 x.as_strided((2, 6, 2, 3, 4), (216, 1, 108, 36, 6))),
                      _channels_last(2, 6, 6, 6)),
    "overlapping": (lambda x: ((x * 2).as_strided((5, 4), (1, 2), 3),
                               (x - 1).as_strided((3, 3), (0, 1)) + 1), randn(6, 8)),
    "of_a_transpose": (lambda x: (x + 1).t().as_strided((3, 3), (3, 1), 2), randn(6, 8)),
    "of_a_slice": (lambda x: (x + 1)[2:].as_strided((3, 5), (4, 1)), randn(6, 8)),
    "of_a_permuted_channels_last": (lambda x: (x * 2).permute(0, 2, 3, 1).as_strided((2, 3, 4, 5), (60, 20, 5, 1)),
                                    _channels_last(2, 5, 3, 4)),
    "input_with_offset": (lambda x: x.as_strided((4, 4), (8, 1), 5) * 2, randn(6, 8)),
    "of_a_reduction": (lambda x: x.sum(1).as_strided((2, 2), (1, 3), 1), randn(3, 2, 4)),
}


@pytest.mark.parametrize("case", AS_STRIDED)
def test_as_strided(case):
    fn, x = AS_STRIDED[case]
    out = check(fn, x, **EXACT) if case != "of_a_reduction" else check(fn, x)
    for k, (a, e) in enumerate(zip(*(o if isinstance(o, tuple) else (o,) for o in (out, fn(x))))):
        assert a.stride() == e.stride(), f"output {k}: strides {a.stride()} != eager {e.stride()}"


# ----------------------------------------------------------------------------- convolution backward
def _conv_backward(grad_output, x, weight):
    return aten.convolution_backward(grad_output, x, weight, [weight.shape[0]], [1, 1], [0, 0], [1, 1],
                                     False, [0, 0], 1, [True, True, True])


@pytest.mark.parametrize("layouts", ["weight", "input", "all"])
def test_conv2d_backward_channels_last(layouts):
    """A [320, 2048, 1, 1] channels-last weight's size-1 dims have strides 2048: handed to ATen
    as [2048, 1, 1, 1] (the same memory), it read as contiguous, and ATen computed the
    input's gradient another way (1.7e-5 off)."""
    grad_output, x, weight = randn(2, 320, 8, 8), randn(2, 2048, 8, 8), randn(320, 2048, 1, 1)
    if layouts in ("weight", "all"):
        weight = weight.to(memory_format=torch.channels_last)
    if layouts in ("input", "all"):
        grad_output, x = (t.to(memory_format=torch.channels_last) for t in (grad_output, x))
    out = check(_conv_backward, grad_output, x, weight, **EXACT)
    for name, a, e in zip(("input", "weight", "bias"), out, _conv_backward(grad_output, x, weight)):
        assert a.stride() == e.stride(), f"grad of {name}: strides {a.stride()} != eager {e.stride()}"


# ----------------------------------------------------------------------------- division by zero
def _float_by_zero(x, zero, neg_zero):
    zeros = torch.zeros_like(x)
    return (x / 0.0, x / -0.0, zeros / 0.0, x / zeros, x / -zeros, zeros / zeros,
            x / zero, x / neg_zero, zero / neg_zero,
            x // zero, torch.div(x, neg_zero, rounding_mode="trunc"), torch.remainder(x, zero))


@pytest.mark.parametrize("n", [10, 37, 1000])   # short of a vector; vectors and a tail
def test_div_by_zero_float(n):
    x, zero = randn(n), torch.zeros(n)
    x[0] = 0.0                                   # 0 / 0 too
    check(_float_by_zero, x, zero, -zero, **EXACT)


def _int_true_div(a, b):
    return torch.div(a, b), a / b, torch.true_divide(a, 0), a / 0.0, torch.div(a, b * 0)


@pytest.mark.parametrize("n", [10, 37])
def test_div_by_zero_int_true_division(n):
    """Integer tensors divided (true division) by zero: float inf, -inf and NaN, as eager.
    (Integer floor division by zero raises in eager: nothing to compare there.)"""
    a, b = torch.randint(-5, 6, (n,)), torch.randint(-2, 3, (n,))
    a[0], b[0] = 0, 0
    check(_int_true_div, a, b, **EXACT)


def test_negative_zero_constant_keeps_its_sign():
    """-0.0 splatted into a vector of the C++ kernels stayed -0.0 (0 + -0.0 is +0.0)."""
    def fn(x):
        return torch.where(x > 0, x, -0.0), x * 0.0 - 0.0, 1.0 / torch.full_like(x, -0.0)
    x = randn(1000)
    out, expected = compiled(fn)(x), fn(x)
    for k, (a, e) in enumerate(zip(out, expected)):
        assert torch.equal(torch.signbit(a), torch.signbit(e)), f"output {k}: signs of zeros differ"


# ----------------------------------------------------------------------------- insignificant strides
INSIGNIFICANT = {   # eager's strides of a size-1 dim, which ours must give too
    "view_of_computed": (lambda x: (x + 1).view(-1, 1, 2), lambda: torch.arange(8, dtype=torch.float32)),
    "view_of_input": (lambda x: x.view(-1, 1, 2), lambda: randn(8)),
    "unsqueeze": (lambda x: (x * 2).unsqueeze(1).unsqueeze(-1), lambda: randn(4, 5)),
    "as_strided_size1_stride": (lambda x: (x + 1).as_strided((4, 1, 2), (2, 7, 1)), lambda: randn(8)),
    "expand": (lambda x: (x + 1).expand(3, 1, 4), lambda: randn(1, 1, 4)),
    "keepdim_of_transpose": (lambda x: x.amax(-1, keepdim=True), lambda: randn(3, 4).t()),
}


@pytest.mark.parametrize("case", INSIGNIFICANT)
def test_insignificant_strides(case):
    fn, make = INSIGNIFICANT[case]
    same_strides_everywhere(fn, make())


@generic_sizes
def test_insignificant_strides_dynamic():
    """(x + 1).view(-1, 1, 2) with symbolic sizes: the size-1 dim's stride is 2 for every size."""
    fn = INSIGNIFICANT["view_of_computed"][0]
    compiled_fn = compiled(fn, dynamic=True)
    for n in (8, 12, 20):
        x = randn(n)
        out, expected = compiled_fn(x), fn(x)
        torch.testing.assert_close(out, expected, **EXACT)
        assert out.stride() == expected.stride(), (n, out.stride(), expected.stride())
    assert metrics().specializations == 0


# ----------------------------------------------------------------------------- eigvalsh's gradient
@pytest.mark.parametrize("shape", [(0, 5, 5), (4, 0, 0), (3, 5, 5)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh_gradient(shape, uplo):
    """An empty batch's saved eigenvectors were copied by a kernel whose loop over the
    empty dim was left out (its C++ then named an undeclared variable)."""
    a = randn(*shape)
    x = (a + a.mT).requires_grad_()
    check_grads(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), x, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- max_pool2d, dynamic
@generic_sizes
@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 0), (3, 2, 1), (3, 2, 0)], ids=["k2s2", "k3s2p1", "k3s2"])
def test_max_pool2d_dynamic_compiles_once(kernel, stride, padding, ceil_mode):
    """Whether a window may hang over the input's end was asked of SymPy as a Python bool
    (`s53 <= 2*((s53//2)) - 1` undecided): the graph was compiled once per shape. Now it is
    asked of the ShapeEnv, and a window not proved inside is checked as it is read."""
    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, ceil_mode=ceil_mode)
    compiled_fn = compiled(fn, dynamic=True)
    for h in (9, 12, 17):
        x = randn(2, 3, h, h + 1)
        check_grads(fn, x.requires_grad_(), compiled=compiled_fn, **EXACT)
    assert metrics().specializations == 0, "compiled once per shape"
    assert metrics().graphs_compiled == 2, "one forward and one backward for every shape"
    assert not [op for op in lowered_fallbacks() if "pool" in op], metrics().fallback_ops


@generic_sizes
def test_max_pool2d_dynamic_with_miniinductor_compile():
    fn = nn.MaxPool2d(3, 2, 1, ceil_mode=True)
    compiled_fn = miniinductor.compile(fn, dynamic=True, **TEST_OPTIONS)
    for h in (10, 13, 21):
        check_grads(fn, randn(1, 4, h, 2 * h, requires_grad=True), compiled=lambda x: compiled_fn(x), **EXACT)
    assert metrics().specializations == 0 and metrics().graphs_compiled == 2
