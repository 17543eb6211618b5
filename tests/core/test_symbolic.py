"""Symbolic sizes: one compile serves every size (issue 13).

With `dynamic=True` (or the default `dynamic=None` after a second shape) Dynamo hands over
sizes as SymPy symbols; the C++ kernels take them as `int64_t` arguments and the wrapper
reads them from the inputs, so a sweep of sizes compiles each graph once (Triton kernels:
tests/triton/test_symbolic_triton.py). Every result is
compared with eager on fresh random inputs. Tolerances: float32 sums whose order differs
from eager's (OpenMP simd reductions, LayerNorm's statistics): relative 1e-4, absolute
1e-4 (1e-5 would flake on gradients summed over 129 rows). Floats of the sizes (LayerNorm's
sym_float(s1), interpolate's 4 / s0) are compiled symbolically too, at sizes where true and
floor division differ. Graphs that cannot be compiled symbolically fall back to one compile
per shape (capture/specialize.py): tested here too.
"""
from __future__ import annotations

import logging
import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import TEST_OPTIONS, check, check_training_step, extension_on, input_gradients, metrics, randn, requires_miniinductor

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.lowering.graph import GraphLowering
from miniinductor.tools.debug.explain import kernel_lines
from miniinductor.tools.models import GPT2Block

pytestmark = requires_miniinductor
TRITON = TEST_OPTIONS.get("cpu_backend") == "triton"   # (Triton's own cases: tests/triton/test_symbolic_triton.py)
SLOW_UNDER_TRITON = pytest.mark.skipif(TRITON, reason="T up to 512 is too slow under Triton's interpreter "
                                               "(triton/test_symbolic_triton.py runs the block at small T)")
CPP_SOURCE = pytest.mark.skipif(TRITON, reason="reads the C++ kernels' source")
BATCHES = (3, 5, 17, 33, 64, 100, 129)
SEQ_LENS = (16, 33, 128, 300, 512)


class LayerNormMLP(nn.Module):
    def __init__(self, d=32, hidden=64, out=8):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln(x))))


def compile_(model, dynamic, **options):
    return miniinductor.compile(model, dynamic=dynamic, **{**TEST_OPTIONS, **options})


def test_mlp_batches_compile_once_with_gradients():
    torch.manual_seed(0)
    model = LayerNormMLP()
    compiled = compile_(model, dynamic=True)
    for batch in BATCHES:
        check_training_step(model, compiled, randn(batch, 32), randn(batch, 8))
        if batch == BATCHES[0]:
            kernels = metrics().generated_kernel_count
    assert metrics().graphs_compiled == 2   # one forward, one backward, for every batch size
    assert metrics().specializations == 0
    assert metrics().generated_kernel_count == kernels > 0   # kernels generated once


