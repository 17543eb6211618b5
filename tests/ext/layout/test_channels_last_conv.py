"""Channels-last convolutions on the CPU (ext/layout) and the pointwise kernels around them
(the loop nests extension cpu_fast writes for them: tests/ext/cpu_fast/test_cpp_tiles.py).

* An inference graph's 2-D convolutions take a channels-last input (a copy kernel, or a
  value stored channels-last in the first place) and return channels-last; outputs keep
  eager's strides (`check` compares them). Checked in the wrapper's text and in
  `GraphLowering.layout_opt`.
* ATen's own output strides where the input is NCHW too (one channel); freezing.
* Training graphs (gradients vs eager), symbolic sizes, Triton kernels on the CPU and
  `layout_optimization=False` keep NCHW; the zoo's ResNet in eval runs channels-last.
* Pointwise kernels on channels-last tensors: values for sizes that do and do not fill the
  16 x 16 tiles, low precision (a tile copied by a loop), a masked (padded) load.

fp32 tolerances: a channels-last convolution sums its 64 * 3 * 3 products in another order
than an NCHW one (oneDNN's blocking follows the layout): the outputs differ by a few ulps of
values of size ~10 (2.6e-6 absolute at [8, 64, 32, 32]), so those cases allow 1e-5 relative
and absolute (`check`'s fp32 default is 1.3e-6 relative).
"""
import copy
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import TEST_OPTIONS, USING_MINIINDUCTOR, check, compile_fn, randn, skip_unless_extension

pytestmark = [pytest.mark.skipif(not USING_MINIINDUCTOR or TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                                 reason="reads the C++ wrapper and kernels of miniinductor"), skip_unless_extension("layout")]
CONV_TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def aten_convolutions(monkeypatch):
    """These tests are about ATen's convolution run channels-last: Winograd (ext/cpu_conv/winograd.py,
    tests/ext/cpu_conv/test_winograd.py) would take their 3x3 ones."""
    monkeypatch.setitem(TEST_OPTIONS, "winograd", False)


@pytest.fixture(autouse=True)
def channels_last_wins(monkeypatch):
    """These tests are about what channels-last does once chosen: the timing that chooses it
    (timing.py, `test_decision_follows_the_timed_convolutions`) is set to say it pays."""
    from miniinductor.ext.layout import channels_last
    monkeypatch.setattr(channels_last, "channels_last_pays", lambda convs, value=None: True)


def conv_bn_relu(cin=16, cout=16):
    model = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    return model


def channels_last(*shape):
    return randn(*shape).to(memory_format=torch.channels_last)


def compiled_graphs(fn, *args, **options):
    import miniinductor
    return miniinductor.explain(fn, *args, **{**TEST_OPTIONS, **options}).graphs


def conv_inputs(cg) -> list:
    """The input of each convolution the graph calls: an InputBuffer, a buffer or a view of one."""
    from miniinductor.ir.nodes import ExternKernel
    return [b.args[0] for b in cg.graph.buffers if isinstance(b, ExternKernel) and b.op is torch.ops.aten.convolution.default]


def conv_input_strides(cg) -> list[tuple]:
    return [tuple(x.layout.stride) for x in conv_inputs(cg)]


def conv_weight_strides(cg) -> list[tuple]:
    from miniinductor.ir.nodes import ExternKernel
    return [tuple(b.args[1].layout.stride) for b in cg.graph.buffers
            if isinstance(b, ExternKernel) and b.op is torch.ops.aten.convolution.default]


@pytest.mark.parametrize("shape", [(2, 16, 12, 12), (3, 16, 7, 9)])
def test_conv_bn_relu_inference(shape):
    model = conv_bn_relu()
    with torch.no_grad():
        check(model, randn(*shape), **CONV_TOL)
        (cg,) = compiled_graphs(model, randn(*shape))
    n, c, h, w = shape
    assert cg.graph.layout_opt
    assert conv_input_strides(cg) == [(c * h * w, 1, w * c, c)], cg.wrapper_source
    assert conv_weight_strides(cg) == [(144, 1, 48, 16)], cg.wrapper_source   # [16, 16, 3, 3] channels-last
    allocated = (rf"= empty_strided_cpu\(\({n}, {c}, {h}, {w}\), \({c * h * w}, 1, {w * c}, {c}\)",   # Python wrapper
                 rf"= mi_empty\({{{n}, {c}, {h}, {w}}}, {{{c * h * w}, 1, {w * c}, {c}}}")          # C++ (cpp_wrapper)
    assert any(re.search(pattern, cg.wrapper_source) for pattern in allocated), cg.wrapper_source


