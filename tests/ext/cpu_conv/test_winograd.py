"""Winograd F(2x2, 3x3) convolutions on the CPU (ext/cpu_conv/winograd_kernel.py, ext/cpu_conv/winograd.py).

* The op against float64: its error is of the direct convolution's size on every shape
  (channel counts that do and do not fill a vector of 16, images of one tile, a bias or none,
  a weight with other strides), every output element written (a NaN-poisoned output), and the
  blocks of tiles (a small BLOCK_BYTES: many blocks and a partial last one) give the same result.
* Compiled: an eval conv -> BatchNorm -> ReLU takes the op (the wrapper calls it; its input is
  copied channels-last first) and matches eager; `winograd=False`, and the convolutions it does
  not fit (stride 2, 5x5, odd sizes, few channels, float64, a training graph), keep ATen's.

Tolerance: on randn inputs (values ~1, sums of up to 9 * 128 products scaled to outputs ~1) the
direct convolution's float32 error against float64 is 0.5-2e-6; Winograd's transforms add and
subtract a few more terms (measured 0.3-2.1e-6), so the op is held to 3x the direct error plus
1e-6, and compiled graphs to 1e-5 relative and absolute (tests/ext/layout/test_channels_last_conv.py's CONV_TOL).
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import TEST_OPTIONS, USING_MINIINDUCTOR, check, compile_fn, randn, skip_unless_extension

pytestmark = [pytest.mark.skipif(not USING_MINIINDUCTOR or TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                                 reason="miniinductor's C++ backend"), skip_unless_extension("cpu_conv")]
CONV_TOL = dict(rtol=1e-5, atol=1e-5)
SHAPES = [(8, 64, 32, 32, 64), (2, 20, 6, 10, 33), (1, 16, 2, 2, 16), (3, 128, 14, 14, 256), (5, 17, 30, 2, 19)]



@pytest.fixture(autouse=True)
def small_convolutions_qualify(monkeypatch):
    """The shapes here are small (fast tests): the op's size rule (MIN_TILES) is lifted, and
    the layout timing set to channels-last, which the op takes; `test_small_convolutions_stay_aten`
    checks the rule itself."""
    from miniinductor.ext.cpu_conv import winograd
    from miniinductor.ext.layout import channels_last
    monkeypatch.setattr(winograd, "MIN_TILES", 0)
    monkeypatch.setattr(channels_last, "channels_last_pays", lambda convs, value=None: True)


def test_small_convolutions_stay_aten(monkeypatch):
    """Fewer than MIN_TILES 2x2 output tiles: oneDNN's direct convolution (the [4, 32, 28, 28]
    block has 784); at MIN_TILES the op applies."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from miniinductor.config import Config
    from miniinductor.ext.cpu_conv import winograd
    monkeypatch.setattr(winograd, "MIN_TILES", 2048)
    conv = nn.Conv2d(32, 32, 3, padding=1)
    for shape, applies in (((4, 32, 28, 28), False), ((8, 32, 32, 32), True)):
        gm = make_fx(lambda x: conv(x))(torch.randn(shape))
        (node,) = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
        assert winograd.applies(node, Config()) == applies, shape

def errors(x, w, b, out):
    ref64 = F.conv2d(x.double(), w.double(), None if b is None else b.double(), padding=1)
    direct = F.conv2d(x, w, b, padding=1)
    return (out.double() - ref64).abs().max().item(), (direct.double() - ref64).abs().max().item()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("bias", [True, False])
def test_op_against_float64(shape, bias):
    from miniinductor.ext.cpu_conv.winograd_kernel import _out_like, winograd_conv3x3_out
    n, c, h, w, k = shape
    x, weight = randn(n, c, h, w), randn(k, c, 3, 3) / (3 * c ** 0.5)
    b = randn(k) if bias else None
    out = _out_like(x, k).fill_(float("nan"))     # poisoned: every element must be written
    winograd_conv3x3_out(x, weight, b, out)
    assert not out.isnan().any()
    ours, direct = errors(x, weight, b, out)
    assert ours <= 3 * direct + 1e-6, (ours, direct)