@SLOW_UNDER_TRITON
def test_gpt2_block_sequence_lengths_compile_once():
    torch.manual_seed(0)
    model = GPT2Block(d_model=32, n_head=4, max_seq=1024).eval()   # (T == max_seq: Dynamo specialises)
    compiled = compile_(model, dynamic=True)
    with torch.no_grad():
        for T in SEQ_LENS:
            check(model, randn(2, T, 32), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().graphs_compiled == 1
    assert metrics().specializations == 0


def test_gpt2_block_training_compiles_once():
    torch.manual_seed(0)
    model = GPT2Block(d_model=32, n_head=4, max_seq=64)
    compiled = compile_(model, dynamic=True)
    for T in (5, 17, 40):
        check_training_step(model, compiled, randn(2, T, 32), randn(2, T, 32))
    assert metrics().graphs_compiled == 2
    assert metrics().specializations == 0


@SLOW_UNDER_TRITON
def test_default_dynamic_compiles_at_most_twice():
    """dynamic=None (miniinductor.compile's default): a static compile for the first shape,
    one symbolic compile for every later one."""
    torch.manual_seed(0)
    mlp = LayerNormMLP().eval()
    compiled = miniinductor.compile(mlp, **TEST_OPTIONS)
    with torch.no_grad():
        for batch in BATCHES:
            check(mlp, randn(batch, 32), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().graphs_compiled == 2 and metrics().specializations == 0
    torch._dynamo.reset()
    metrics().reset()
    block = GPT2Block(d_model=32, n_head=4, max_seq=1024).eval()
    compiled = miniinductor.compile(block, **TEST_OPTIONS)
    with torch.no_grad():
        for T in SEQ_LENS:
            check(block, randn(2, T, 32), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().graphs_compiled == 2 and metrics().specializations == 0


@CPP_SOURCE
def test_kernels_take_the_sizes_as_arguments():
    compiled = compile_(lambda x: torch.softmax(x, -1) * x.shape[0], dynamic=True)
    with collect_compiled() as graphs:
        for n in (3, 7):
            check(lambda x: torch.softmax(x, -1) * x.shape[0], randn(n, n + 2), compiled=compiled)
    (graph,) = graphs
    (kernel,) = graph.kernels.values()
    assert kernel.size_args and all(f"const int64_t {s}" in kernel.source for s in kernel.size_args)
    s0 = kernel.size_args[0]
    assert f"{s0} = arg" in graph.wrapper_source   # read from the inputs at run time
    # passed after the pointers, declared c_int64 by load_kernels' (pointers, sizes) counts
    assert f".data_ptr(), {', '.join(kernel.size_args)})" in graph.wrapper_source
    assert f"{(len(kernel.args), len(kernel.size_args))!r}" in graph.wrapper_source
    assert s0 in str(graph.graph)   # the printed IR shows the symbols


def test_fallback_per_graph_is_logged_once(caplog, monkeypatch):
    """A graph whose lowering fails with symbolic sizes is compiled once per shape, and the
    `dynamic` logger says which op and why, once."""
    fn = lambda x: torch.cos(x) * 2   # noqa: E731
    original = GraphLowering.call_function

    def no_cos_with_symbols(self, target, args, kwargs):
        if target is torch.ops.aten.cos.default and self.sizevars.symbolic:
            raise TypeError("cannot lower cos with symbolic sizes (a test's stand-in)")
        return original(self, target, args, kwargs)
    monkeypatch.setattr(GraphLowering, "call_function", no_cos_with_symbols)
    compiled = compile_(fn, dynamic=True)
    with caplog.at_level(logging.INFO, logger="miniinductor.dynamic"):
        for n in (3, 5, 3):
            check(fn, randn(n), compiled=compiled)
    fell_back = [r.getMessage() for r in caplog.records if "compiled once per shape" in r.getMessage()]
    assert len(fell_back) == 1 and "aten.cos.default" in fell_back[0] and "stand-in" in fell_back[0]
    assert metrics().specializations == 2


@pytest.mark.skipif(not extension_on("freezing"), reason="the freezing extension is off")
def test_freezing_pass_failure_falls_back_per_shape(caplog, monkeypatch):
    """With freezing=True, a failure inside the freezing pass itself (not only in lowering)
    on a symbolic graph is compiled once per shape, still frozen, and logged."""
    from miniinductor.ext.freezing import freeze as freezing
    original = freezing.freeze

    def no_symbols(gm, example_inputs, candidates):
        if any(isinstance(s, torch.SymInt) for x in example_inputs if isinstance(x, torch.Tensor) for s in x.shape):
            raise RuntimeError("cannot freeze with symbolic sizes (a test's stand-in)")
        return original(gm, example_inputs, candidates)
    monkeypatch.setattr(freezing, "freeze", no_symbols)
    model = LayerNormMLP().eval()
    compiled = compile_(model, dynamic=True, freezing=True)
    with caplog.at_level(logging.INFO, logger="miniinductor.dynamic"), torch.no_grad():
        for n in (3, 5, 9):
            check(model, randn(n, 32), compiled=compiled, rtol=1e-4, atol=1e-5)
    assert any("compiled once per shape" in r.getMessage() and "stand-in" in r.getMessage() for r in caplog.records)
    assert metrics().specializations == 3


def test_backward_falls_back_alone(monkeypatch):
    """The forward compiles symbolically and runs; its backward (compiled lazily) fails
    symbolically: the backward is re-traced and compiled per shape, gradients still right."""
    original = GraphLowering.run

    def no_symbolic_backward(self):
        if self.name == "backward" and self.sizevars.symbolic:
            raise miniinductor.ir.sizevars.SymbolicUnsupported("a test's stand-in")
        return original(self)
    monkeypatch.setattr(GraphLowering, "run", no_symbolic_backward)
    model = LayerNormMLP()
    compiled = compile_(model, dynamic=True)
    for batch in (3, 5, 3):
        check_training_step(model, compiled, randn(batch, 32), randn(batch, 8))
    assert metrics().specializations == 2   # the backward, for batches 3 and 5


def test_chunk_over_a_dynamic_dim_compiles_once():
    """torch.chunk over a symbolic dim: split_with_sizes by symbolic sizes, odd sizes too."""
    def fn(x):
        a, b = torch.chunk(x, 2, dim=0)
        return a.sum(0) * 2 + b.sum(0)
    compiled = compile_(fn, dynamic=True)
    for n in (4, 5, 6, 9, 13):
        check(fn, randn(n, 3), compiled=compiled)
    assert metrics().graphs_compiled == 1 and metrics().specializations == 0


@CPP_SOURCE
def test_trace_folder_of_a_symbolic_graph(tmp_path):
    """The trace shows the symbols (IR, kernels); its fx_graph.py runs at the traced sizes."""
    pytest.importorskip("graphviz", reason="the trace draws the fusion graph with the graphviz package")
    fn = lambda x: torch.softmax(x, -1) * x.shape[0]   # noqa: E731
    compiled = compile_(fn, dynamic=True, trace=str(tmp_path))
    for n in (3, 4):
        compiled(randn(n, 5))
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    kernels, ir = (folder / "kernels.cpp").read_text(), (folder / "ir_post_fusion.txt").read_text()
    symbols = set(re.findall(r"const int64_t (\w+)", kernels))   # the rows and the row length
    assert len(symbols) == 2 and all(f"ranges=[{s}" in ir for s in symbols), (symbols, ir)
    run = subprocess.run([sys.executable, "fx_graph.py"], cwd=folder, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    # symbols.txt: each symbol with the size it was traced at and the input it is read from,
    # then the guards; the HTML report shows the same lines
    described = (folder / "symbols.txt").read_text()
    for s in symbols:
        assert re.search(rf"^  {s} = [35]\b.*L\['x'\]\.size\(\)\[[01]\]", described, re.M), described
    assert "guards" in described
    assert all(s in (folder / "report.html").read_text() for s in symbols)


def test_explain_shows_the_symbols():
    """explain's summary of a symbolic graph names its size symbols and the values traced."""
    x = randn(6, 9)
    result = miniinductor.explain(lambda x: (x * 2).sum(1), x, dynamic=True, **TEST_OPTIONS)
    torch.testing.assert_close(result.outputs, (x * 2).sum(1))
    text = "\n".join(kernel_lines(result))
    assert re.search(r"^    s\d+ = 6 .*L\['x'\]\.size\(\)\[0\]", text, re.M), text
    assert re.search(r"^    s\d+ = 9 .*L\['x'\]\.size\(\)\[1\]", text, re.M), text


OPS = {   # each: fn, inputs for a size n (sizes kept apart from one another: no duck sizing)
    "cat": (lambda x, y: torch.cat([x, y * 2], 0).sum(1), lambda n: (randn(n, 4), randn(n + 7, 4))),
    "pad": (lambda x: F.pad(x, (1, 2)) * 3, lambda n: (randn(n, 5),)),
    "gather": (lambda x, i: x.gather(1, i), lambda n: (randn(n, 6), torch.randint(0, 6, (n, 3)))),
    "permute_reshape": (lambda x: x.permute(1, 0, 2).reshape(x.shape[1], -1) * 2, lambda n: (randn(n, 3, n + 1),)),
    "argmax": (lambda x: x.argmax(1) + x.argmin(0).sum(), lambda n: (randn(n, n + 2),)),
    "var": (lambda x: x.var(0) + x.std(1).sum(), lambda n: (randn(n, 5),)),
    "strided_slice": (lambda x: x[::2] * 2, lambda n: (randn(n, 3),)),
    "view_of_a_size": (lambda x: x.view(x.shape[0] // 2, 2, -1).mean(1), lambda n: (randn(2 * n, 3),)),
    # an innermost size that is a sum (s + 3): the vector loop's bound and the lane loop's
    # are `n - n % lanes` and `n / lanes * lanes` of it, in parentheses; the pointwise
    # kernel works in place (in the matmul's buffer), so a position done twice shows
    "padded_inner_in_place": (lambda a, b: torch.relu(torch.mm(a, F.pad(b, (1, 2))) * 2 - 1),
                              lambda n: (randn(n, 8), randn(8, 8 * n + 40))),
    "padded_row_sum": (lambda x: F.pad(x, (1, 2)).exp().sum(1), lambda n: (randn(3, 8 * n + 64),)),
}


@pytest.mark.parametrize("case", OPS)
def test_ops_compile_once(case):
    fn, make_inputs = OPS[case]
    compiled = compile_(fn, dynamic=True)
    for n in (7, 10, 13):
        check(fn, *make_inputs(n), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().specializations == 0 and metrics().graphs_compiled == 1


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def check_layer_norm_widths(compiled, sizes):
    """`layer_norm` through `compiled` at each (batch, width): outputs and input gradients vs
    eager; one forward and one backward graph compiled for all, none per shape."""
    for batch, width in sizes:
        inputs = [randn(batch, width, requires_grad=True), randn(width, requires_grad=True),
                  randn(width, requires_grad=True)]
        copies = [t.detach().clone().requires_grad_(True) for t in inputs]
        actual, expected = compiled(*inputs), layer_norm(*copies)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)
        for a, e in zip(input_gradients(actual, inputs)[1], input_gradients(expected, copies)[1]):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    assert metrics().graphs_compiled == 2 and metrics().specializations == 0


def test_layer_norm_widths_compile_once_with_gradients():
    """F.layer_norm(x, x.shape[-1:]) with dynamic=True: its mean divides by sym_float(s1),
    a float of the sizes, computed in the kernel from s1 (as eager: in float32)."""
    check_layer_norm_widths(compile_(layer_norm, dynamic=True), ((3, 33), (5, 64), (2, 100), (4, 33)))


FLOATS_OF_SIZES = {   # a float computed from the sizes, at sizes where true and floor division differ
    "interpolate_size": (lambda x, n: F.interpolate(x, size=n, mode="nearest") * 2,   # scale 4 / n
                         lambda n: (randn(2, 3, 4), n)),
    "interpolate_scale": (lambda x: F.interpolate(x, scale_factor=(1.5, 0.5), mode="nearest"),
                          lambda n: (randn(1, 2, n, n + 3),)),   # sizes int(1.5 * s0), int(0.5 * s1)
    "size_over_4": (lambda x: x * (x.shape[0] / 4) + x.shape[1] * 0.5, lambda n: (randn(n, n + 2),)),
    "mean": (lambda x: x.mean(1) + x.var(0).sum(), lambda n: (randn(4, n),)),
    "mean_float16": (lambda x: x.mean(1), lambda n: (randn(3, n, dtype=torch.float16),)),  # divides in float32
    "sdpa_head_dim": (lambda q: F.scaled_dot_product_attention(q, q * 2, q),   # scale sym_float(E) ** -0.5
                      lambda n: (randn(2, 3, n),)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), lambda n: (randn(1, 2, n, n + 3),)),
}


def sizes_for(case):
    """The sizes a FLOATS_OF_SIZES case runs at. avg_pool2d's meta function in torch 2.11 guards
    on the parity of n - 1 (`div_rtn` in its output size), so Dynamo compiles odd and even n
    apart there (torch 2.13 does not): odd sizes only for it."""
    return (5, 7, 9) if case == "avg_pool2d" else (5, 7, 6)


@pytest.mark.parametrize("case", FLOATS_OF_SIZES)
def test_floats_of_sizes_compile_once(case):
    fn, make_inputs = FLOATS_OF_SIZES[case]
    compiled = compile_(fn, dynamic=True)
    for n in sizes_for(case):
        check(fn, *make_inputs(n), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().specializations == 0 and metrics().graphs_compiled == 1


def test_interpolate_scale_is_a_real_division():
    """`interpolate(size=n)` computes the scale 4 / n, IntTrueDiv(4, s): printed as C's
    integer division it was a silently wrong upsample_nearest (found by the dynamic OpInfo
    sweep). With dynamic=None: a static compile, then one symbolic compile, exact results."""
    fn = lambda x, n: F.interpolate(x, size=n, mode="nearest") * 2   # noqa: E731
    compiled = compile_(fn, dynamic=None)
    x = randn(2, 3, 4)
    with collect_compiled() as graphs:
        for n in (3, 5, 7, 5, 6):
            torch.testing.assert_close(compiled(x, n), fn(x, n), rtol=0, atol=0)
    assert metrics().graphs_compiled == 2 and metrics().specializations == 0
    if not TRITON:
        (kernel,) = graphs[-1].kernels.values()
        assert re.search(r"static_cast<double>\(4\) / static_cast<double>\(s\d+\)", kernel.source), kernel.source


def test_wrapper_computes_a_float_of_sizes():
    """An ATen op given sym_float(s1) (here by fallback_ops): the Python wrapper computes
    `float(s1)` from the inputs' sizes at each call."""
    fn = lambda x: F.layer_norm(x, x.shape[-1:])   # noqa: E731
    compiled = compile_(fn, dynamic=True, fallback_ops=["prims.div.default"])
    with collect_compiled() as graphs:
        for width in (33, 64, 7):
            check(fn, randn(3, width), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().graphs_compiled == 1 and metrics().specializations == 0
    assert re.search(r"prims\.div\.default\(buf\d+, float\(s\d+\)\)", graphs[0].wrapper_source)
