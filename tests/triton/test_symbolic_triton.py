"""Triton kernels generic in their sizes (issue 13): one compile serves every size.

The same checks as tests/core/test_symbolic.py (C++), on `cpu_backend="triton"`: the kernels take
the size symbols, `xnumel` and `rnumel` as int arguments, the launcher computes the grid at
run time, and a reduction over a symbolic length is looped (a persistent one only where the
ShapeEnv bounds the length). Kernels run on CPU tensors under Triton's interpreter, which
is slow: sizes stay small, but include sizes that are not multiples of any block size.
Every result is compared with eager on fresh random inputs; tolerances as in
test_symbolic.py (float32 sums in another order than eager's: 1e-4).
"""
from __future__ import annotations

import logging
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import check, check_training_step, metrics, randn, requires_miniinductor
from test_symbolic import FLOATS_OF_SIZES, OPS, LayerNormMLP, check_layer_norm_widths, layer_norm, sizes_for

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.tools.models import GPT2Block
from miniinductor.triton import runtime as triton_runtime

pytest.importorskip("triton")
pytestmark = requires_miniinductor
BATCHES = (3, 5, 17, 33, 64, 100, 129)


def compile_(fn, **options):
    return miniinductor.compile(fn, dynamic=True, cpu_backend="triton", **options)


def run_sizes(fn, make_inputs, sizes, **options):
    """Compile `fn` once, check it against eager at each size; the compiled graphs."""
    compiled = compile_(fn, **options)
    with collect_compiled() as graphs:
        for n in sizes:
            check(fn, *make_inputs(n), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().specializations == 0 and metrics().graphs_compiled == len(graphs) == 1
    return graphs[0]


def test_mlp_batches_compile_once_with_gradients():
    torch.manual_seed(0)
    model = LayerNormMLP()
    compiled = compile_(model)
    for batch in BATCHES:
        check_training_step(model, compiled, randn(batch, 32), randn(batch, 8))
        if batch == BATCHES[0]:
            kernels, modules = metrics().generated_kernel_count, len(triton_runtime._loaded)
    assert metrics().graphs_compiled == 2   # one forward, one backward, for every batch size
    assert metrics().specializations == 0
    assert metrics().generated_kernel_count == kernels > 0   # kernels generated once ...
    assert len(triton_runtime._loaded) == modules            # ... and their modules built once


@pytest.mark.parametrize("case", OPS)
def test_ops_compile_once(case):
    """test_symbolic.py's ops (cat, pad, gather, permute+reshape, argmax, var, strided slice,
    a view by a size), in Triton."""
    fn, make_inputs = OPS[case]
    run_sizes(fn, make_inputs, (7, 10, 13))


def test_softmax_over_a_symbolic_row_is_looped():
    graph = run_sizes(lambda x: torch.softmax(x, -1), lambda n: (randn(4, n),), (5, 17, 33, 100))
    (kernel,) = graph.kernels.values()
    assert kernel.name.startswith("triton_red_")   # no RBLOCK covers every row length
    # (a `while` over roffset: under the interpreter, for Triton 3.6's; a `for` on the GPU)
    assert "while roffset + " in kernel.source and " < rnumel:  # (the interpreter's form of range(0, rnumel, " in kernel.source
    assert "do_not_specialize=" in kernel.source   # one compiled variant for every size


def test_reduction_over_a_symbolic_dim():
    def fn(x):
        return x.sum(0), x.amax(1), x.var(0)
    graph = run_sizes(fn, lambda n: (randn(n, 6),), (3, 9, 40, 129))
    assert all(k.size_args for k in graph.kernels.values())


def test_bounded_row_is_persistent():
    """mark_dynamic(max=64) bounds the row: a persistent kernel whose RBLOCK covers 64.
    (Called directly: `check` copies its inputs, and a copy is not marked dynamic.)"""
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    compiled = miniinductor.compile(fn, cpu_backend="triton")
    with collect_compiled() as graphs:
        for n in (5, 33, 64):
            x = randn(3, n)
            torch._dynamo.mark_dynamic(x, 1, min=2, max=64)
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-4)
    assert metrics().specializations == 0 and len(graphs) == 1
    (kernel,) = graphs[0].kernels.values()
    assert kernel.name.startswith("triton_per_") and "RBLOCK=64" in kernel.source


def test_cat_and_slices_with_symbolic_sizes():
    def fn(x, y):
        z = torch.cat([x, y * 2], 0)
        return z[1:-1].sin(), z[:, 2:] + x.shape[0], x[::2].cos()
    run_sizes(fn, lambda n: (randn(n, 5), randn(n + 7, 5)), (3, 6, 17, 40))