def test_channels_last_input_is_not_copied():
    model = conv_bn_relu()
    with torch.no_grad():
        check(model, channels_last(2, 16, 10, 10), **CONV_TOL)
        (cg,) = compiled_graphs(model, channels_last(2, 16, 10, 10))
    from miniinductor.ir.nodes import InputBuffer
    assert [type(x) for x in conv_inputs(cg)] == [InputBuffer]   # the graph input itself
    before_conv = cg.wrapper_source.split("def call")[1].split("aten.convolution")[0]
    # the one buffer made before the convolution is the weight's copy, channels-last (as Inductor's)
    assert re.findall(r"empty_strided_cpu\(([^)]*\)), \(([^)]*)\)", before_conv) == [("(16, 16, 3, 3)", "144, 1, 48, 16")], \
        before_conv


def test_value_feeding_a_conv_is_stored_channels_last():
    """conv -> relu -> conv: the relu is stored channels-last at once (no copy kernel), and the
    second conv's output, the graph's, comes back NCHW as eager's."""
    conv1, conv2 = nn.Conv2d(8, 16, 3), nn.Conv2d(16, 8, 3, padding=1)

    def fn(x):
        return conv2(torch.relu(conv1(x)))
    x = randn(2, 8, 12, 12)
    with torch.no_grad():
        check(fn, x, **CONV_TOL)
        (cg,) = compiled_graphs(fn, x)
    assert conv_input_strides(cg) == [(8 * 144, 1, 96, 8), (16 * 100, 1, 160, 16)]
    assert len(cg.kernels) == 3, list(cg.kernels)   # copy x, relu, conv2's output back to NCHW


def test_freezing():
    model = conv_bn_relu()
    with torch.no_grad():
        check(model, randn(2, 16, 12, 12), compiled=compile_fn(model, freezing=True), **CONV_TOL)
        (cg,) = compiled_graphs(model, randn(2, 16, 12, 12), freezing=True)
    assert cg.graph.layout_opt and conv_input_strides(cg) == [(16 * 144, 1, 192, 16)]


def test_dynamic_shapes():
    """Symbolic sizes keep NCHW (layout.py); a graph specialised per shape is static."""
    model = conv_bn_relu()
    compiled = compile_fn(model, dynamic=True)
    with torch.no_grad():
        for n, h in [(2, 8), (3, 11), (4, 6)]:
            check(model, randn(n, 16, h, h), compiled=compiled, **CONV_TOL)
        for cg in compiled_graphs(model, randn(3, 16, 9, 9), dynamic=True):
            assert cg.graph.layout_opt == (not cg.graph.sizevars.symbolic)


def test_zoo_resnet_eval():
    from miniinductor.tools.zoo import ZOO
    entry = ZOO["resnet"]
    torch.manual_seed(0)
    model = entry.make_model(entry.config).eval()
    (args, _) = entry.make_inputs(entry.config, torch.Generator().manual_seed(1))
    with torch.no_grad():
        check(model, *args, **CONV_TOL)
        (cg,) = compiled_graphs(model, *args)
    assert cg.graph.layout_opt
    assert len(conv_inputs(cg)) == 6 and all(s[1] == 1 for s in conv_input_strides(cg))   # C: stride 1


def test_training_keeps_nchw_and_gradients_match():
    """conv -> BN (training) -> ReLU, backward: the forward and backward graphs are not
    inference graphs, so no layout change; gradients vs eager (fp32: convolution_backward's
    weight gradient sums 2 * 10 * 10 products, the BN backward's row sums 200 terms: 1e-5).
    The conv has no bias, as before a BatchNorm: its gradient would be a sum that is zero but
    for rounding (BN takes out the per-channel mean), ~1e-5 on either side."""
    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
    expected_model = copy.deepcopy(model)
    x = randn(2, 8, 10, 10, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    assert not any(g.graph.layout_opt for g in compiled_graphs(copy.deepcopy(model), x))
    expected, actual = expected_model(x_eager), compile_fn(model)(x)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected, **CONV_TOL)
    grad = randn(2, 8, 10, 10)
    expected.backward(grad)
    actual.backward(grad)
    torch.testing.assert_close(x.grad, x_eager.grad, **CONV_TOL)
    for (name, p), e in zip(model.named_parameters(), expected_model.parameters()):
        torch.testing.assert_close(p.grad, e.grad, **CONV_TOL, msg=lambda m: f"{name}: {m}")


