"""Output layouts, cat's edge cases, and graphs with no tensor inputs.

* Outputs keep eager's strides and aliasing (`conftest.check` compares both): transposed,
  permuted, expanded and as_strided results (overlapping ones are views of the intermediate,
  as in eager), views of inputs and of intermediates, channels-last convolutions, forward
  and backward (gradients are results too: their strides and values are compared).
* `torch.cat` with a legacy empty input, with a 0-size dim, with one input (a new tensor,
  contiguous, never the input itself), into a view (`out=`, `buf[:, :k] = ...`), backward.
* A graph's device comes from its nodes, not only from its inputs: `torch.arange(8,
  device="cuda") * 2` has no inputs, and C++ kernels writing its CUDA memory crashed. The
  device choice is checked here on fake CUDA tensors (FakeTensorMode needs no GPU); the
  same graphs run on a GPU in triton/test_gpu.py. Their CPU versions are compiled here.
"""
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import USING_MINIINDUCTOR, check, clone_input, compile_fn, randint, randn, requires_miniinductor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx


def channels_last(*shape):
    return randn(*shape).to(memory_format=torch.channels_last)


def _cat_out(a, b, buf):
    torch.cat([a, b], dim=1, out=buf[:, 1:6])
    return buf


def _cat_setitem(a, b, buf):
    buf[:, 2:7] = torch.cat([a, b], 1) * 2
    return buf.sum(1)


LAYOUT_CASES = {
    # results read through other strides
    "t_of_result": (lambda x: (x + 1).t(), lambda: (randn(3, 4),)),
    "permute_of_result": (lambda x: (x * 2).permute(2, 0, 1), lambda: (randn(2, 3, 4),)),
    "expand_of_result": (lambda x: (x * 2).unsqueeze(0).expand(3, 4, 5), lambda: (randn(4, 5),)),
    "mm_result_transposed": (lambda x, y: (x @ y).t(), lambda: (randn(3, 4), randn(4, 5))),
    "result_and_its_views": (lambda x: (lambda y: (y, y.t(), y[1:, ::2]))(x + 1), lambda: (randn(4, 6),)),
    "views_of_input": (lambda x: (x.t(), x[:, 1:3], x.expand(2, 4, 6)), lambda: (randn(4, 6),)),
    "transposed_input_pointwise": (lambda x: x.t().exp(), lambda: (randn(3, 4),)),
    # size-1 dims of views handed to extern ops (test_extern_args_size_one_strides)
    "size_one_views_into_mm": (lambda x, y, w: (x @ w, y[1:2] @ w, w.t() @ y[1:2].t()),
                               lambda: (randn(1, 16), randn(4, 16), randn(16, 8))),
    # as_strided: of an input, of a result, overlapping (eager's output is a view of x * 2)
    "as_strided_of_input": (lambda x: x.as_strided((3, 3), (1, 3), 1) * 2, lambda: (randn(12),)),
    "as_strided_of_result": (lambda x: (x * 2).as_strided((3, 3), (1, 3), 1), lambda: (randn(12),)),
    "as_strided_overlapping": (lambda x: (x + 1).as_strided((3, 4), (2, 1)), lambda: (randn(12),)),
    "as_strided_overlapping_then_op": (lambda x: (x + 1).as_strided((3, 4), (2, 1)).sum(0),
                                       lambda: (randn(12),)),
    # eager's strides with gaps: stored as they are, not made contiguous
    "copy_into_strided_with_gaps": (lambda x: torch.empty_strided((3, 3), (6, 1)).copy_(x), lambda: (randn(3, 3),)),
    "copy_into_strided_transposed": (lambda x: torch.empty_strided((3, 3), (1, 6)).copy_(x * 2),
                                     lambda: (randn(3, 3),)),
    # channels last
    "channels_last_pointwise": (lambda x: x * 2 + 1, lambda: (channels_last(2, 3, 4, 5),)),
    "channels_last_plus_contiguous": (lambda x, y: x + y, lambda: (channels_last(2, 3, 4, 5), randn(2, 3, 4, 5))),
    "channels_last_conv_relu": (lambda x, w: F.conv2d(x, w).relu(), lambda: (channels_last(2, 3, 8, 8), randn(4, 3, 3, 3))),
    # cat
    "cat_legacy_empty": (lambda x: torch.cat([x, torch.empty(0)]) * 2, lambda: (randn(2, 3),)),
    "cat_legacy_empty_only_other": (lambda x: torch.cat([x, torch.empty(0)]), lambda: (randn(2, 3),)),
    "cat_legacy_empty_promotes": (lambda x: torch.cat([x, torch.empty(0)]), lambda: (randint(2, 3),)),
    "cat_legacy_empty_input": (lambda x, e: torch.cat([e, x, e]), lambda: (randn(2, 3), randn(0))),
    "cat_zero_size_dim": (lambda x, y: torch.cat([x, y], 1) + 1, lambda: (randn(2, 3), randn(2, 0))),
    "cat_zero_size_result": (lambda x, y: torch.cat([x, y]), lambda: (randn(0, 3), randn(0, 3))),
    "cat_single_input": (lambda x: torch.cat([x]), lambda: (randn(2, 3),)),
    "cat_single_transposed": (lambda x: torch.cat([x.t()], 1), lambda: (randn(2, 3),)),
    "cat_single_computed": (lambda x: torch.cat([x * 2], 1), lambda: (randn(2, 3),)),
    "cat_out_into_view": (_cat_out, lambda: (randn(3, 2), randn(3, 3), randn(3, 8))),
    "cat_setitem_into_view": (_cat_setitem, lambda: (randn(3, 2), randn(3, 3), randn(3, 8))),
}


