"""Dynamic shapes: graphs with symbolic sizes are compiled once for every size (C++), or
once per concrete shape (Triton, and any graph that cannot be compiled symbolically).

Dynamo hands the backend SymInt sizes under `dynamic=True`, `mark_dynamic` and the default
`dynamic=None` after a second shape. C++ kernels take the sizes as arguments, so one compile
serves every shape (tests/core/test_symbolic.py has the sweeps); Triton kernels are not generic
yet, and their graphs are specialised per shape (capture/specialize.py), as is any graph
whose symbolic compile fails (the `per_shape` fixture forces that here to test the
specialiser on the C++ backend too). Every case is compared with eager on fresh random inputs
per shape, and the metrics show that each graph was really compiled (not run eagerly) and
that nothing is compiled twice.
"""
from __future__ import annotations

import copy
import logging
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, TEST_OPTIONS, check, metrics, randn, requires_miniinductor

import miniinductor
from miniinductor.capture import specialize
from miniinductor.ir.sizevars import SymbolicUnsupported
from miniinductor.lowering.graph import GraphLowering
from miniinductor.tools.models import MLP, GPT2Block

pytestmark = requires_miniinductor  # every test reads miniinductor.metrics
#: Triton kernels are not generic in their sizes yet: their graphs are compiled per shape
PER_SHAPE = TEST_OPTIONS.get("cpu_backend") == "triton"


@pytest.fixture
def per_shape(monkeypatch):
    """Every symbolic compile fails, as for an op we cannot lower symbolically: the graphs are
    specialised per shape (the fallback this file tests on every backend)."""
    original = GraphLowering.run

    def run(self):
        if self.sizevars.symbolic:
            raise SymbolicUnsupported("forced by the test")
        return original(self)
    monkeypatch.setattr(GraphLowering, "run", run)


def compiles(shapes: int, symbolic: int = 1) -> int:
    """Graphs compiled for `shapes` distinct shapes: per shape, or `symbolic` (C++)."""
    return shapes if PER_SHAPE else symbolic


def compile_dynamic(fn, dynamic):
    options = {"options": TEST_OPTIONS} if TEST_OPTIONS else {}
    return torch.compile(fn, backend=BACKEND, dynamic=dynamic, **options)


def pointwise(x, y):
    return torch.relu(x) * y + x.sin()


def reduction(x):
    return x - x.mean(dim=1, keepdim=True) + x.amax(dim=0) / x.shape[0]   # size used as a value


