"""The core's C++ kernel alone (codegen/cpp.py, CppKernel): every extension off
(`extensions=[]`), so that no fast loop form (extension cpu_fast: tiles, explicit vectors,
lane and column-tiled reductions, Welford) can hide a bug of the plain loops. Pointwise
kernels with broadcasts and transposes, row and column reductions with NaN, variance and
layer norm (two passes), softmax, argmax/argmin, padded pooling (masked loads), gathers
(indirect indexing), symbolic sizes, and a small MLP's training step, each against eager on
fresh random inputs with every buffer the compiled code allocates poisoned; the generated C++
is checked to be the plain kernel's (no vectors, lanes or tiles).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import TEST_OPTIONS, USING_MINIINDUCTOR, check, check_grads, compile_fn

pytestmark = pytest.mark.skipif(not USING_MINIINDUCTOR or TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                                reason="compiles miniinductor's C++ kernels")
CORE = {"extensions": []}
#: what only extension cpu_fast writes: vectors, lane arrays, tiles, Welford states
FAST_FORMS = ("mi_vload", "mi_vstore", "mi_vsplat", "MI_VEC_LANES", "_lanes", "_tile", "mi_transpose",
              "mi_welford", "explicit vectors")
SUM_TOL = dict(rtol=1e-4, atol=1e-5)


def run_plain(fn, *draws, **tol) -> list[str]:
    """`fn` compiled with every extension off, checked against eager on each set of inputs that
    a `draws` callable returns (fresh random ones per call, twice each); the kernel sources."""
    from miniinductor.compile_fx import collect_compiled
    compiled = compile_fn(fn, **CORE)
    with collect_compiled() as graphs:
        for draw in draws:
            for _ in range(2):
                check(fn, *draw(), compiled=compiled, **tol)
    sources = [k.source for g in graphs for k in g.kernels.values() if k.language == "cpp"]
    assert sources, "no C++ kernel was generated"
    for source in sources:
        assert not any(form in source for form in FAST_FORMS), source
    return sources


def with_nan(x):
    x = x.clone()
    x.view(-1)[::7] = float("nan")
    return x


def test_pointwise_with_broadcasts(poisoned_buffers):
    def fn(x, y, z):
        return torch.relu(x + y * z).exp() - 1, (x * 2).sigmoid() + z
    run_plain(fn, lambda: (torch.randn(4, 3, 8), torch.randn(3, 1), torch.randn(8)),
              lambda: (torch.randn(2, 1, 5), torch.randn(7, 1), torch.randn(5)))


def test_transposes(poisoned_buffers):
    """A transposing copy, and a channels-last input written NCHW (in the logical order: one
    side strides)."""
    run_plain(lambda x: (x.t() * 2).contiguous(), lambda: (torch.randn(33, 70),))
    run_plain(lambda x, s: (x * s + 1).contiguous(),
              lambda: (torch.randn(2, 24, 3, 30).to(memory_format=torch.channels_last), torch.randn(24, 1, 1)))


@pytest.mark.parametrize("n", [7, 130])
def test_row_and_column_reductions(poisoned_buffers, n):
    def fn(x):
        return x.sum(-1), x.amax(-1), x.sum(0), x.amin(0), x.mean((0, 1)) if x.dim() == 3 else x.prod(0)
    sources = run_plain(fn, lambda: (with_nan(torch.randn(37, n)),), lambda: (torch.randn(5, n),), **SUM_TOL)
    assert any("reduction(+:acc" in s for s in sources), sources
    run_plain(fn, lambda: (torch.randn(3, 4, n),), **SUM_TOL)


def test_variance_and_layer_norm_in_two_passes(poisoned_buffers):
    ln = nn.LayerNorm(200)

    def fn(x):
        return x.var(-1), torch.var_mean(x, 0, correction=0), ln(x)
    with torch.no_grad():
        run_plain(fn, lambda: (torch.randn(16, 200) * 3 + 1,), **SUM_TOL)


def test_softmax_and_log_softmax(poisoned_buffers):
    def fn(x):
        return torch.softmax(x, -1), F.log_softmax(x, 0)
    run_plain(fn, lambda: (torch.randn(9, 300),), lambda: (with_nan(torch.randn(4, 65)),), **SUM_TOL)


def test_argmax_argmin(poisoned_buffers):
    def fn(x):
        return x.argmax(-1), x.argmin(0), x.argmax()
    run_plain(fn, lambda: (torch.randn(13, 70),), lambda: (with_nan(torch.randn(5, 9)),))


def test_padded_pooling(poisoned_buffers):
    def fn(x):
        return (F.max_pool2d(x, 3, 2, padding=1), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                F.pad(x, (1, 2, 0, 1), value=-1.0) * 2)
    run_plain(fn, lambda: (torch.randn(2, 5, 9, 11),),
              lambda: (torch.randn(1, 16, 8, 8).to(memory_format=torch.channels_last),))


def test_indirect_gathers(poisoned_buffers):
    def fn(w, idx, x, j):
        return w[idx] * 2, torch.gather(x, 1, j), F.embedding(idx, w).sum(-1)
    run_plain(fn, lambda: (torch.randn(50, 16), torch.randint(0, 50, (7,)), torch.randn(6, 10),
                           torch.randint(0, 10, (6, 4))))


def test_symbolic_sizes(poisoned_buffers):
    def fn(x):
        return torch.softmax(x, -1) * 2, x.sum(0)
    compiled = compile_fn(fn, dynamic=True, **CORE)
    for n in (40, 17, 1031):
        check(fn, torch.randn(3, n), compiled=compiled, **SUM_TOL)


def test_mlp_training_step():
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.LayerNorm(64), nn.ReLU(),
                          nn.Linear(64, 10))
    loss = lambda x, y: F.cross_entropy(model(x), y)   # noqa: E731
    compiled = compile_fn(loss, **CORE)
    for _ in range(2):
        check_grads(loss, torch.randn(8, 32, requires_grad=True), torch.randint(0, 10, (8,)),
                    compiled=compiled, rtol=1e-4, atol=1e-4)


def test_a_welford_reduction_is_refused_clearly(monkeypatch):
    """With cpu_fast off the C++ policy never asks for a Welford variance; forced, the plain
    kernel says which kernel writes it rather than generating something wrong."""
    from miniinductor import compile_fx
    from miniinductor.lowering import graph as lowering_graph
    original = compile_fx.policy_for
    forced = lambda *args: dataclasses.replace(original(*args), welford_min=1)   # noqa: E731
    monkeypatch.setattr(compile_fx, "policy_for", forced)
    monkeypatch.setattr(lowering_graph, "policy_for", forced)
    with pytest.raises(Exception, match="welford_reduce: the plain C\\+\\+ kernel"):
        compile_fn(lambda x: x.var(-1), **CORE)(torch.randn(4, 100))