@pytest.mark.parametrize("name", LAYOUT_CASES)
def test_layout_case(name):
    fn, make_inputs = LAYOUT_CASES[name]
    check(fn, *make_inputs())


@requires_miniinductor
def test_extern_args_size_one_strides():
    """Our views give a size-1 dim the stride 0 (the index never moves along it), which BLAS
    takes for a leading dimension too small: ATen copied the matrix at every call. The wrapper
    hands ATen the buffer itself where the view is the buffer's layout, else the size-1 dim's
    contiguous stride."""
    import miniinductor
    fn, make_inputs = LAYOUT_CASES["size_one_views_into_mm"]
    (cg,) = miniinductor.explain(fn, *make_inputs()).graphs
    calls = [line for line in cg.wrapper_source.splitlines() if "aten.mm.default" in line]
    assert len(calls) == 3 and "torch.mm(arg0_1, " in calls[0], calls   # x @ w: x itself
    views = re.findall(r"reinterpret\(\w+, \(([\d, ]*)\), \(([\d, ]*)\)", "\n".join(calls))
    assert views, calls
    for size, stride in views:
        for n, s in zip(size.split(","), stride.split(",")):
            assert n.strip() != "1" or s.strip() != "0", (size, stride, calls)


# --------------------------------------------------------------------------- gradients
def check_grads(fn, *args, rtol=1e-5, atol=1e-5):
    """Forward and backward, compiled and eager: outputs and every input's gradient must
    agree in values and strides. (fp32; conv's backward sums over 2*6*6 terms, which the
    compiled graph may add in another order: 1e-5 allows for that.)"""
    eager_args, comp_args = [], []
    for a in args:
        for into in (eager_args, comp_args):
            into.append(clone_input(a.detach()).requires_grad_(a.requires_grad))
    expected, actual = fn(*eager_args), compile_fn(fn)(*comp_args)
    assert actual.stride() == expected.stride(), f"output strides {actual.stride()} != eager {expected.stride()}"
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    grad = randn(*expected.shape)
    expected.backward(grad)
    actual.backward(grad)
    for k, (a, e) in enumerate(zip(comp_args, eager_args)):
        if e.requires_grad:
            assert a.grad.stride() == e.grad.stride(), f"grad {k}: strides {a.grad.stride()} != eager {e.grad.stride()}"
            torch.testing.assert_close(a.grad, e.grad, rtol=rtol, atol=atol, msg=lambda m: f"grad {k}: {m}")


GRAD_CASES = {
    "channels_last_conv": (lambda x, w: F.conv2d(x, w), lambda: (channels_last(2, 3, 8, 8), randn(4, 3, 3, 3))),
    "channels_last_conv_relu": (lambda x, w: F.conv2d(x.relu(), w).relu(),
                                lambda: (channels_last(2, 3, 8, 8), randn(4, 3, 3, 3))),
    "t_of_result": (lambda x: (x * 2).t(), lambda: (randn(3, 4),)),
    "permute_of_result": (lambda x: x.sin().permute(2, 0, 1), lambda: (randn(2, 3, 4),)),
    "expand_of_result": (lambda x: (x * 2).expand(3, 4), lambda: (randn(1, 4),)),
    "transposed_input": (lambda x: x.exp(), lambda: (randn(4, 3).t(),)),
    "as_strided_of_result": (lambda x: (x * 2).as_strided((3, 3), (1, 3), 1), lambda: (randn(12),)),
    "cat_legacy_empty": (lambda x, y: torch.cat([x, torch.empty(0), y]).sin(), lambda: (randn(2, 3), randn(1, 3))),
    "cat_zero_size_dim": (lambda x, y: torch.cat([x, y], 1).sin(), lambda: (randn(2, 3), randn(2, 0))),
    "cat_single_transposed": (lambda x: torch.cat([x.t()]) * 2, lambda: (randn(2, 3),)),
    "cat_three": (lambda x, y, z: torch.cat([x, y * 2, z], 1).tanh(), lambda: (randn(3, 2), randn(3, 4), randn(3, 1))),
}
# Left out: the backward of an *overlapping* as_strided output. AOTAutograd itself gets its
# gradient wrong (backend="aot_eager" and "inductor" give the same wrong values), so no
# backend can pass it; its forward is checked above (as_strided_overlapping).