def size_dependent_view(x):   # x: [B, T, C] → [B*T, C//2, 2], then summed over the last dim
    B, T, C = x.shape
    return (x.reshape(B * T, C // 2, 2) * 2).sum(-1).view(B, T, -1)


CASES = {
    "pointwise": (pointwise, lambda n: (randn(n, 6), randn(n, 6))),
    "reduction": (reduction, lambda n: (randn(n, n + 3),)),
    "view": (size_dependent_view, lambda n: (randn(2, n, 2 * n),)),
}
SHAPES = (3, 5, 7)


@pytest.mark.parametrize("case", CASES)
def test_torch_compile_dynamic_true(case):
    fn, make_inputs = CASES[case]
    compiled = compile_dynamic(fn, dynamic=True)
    for n in SHAPES:
        check(fn, *make_inputs(n), compiled=compiled)
    assert metrics().specializations == compiles(len(SHAPES), 0)
    assert metrics().graphs_compiled == compiles(len(SHAPES))
    assert metrics().generated_kernel_count >= compiles(len(SHAPES))


@pytest.mark.parametrize("case", CASES)
def test_specialised_per_shape(case, per_shape):
    fn, make_inputs = CASES[case]
    compiled = compile_dynamic(fn, dynamic=True)
    for n in SHAPES:
        check(fn, *make_inputs(n), compiled=compiled)
    assert metrics().specializations == len(SHAPES)
    assert metrics().graphs_compiled == len(SHAPES)


def test_miniinductor_compile_dynamic_true():
    fn, make_inputs = CASES["view"]
    compiled = miniinductor.compile(fn, dynamic=True, **TEST_OPTIONS)
    for n in SHAPES:
        check(fn, *make_inputs(n), compiled=compiled)
    assert metrics().specializations == compiles(len(SHAPES), 0)
    assert metrics().graphs_compiled == compiles(len(SHAPES))


def test_default_dynamic_compiles_at_most_twice():
    """dynamic=None: the first shape is a static graph; the second makes Dynamo recompile
    with symbolic sizes, one compile for the second and third shapes (per shape: Triton)."""
    compiled = compile_dynamic(reduction, dynamic=None)
    check(reduction, randn(4, 6), compiled=compiled)
    per_graph = metrics().generated_kernel_count
    assert metrics().graphs_compiled == 1 and per_graph > 0
    check(reduction, randn(5, 6), compiled=compiled)
    check(reduction, randn(6, 6), compiled=compiled)
    assert metrics().graphs_compiled == 1 + compiles(2)
    assert metrics().specializations == compiles(2, 0)
    assert metrics().generated_kernel_count == (1 + compiles(2)) * per_graph


def test_repeated_shape_hits_the_cache(per_shape):
    compiled = compile_dynamic(pointwise, dynamic=True)
    for n in (3, 5, 3, 5, 3):
        check(pointwise, randn(n, 6), randn(n, 6), compiled=compiled)
    assert metrics().specializations == 2
    assert metrics().graphs_compiled == 2
    # Strides are baked in too. A sliced input makes Dynamo recompile with a symbolic row
    # stride; a second row stride is then a new specialisation of that graph.
    for n, row in ((3, 10), (3, 14), (4, 14)):
        check(pointwise, randn(n, row)[:, :6], randn(n, 6), compiled=compiled)
    assert metrics().specializations == 5


def test_mark_dynamic():
    fn, make_inputs = CASES["reduction"]
    x = randn(4, 7)
    torch._dynamo.mark_dynamic(x, 0)   # on this tensor: check() would call with a copy
    compiled = compile_dynamic(fn, dynamic=None)
    torch.testing.assert_close(compiled(x), fn(x))
    assert metrics().specializations == compiles(1, 0)   # the first call already has a symbolic size
    check(fn, randn(6, 7), compiled=compiled)
    assert metrics().specializations == compiles(2, 0)
    assert metrics().graphs_compiled == compiles(2)


@pytest.mark.parametrize("dynamic", [True, None])
def test_int_inputs(dynamic):
    """`n` becomes a SymInt input of the graph (at once, or after it changes once)."""
    def fn(x, n):
        return x.view(n, -1).sum(0) * n

    compiled = compile_dynamic(fn, dynamic=dynamic)
    for n in (2, 3, 4, 3):
        x = randn(12)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert metrics().graphs_compiled == compiles(3, 1 if dynamic else 2)
    assert metrics().specializations == compiles(3 if dynamic else 2, 0)


def test_float_input():
    """Under dynamic=True Dynamo passes a Python float as a 0-d tensor read by `.item()`."""
    def fn(x, a):
        return x * a + 1

    compiled = compile_dynamic(fn, dynamic=True)
    for a in (0.5, 2.5, 0.5):
        x = randn(5)
        torch.testing.assert_close(compiled(x, a), fn(x, a))
    assert metrics().specializations == compiles(2, 0)
    assert metrics().generated_kernel_count == compiles(2)


def test_training_step_dynamic():
    model = MLP([16, 32, 4])
    eager = copy.deepcopy(model)
    compiled = compile_dynamic(model, dynamic=True)
    for batch in (3, 6):
        x, target = randn(batch, 16), randn(batch, 4)
        xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        F.mse_loss(eager(xe), target).backward()
        F.mse_loss(compiled(xc), target).backward()
        torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-5, atol=1e-5)
        for (name, p), q in zip(eager.named_parameters(), model.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")
        eager.zero_grad()
        model.zero_grad()
    assert metrics().specializations == compiles(2, 0)
    assert metrics().graphs_compiled == compiles(4, 2)   # a forward and a backward graph (per batch size)


def test_gpt2_block_sequence_lengths():
    """The causal mask is sliced by the sequence length T, a symbolic size."""
    model = GPT2Block(d_model=32, n_head=4, max_seq=16).eval()
    compiled = miniinductor.compile(model, dynamic=True, **TEST_OPTIONS)
    with torch.no_grad():
        for T in (5, 9):
            check(model, randn(2, T, 32), compiled=compiled, rtol=1e-4, atol=1e-4)
    assert metrics().specializations == compiles(2, 0)
    assert metrics().graphs_compiled == compiles(2)


def test_each_specialisation_logged_once_and_warned_past_the_cap(caplog, monkeypatch, per_shape):
    monkeypatch.setattr(specialize, "WARN_AFTER", 2)
    compiled = compile_dynamic(pointwise, dynamic=True)
    with caplog.at_level(logging.INFO, logger="miniinductor"):
        for n in (2, 3, 4, 5, 2, 5):
            compiled(randn(n, 3), randn(n, 3))
    logged = [r for r in caplog.records if "compiling specialisation" in r.getMessage()]
    assert len(logged) == 4
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "more than 2 shape specialisations" in warnings[0].getMessage()


def test_trace_of_a_specialisation_runs(tmp_path, per_shape):
    """The trace folder's fx_graph.py of a specialised graph has concrete example inputs."""
    pytest.importorskip("graphviz", reason="the trace draws the fusion graph with the graphviz package")
    compiled = miniinductor.compile(size_dependent_view, dynamic=True, trace=str(tmp_path), **TEST_OPTIONS)
    for n in (3, 4):
        compiled(randn(2, n, 2 * n))
    folders = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(folders) == 2
    run = subprocess.run([sys.executable, "fx_graph.py"], cwd=folders[-1], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