@pytest.mark.sweep   # ~15 s under the interpreter; test_symbolic.py runs the same on C++ in the quick suite
def test_gpt2_block_sequence_lengths_compile_once():
    """Dynamo bounds T by max_seq (the causal mask is sliced to T): the attention softmax,
    over rows of T, is persistent with an RBLOCK of max_seq, right for every T."""
    torch.manual_seed(0)
    model = GPT2Block(d_model=32, n_head=4, max_seq=32).eval()   # (T == max_seq: Dynamo specialises)
    compiled = compile_(model)
    with torch.no_grad(), collect_compiled() as graphs:
        for T in (5, 9, 17, 31):
            check(model, randn(2, T, 32), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().graphs_compiled == 1 and metrics().specializations == 0
    (softmax,) = [k for k in graphs[0].kernels.values() if "prepare_softmax_online" in k.name]
    assert softmax.name.startswith("triton_per_") and "RBLOCK=32" in softmax.source


@pytest.mark.sweep   # ~40 s under the interpreter; test_symbolic.py runs the same on C++ in the quick suite
def test_gpt2_block_training_compiles_once():
    torch.manual_seed(0)
    model = GPT2Block(d_model=32, n_head=4, max_seq=32)
    compiled = compile_(model)
    for T in (5, 17, 30):
        check_training_step(model, compiled, randn(2, T, 32), randn(2, T, 32))
    assert metrics().graphs_compiled == 2 and metrics().specializations == 0


def test_combo_parts_read_symbolic_strides():
    """Two pointwise parts of static sizes, read with a symbolic row stride: one combo kernel
    that takes the stride's symbol."""
    def fn(x):
        return x[:4, 0].sin(), x[:3, 1].cos() * 2
    graph = run_sizes(fn, lambda n: (randn(n, n + 3),), (5, 9, 17))
    (kernel,) = graph.kernels.values()
    assert kernel.name.startswith("triton_for_") and kernel.size_args


def test_gemm_template_stays_static(caplog):
    """max_autotune: a symbolic matmul goes to ATen (the template is static), compiled once;
    with the template alone allowed, the graph is compiled per shape, and says why."""
    fn = lambda a, b: torch.relu(a @ b)  # noqa: E731
    run_sizes(fn, lambda n: (randn(n, 8), randn(8, 16)), (5, 17), max_autotune=True)
    torch._dynamo.reset()
    metrics().reset()
    compiled = compile_(fn, max_autotune=True, max_autotune_gemm_backends="TRITON")
    with caplog.at_level(logging.INFO, logger="miniinductor.dynamic"):
        for n in (5, 17):
            check(fn, randn(n, 16), randn(16, 16), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().specializations == 2
    assert any("symbolic sizes (the template" in r.getMessage() for r in caplog.records)


def test_pointwise_grid_from_the_sizes():
    """The launcher computes xnumel and the grid from the size arguments at each call."""
    fn = lambda x: F.gelu(x) * 3  # noqa: E731
    graph = run_sizes(fn, lambda n: (randn(n, 3),), (2, 700, 1025))
    (kernel,) = graph.kernels.values()
    assert "grid=(cdiv(xnumel," in kernel.source and "xmask = xindex < xnumel" in kernel.source


@pytest.mark.parametrize("case", FLOATS_OF_SIZES)
def test_floats_of_sizes_compile_once(case):
    """test_symbolic.py's floats of the sizes (interpolate's 4 / s0, sym_float(s1) in a mean,
    sdpa's sym_float(E) ** -0.5...), computed in float64 in the kernel from the size arguments."""
    fn, make_inputs = FLOATS_OF_SIZES[case]
    run_sizes(fn, make_inputs, sizes_for(case))


def test_contiguous_store_of_symbolic_sizes_is_xindex():
    """A contiguous output of symbolic size ((s - 1) // 2 + 1 per side) is stored at xindex:
    the merged loop variables' symbolic coefficients cancel (they were left as a sum that is
    zero, computed at every element)."""
    fn = lambda x: F.avg_pool2d(x, 3, 2, 1)   # noqa: E731
    graph = run_sizes(fn, lambda n: (randn(1, 2, n, n + 3),), (5, 7, 9))
    (kernel,) = graph.kernels.values()
    assert "tl.store(out_ptr0 + (xindex), " in kernel.source, kernel.source


def test_interpolate_scale_is_a_real_division():
    """4 / n in float64 (Triton's `//` would be floor division): exact results at sizes where
    the two differ."""
    fn = lambda x, n: F.interpolate(x, size=n, mode="nearest") * 2   # noqa: E731
    graph = run_sizes(fn, lambda n: (randn(2, 3, 4), n), (3, 5, 7))
    (kernel,) = graph.kernels.values()
    assert re.search(r"\(s\d+\.to\(tl\.float64\) / s\d+\.to\(tl\.float64\)\)", kernel.source), kernel.source


def test_layer_norm_widths_compile_once_with_gradients():
    check_layer_norm_widths(compile_(layer_norm), ((3, 33), (5, 64), (2, 100)))