@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradient_layout(name):
    fn, make_inputs = GRAD_CASES[name]
    check_grads(fn, *[a.requires_grad_() for a in make_inputs()])


# --------------------------------------------------------------------------- no tensor inputs
NO_INPUT_GRAPHS = {
    "arange": lambda device: torch.arange(8, device=device) * 2,
    "arange_float": lambda device: torch.arange(0.5, 4.0, 0.25, device=device).sin(),
    "ones": lambda device: torch.ones(3, 4, device=device) + 1,
    "zeros": lambda device: torch.zeros(5, dtype=torch.int32, device=device) - 3,
    "full": lambda device: torch.full((3, 2), 2.5, device=device).exp(),
    "linspace": lambda device: torch.linspace(-1, 1, 7, device=device),
    "scalar_tensor": lambda device: torch.scalar_tensor(3.0, device=device) * 2,
    "hann_window": lambda device: torch.signal.windows.hann(10, device=device),
    "gaussian_window": lambda device: torch.signal.windows.gaussian(9, std=2.0, device=device),
    "kaiser_window": lambda device: torch.signal.windows.kaiser(8, beta=6.0, device=device),
}


@pytest.mark.parametrize("name", NO_INPUT_GRAPHS)
def test_no_input_graph_cpu(name):
    make = NO_INPUT_GRAPHS[name]
    check(lambda: make("cpu"))


def _fake_graph(fn, *inputs):
    """The ATen graph of `fn` traced on fake tensors: no GPU needed for device "cuda"."""
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fakes = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in inputs]
        return make_fx(fn)(*fakes), fakes


# kaiser's trace calls a real CUDA op even under FakeTensorMode, so it cannot be traced
# without a GPU; triton/test_gpu.py runs it on one.
FAKE_CUDA_GRAPHS = [name for name in NO_INPUT_GRAPHS if name != "kaiser_window"]


@pytest.mark.parametrize("name", FAKE_CUDA_GRAPHS)
def test_no_input_graph_device_comes_from_its_nodes(name):
    from miniinductor.lowering.graph import graph_device
    gm, _ = _fake_graph(lambda: NO_INPUT_GRAPHS[name]("cuda"))
    assert graph_device(gm, []) == torch.device("cuda", 0)
    gm, _ = _fake_graph(lambda: NO_INPUT_GRAPHS[name]("cpu"))
    assert graph_device(gm, []) == torch.device("cpu")


def test_cpu_scalars_join_a_cuda_graph_but_tensors_do_not():
    from miniinductor.compile_fx import _unsupported_graph
    from miniinductor.lowering.graph import graph_device
    scalar, vector = torch.tensor(2.0), randn(4)
    gm, fakes = _fake_graph(lambda s: torch.arange(4, device="cuda") * s, scalar)
    assert graph_device(gm, fakes) == torch.device("cuda", 0)
    assert _unsupported_graph(gm, fakes) is None
    to_cuda = torch.ops.aten._to_copy.default   # (Tensor.to would ask for a real CUDA)
    gm, fakes = _fake_graph(lambda v: torch.arange(4, device="cuda") + to_cuda(v, device=torch.device("cuda")), vector)
    with pytest.raises(ValueError, match="several devices"):
        graph_device(gm, fakes)
    assert "several devices (cpu, cuda:0)" in _unsupported_graph(gm, fakes)


@pytest.mark.skipif(not USING_MINIINDUCTOR, reason="reads the compiled graph's device")
def test_lowering_places_kernels_on_the_graph_device():
    """Lowered on fake CUDA tensors, a no-input graph's buffers are CUDA buffers and its
    kernels are Triton's, not C++ (which wrote CUDA memory and crashed)."""
    from miniinductor.config import Config
    from miniinductor.lowering.graph import GraphLowering
    gm, _ = _fake_graph(lambda: torch.arange(8, device="cuda") * 2)
    with FakeTensorMode(allow_non_fake_inputs=True):
        graph = GraphLowering(gm, [], Config()).run()
    assert graph.kernel_backend() == "triton"
    assert {b.get_device() for b in graph.buffers} == {torch.device("cuda", 0)}


@pytest.mark.parametrize("dynamic", [False, None, True])
def test_as_strided_storage_offset_of_a_view_input(dynamic):
    """as_strided's storage_offset counts from the start of the storage, not from the input
    view's first element, and Dynamo does not guard an input's storage offset: one compiled
    graph sees views that start at 5, 3, 0, 8 (found by the dynamic=None OpInfo sweep)."""
    base = randn(40)
    fn = lambda x, off: torch.as_strided(x, (2, 2), (1, 2), storage_offset=off) * 2 + x[:2, None]  # noqa: E731
    compiled = compile_fn(fn, dynamic=dynamic)
    for start, off in ((5, 0), (5, 10), (5, 7), (3, 7), (0, 12), (8, 1)):
        x = base[start:start + 10]
        torch.testing.assert_close(compiled(x, off), fn(x, off), rtol=0, atol=0)