def test_weight_strides_and_input_layouts():
    """A transposed view of a weight and an NCHW input (copied channels-last inside) give the
    values of a contiguous weight and a channels-last input."""
    from miniinductor.ext.cpu_conv.winograd_kernel import winograd_conv3x3
    x, weight = randn(2, 16, 8, 8), randn(3, 3, 16, 24).permute(3, 2, 0, 1)   # [24, 16, 3, 3], strided
    got = winograd_conv3x3(x, weight, None)
    want = winograd_conv3x3(x.contiguous(memory_format=torch.channels_last), weight.contiguous(), None)
    assert got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    ours, direct = errors(x, weight, None, got)
    assert ours <= 3 * direct + 1e-6


def test_blocks_of_tiles(monkeypatch):
    """A block of 7 tiles (4 KB of V at 8 channels...): 98 tiles in 14 blocks, the last partial.
    MKL's products per block are the same row by row, so the result is too (to a few ulps)."""
    import miniinductor.ext.cpu_conv.winograd_kernel as wino
    x, weight, b = randn(2, 16, 14, 14), randn(24, 16, 3, 3), randn(24)
    whole = wino.winograd_conv3x3(x, weight, b)
    monkeypatch.setattr(wino, "BLOCK_BYTES", 16 * 4 * 24 * 7)
    blocked = wino.winograd_conv3x3(x, weight, b)
    torch.testing.assert_close(blocked, whole, rtol=1e-6, atol=1e-6)


def test_bad_input_names_the_rule():
    from miniinductor.ext.cpu_conv.winograd_kernel import winograd_conv3x3
    with pytest.raises(ValueError, match="even h, w"):
        winograd_conv3x3(randn(1, 16, 5, 6), randn(16, 16, 3, 3), None)


def conv_bn_relu(cin=32, cout=48, **conv):
    model = nn.Sequential(nn.Conv2d(cin, cout, 3, **{"padding": 1, **conv}), nn.BatchNorm2d(cout), nn.ReLU()).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    return model


def graph_of(fn, *args, **options):
    import miniinductor
    (cg,) = miniinductor.explain(fn, *args, **{**TEST_OPTIONS, **options}).graphs
    return cg


def test_compiled_conv_bn_relu():
    model, x = conv_bn_relu(), randn(4, 32, 12, 16)
    with torch.no_grad():
        check(model, x, **CONV_TOL)
        cg = graph_of(model, x)
    source = cg.wrapper_source
    assert "torch.ops.miniinductor.winograd_conv3x3.default(" in source and "aten.convolution" not in source, source
    assert cg.graph.layout_opt   # the op's input is copied channels-last by our kernel, its output read so


def test_option_off_keeps_aten():
    model, x = conv_bn_relu(), randn(2, 32, 8, 8)
    with torch.no_grad():
        check(model, x, compiled=compile_fn(model, winograd=False), **CONV_TOL)
        source = graph_of(model, x, winograd=False).wrapper_source
    assert "winograd" not in source and "aten.convolution" in source


@pytest.mark.parametrize("case", [
    ("stride 2", dict(stride=2), (2, 32, 8, 8), torch.float32),
    ("5x5", dict(kernel_size=5, padding=2), (2, 32, 8, 8), torch.float32),
    ("odd height", {}, (2, 32, 9, 8), torch.float32),
    ("3 channels in", dict(cin=3), (2, 3, 8, 8), torch.float32),
    ("float64", {}, (2, 32, 8, 8), torch.float64),
], ids=lambda c: c[0])
def test_convolutions_it_does_not_fit_stay_aten(case):
    _, conv, shape, dtype = case
    cin = conv.pop("cin", 32)
    if "kernel_size" in conv:
        model = nn.Sequential(nn.Conv2d(cin, 48, conv.pop("kernel_size"), **conv)).eval()
    else:
        model = conv_bn_relu(cin=cin, **conv)
    model = model.to(dtype)
    x = randn(*shape).to(dtype)
    with torch.no_grad():
        check(model, x, **CONV_TOL)
        source = graph_of(model, x).wrapper_source
    assert "winograd" not in source and "aten.convolution" in source


def test_training_graph_keeps_aten_and_gradients_match():
    model = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
    expected_model = copy.deepcopy(model)
    x = randn(2, 16, 8, 8, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    actual, expected = compile_fn(model)(x), expected_model(x_eager)
    torch.testing.assert_close(actual, expected, **CONV_TOL)
    grad = randn(2, 16, 8, 8)
    actual.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x.grad, x_eager.grad, **CONV_TOL)
    for p, e in zip(model.parameters(), expected_model.parameters()):
        torch.testing.assert_close(p.grad, e.grad, **CONV_TOL)
    assert "winograd" not in graph_of(copy.deepcopy(model), x).wrapper_source