def test_layout_optimization_off():
    model = conv_bn_relu()
    with torch.no_grad():
        (cg,) = compiled_graphs(model, randn(2, 16, 8, 8), layout_optimization=False)
    assert not cg.graph.layout_opt and conv_input_strides(cg) == [(16 * 64, 64, 8, 1)]


def test_which_backends():
    """C++ and GPU graphs; not Triton kernels on the CPU (tests/triton/test_gpu.py runs a GPU one)."""
    from miniinductor.codegen.policy import policy_for
    from miniinductor.config import Config
    assert policy_for(torch.device("cpu"), Config()).channels_last_conv
    assert not policy_for(torch.device("cpu"), Config(cpu_backend="triton")).channels_last_conv
    assert policy_for(torch.device("cuda"), Config()).channels_last_conv


# --------------------------------------------------------------------------- pointwise loop nests
@pytest.mark.parametrize("shape", [(2, 32, 4, 16), (2, 20, 5, 7), (1, 64, 1, 17), (2, 24, 3, 30)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transposing_pointwise(shape, dtype, poisoned_buffers):
    """channels-last in, NCHW out (and back), at sizes that do and do not fill the 16 x 16 tiles
    of extension cpu_fast's kernels (tests/ext/cpu_fast/test_cpp_tiles.py reads those)."""
    x = channels_last(*shape).to(dtype)
    s = randn(shape[1], 1, 1).to(dtype)
    to_nchw = lambda x, s: (x * s + 1).contiguous()   # noqa: E731
    to_nhwc = lambda x, s: (x * s + 1).contiguous(memory_format=torch.channels_last)   # noqa: E731
    check(to_nchw, x, s)
    check(to_nhwc, x.contiguous(), s)


def test_masked_load_in_a_transposing_kernel():
    """A padded read (its load masked where it falls outside x) is gathered, not tiled."""
    fn = lambda x: F.pad(x, (1, 1, 2, 0)).contiguous() * 2   # noqa: E731
    check(fn, channels_last(2, 32, 6, 14))


@pytest.mark.parametrize("x_shape, w_shape", [((2, 1, 8, 8), (4, 1, 3, 3)), ((2, 4, 1, 1), (8, 4, 1, 1)),
                                              ((1, 4, 5, 5), (8, 4, 3, 3)), ((2, 3, 8, 8), (1, 3, 3, 3))])
def test_conv_output_strides_as_aten_gives_them(x_shape, w_shape):
    """One input channel: the input is NCHW and channels-last at once, and ATen returns NCHW;
    1x1 images, one image, one output channel. The ExternKernel's strides are ATen's (else the
    wrapper's check_layout copies the output on every call)."""
    w = randn(*w_shape)
    fn = lambda x: F.conv2d(x, w).relu()   # noqa: E731
    x = randn(*x_shape)
    with torch.no_grad():
        check(fn, x, **CONV_TOL)
        (cg,) = compiled_graphs(fn, x)
    from miniinductor.ir.nodes import ExternKernel
    (conv,) = [b for b in cg.graph.buffers if isinstance(b, ExternKernel)]
    expected = F.conv2d(x.contiguous(memory_format=torch.channels_last), w).stride()
    assert all(a == b for a, b, n in zip(conv.layout.stride, expected, conv.layout.size) if n != 1)


@pytest.mark.parametrize("faster", ["nchw", "channels_last"])
def test_decision_follows_the_timed_convolutions(monkeypatch, faster):
    """The layout is the one whose convolution calls take less time (timing.py):
    each convolution of the graph is timed in both layouts, with its own sizes and
    parameters (a transposed 3-D one included). The timer is replaced here: the times are set."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from miniinductor.ext.layout import timing
    calls = []

    def fake_time(x_shape, w_shape, has_bias, params, dtype, device, channels_last):
        calls.append((x_shape, params[3], channels_last))
        return 1.0 if channels_last == (faster == "channels_last") else 2.0
    monkeypatch.setattr(timing, "_conv_time", fake_time)
    conv, up = nn.Conv2d(4, 8, 3), nn.ConvTranspose3d(2, 2, 3)
    gm = make_fx(lambda x, y: (conv(x), up(y)))(randn(2, 4, 9, 9), randn(1, 2, 4, 4, 4))
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert timing.channels_last_pays(convs) == (faster == "channels_last")
    assert calls == [((2, 4, 9, 9), False, False), ((2, 4, 9, 9), False, True),
                     ((1, 2, 4, 4, 4), True, False), ((1, 2, 4, 4, 4), True, True)]


def test_the_timed_convolutions_are_real_under_the_compiles_fake_mode():
    """The pass runs under the compile's FakeTensorMode: the timing must leave it, or it times
    fake convolutions, as long in one layout as in the other (the decision was a coin toss
    until 2026-11-28: regnetx_002 went NCHW at 0.57x Inductor's speed on the CPU). Real timer,
    a 1x1 convolution of many channels, where channels-last is several times faster on the CPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from miniinductor.ext.layout import timing
    conv = nn.Conv2d(368, 368, 1, bias=False)
    gm = make_fx(conv)(randn(1, 368, 3, 3))
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    timing._conv_time.cache_clear()
    with FakeTensorMode():
        assert timing.channels_last_pays(convs)
    key = ((1, 368, 3, 3), (368, 368, 1, 1), False, ((1, 1), (0, 0), (1, 1), False, (0, 0), 1), torch.float32, "cpu")
    assert timing._conv_time(*key, channels_last=True) < 0.7 * timing._conv_time(*key, channels_last=False)


def test_gpu_convolution_bias_is_peeled_into_an_add():
    """On the GPU a convolution's bias becomes an add of ours (bias.py, as Inductor's conv
    lowering does), which fuses into the kernel reading the convolution; traced on fake CUDA
    tensors (no GPU here), then run on CPU tensors: the same values as the original call."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from miniinductor.ext.layout.bias import peel_conv_bias

    def fn(x, w, b, w3, b3):
        y = torch.ops.aten.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        return torch.relu(y), torch.ops.aten.convolution(y, w3, b3, [2, 2], [0, 0], [1, 1], False, [0, 0], 1)
    shapes = [(2, 3, 8, 8), (4, 3, 3, 3), (4,), (5, 4, 2, 2), (5,)]
    with FakeTensorMode():
        gm = make_fx(fn)(*[torch.empty(s, device="cuda") for s in shapes])
    assert peel_conv_bias(gm) == 2
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    assert [n.args[2] for n in convs] == [None, None]
    inputs = [randn(*s) for s in shapes]
    for got, want in zip(gm(*inputs), fn(*inputs)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    cpu_gm = make_fx(fn)(*inputs)
    assert peel_conv_bias(cpu_gm) == 0   # the C++ path keeps its bias (ext/cpu_conv folds it)


def test_a_depthwise_convolution_keeps_channels_last_untimed(monkeypatch):
    """A graph with a depthwise convolution (MobileNet's) goes channels-last without timing:
    the kernels around it gain what timing the convolutions alone misses."""
    from types import SimpleNamespace

    from torch.fx.experimental.proxy_tensor import make_fx

    from miniinductor.config import Config
    from miniinductor.ext.layout import channels_last

    def timed(convs, value=None):
        raise AssertionError("a graph with a depthwise convolution is not timed")
    monkeypatch.setattr(channels_last, "channels_last_pays", timed)
    depthwise, pointwise = nn.Conv2d(8, 8, 3, groups=8), nn.Conv2d(8, 16, 1)
    gm = make_fx(lambda x: pointwise(depthwise(x)))(randn(2, 8, 10, 10))
    policy = SimpleNamespace(name="cpp", channels_last_conv=True)   # all the decision reads
    assert channels_last.decide_layout_opt(gm, policy, Config(), "inference")
    gm = make_fx(lambda x: pointwise(x))(randn(2, 8, 10, 10))
    with pytest.raises(AssertionError, match="not timed"):
        channels_last.decide_layout_opt(gm, policy, Config(), "inference")


@pytest.mark.parametrize("stride,output_padding", [(2, 1), (1, 0)])
def test_transposed_convolution_on_the_cpu(stride, output_padding):
    """A 2-D transposed convolution runs channels-last on the CPU too where it pays (oneDNN's
    channels-last deconvolution ran twice as fast at 8 channels of 8x8): its input and weight
    go channels-last, what ATen returns is read with its own strides, values as eager's."""
    model = nn.Sequential(nn.ConvTranspose2d(8, 12, 3, stride=stride, padding=1, output_padding=output_padding),
                          nn.Hardtanh(-0.5, 0.5)).eval()
    x = randn(2, 8, 8, 8)
    with torch.no_grad():
        check(model, x, **CONV_TOL)
        (cg,) = compiled_graphs(model, x)
    assert cg.graph.layout_opt
    assert conv_input_strides(cg) == [(512, 1, 64, 8)], cg.wrapper_source
    assert conv_weight_strides(cg) == [(108, 1, 36, 12)], cg.wrapper_source   # [8, 12, 3, 3] channels-last
