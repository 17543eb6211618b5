"""Welford variance (issue 15): var, var_mean, std, layer norm and batch norm read each row
once on the C++ kernels (lowering/reductions.var → "welford_reduce"; ext/cpu_fast/kernel.py `_welford`:
lane accumulators sharing one count, folded by Chan's combine; column tiles likewise).

Every case is compared with eager, outputs and gradients, on fresh random inputs: rows
shorter than the lane width (32), with a tail (1000 = 31 * 32 + 8), of one element (with
correction 1 the count is 0: inf/nan as eager), column reductions, several reduced dims,
float64, and symbolic sizes. Two policies: the default one (`BackendPolicy.welford`: rows
whose innermost reduced dim is >= 64, more than one row) and `everywhere` (every variance,
short rows and single rows too), so that both Welford's scalar and lane loops and the
two-pass route are exercised. The generated C++ is checked to hold the Welford reduction
where the policy asks for it, and for layer norm one loop over the row for the statistics
(the Welford m2 and the mean's sum together). The IR interpreter (the accuracy debugger's reference) evaluates it.

Tolerances: float32 results whose sums run in another order than eager's (lanes, Chan's
combine, a reciprocal of the count instead of a division): 1e-5 relative and absolute (1e-4
for gradients: layer and batch norm's backward sums products over the row again); float64:
conftest's defaults. Accuracy on rows of large mean (1e4 + randn) is measured against a
float64 reference rather than eager: see `test_large_mean_rows_are_accurate`.
"""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from conftest import TEST_OPTIONS, check, check_grads, compile_fn, extension_on, requires_miniinductor

import miniinductor
from miniinductor.codegen.policy import BackendPolicy
from miniinductor.compile_fx import collect_compiled
from miniinductor.ir.nodes import ComputedBuffer, Reduction
from miniinductor.tools.debug.interpreter import graph_outputs, run_graph

pytestmark = [requires_miniinductor, pytest.mark.skipif(not extension_on("cpu_fast"), reason="the C++ kernels' fast forms: extension cpu_fast"),
              pytest.mark.skipif(TEST_OPTIONS.get("cpu_backend") == "triton", reason="C++ kernels (Triton keeps two passes)")]
TOL = dict(rtol=1e-5, atol=1e-5)
GRAD_TOL = dict(rtol=1e-4, atol=1e-4)
WELFORD = "mi_welford_update("


@pytest.fixture(params=["policy", "everywhere"])
def policy(request, monkeypatch):
    """'everywhere': a C++ variance is always one Welford reduction (short rows: scalar loops)."""
    if request.param == "everywhere":
        monkeypatch.setattr(BackendPolicy, "welford", lambda self, xnumel, inner: self.welford_min is not None)
    return request.param


def expects_welford(policy, shape, dims):
    """Will this variance be a Welford reduction under `policy`?"""
    dims = sorted(d % len(shape) for d in dims)
    rows = 1
    for d, n in enumerate(shape):
        rows *= 1 if d in dims else n
    return policy == "everywhere" or (rows > 1 and shape[dims[-1]] >= 64)


def run(fn, *args, grads=False, tol=TOL):
    """check (or check_grads) on one compile; the kernel sources of the graphs it made."""
    compiled = compile_fn(fn)
    with collect_compiled() as graphs:
        (check_grads if grads else check)(fn, *args, compiled=compiled, **tol)
    return [k.source for g in graphs for k in g.kernels.values() if k.language == "cpp"]


def assert_welford(sources, expected=True):
    found = any(WELFORD in s for s in sources)
    assert found == expected, f"Welford {'missing from' if expected else 'in'}:\n" + "\n".join(sources)


SHAPES = [  # (shape, reduced dims)
    ((8, 1000), (-1,)),         # lanes and a tail of 8
    ((6, 5), (-1,)),            # shorter than a lane step
    ((4, 64), (-1,)),           # exactly two lane steps
    ((3, 4, 100), (1, 2)),      # two reduced dims: lanes along the inner one, across the outer
    ((300, 70), (0,)),          # a column reduction (column tiles)
    ((2, 3, 130), (0, 2)),      # batch-norm-like: the middle dim kept
]


@pytest.mark.parametrize("shape, dims", SHAPES, ids=[f"{s}-{d}" for s, d in SHAPES])
@pytest.mark.parametrize("correction", [0, 1])
def test_var_var_mean_std(policy, shape, dims, correction):
    def fn(x):
        var, mean = torch.var_mean(x, dims, correction=correction)
        return var, mean, torch.std(x, dims, correction=correction, keepdim=True)
    sources = run(fn, torch.randn(shape))
    assert_welford(sources, expects_welford(policy, shape, dims))


@pytest.mark.parametrize("shape, dims", SHAPES[:3] + SHAPES[4:5], ids=[f"{s}-{d}" for s, d in SHAPES[:3] + SHAPES[4:5]])
def test_var_std_gradients(policy, shape, dims):
    def fn(x):
        return torch.var(x, dims) + torch.std(x, dims, correction=0) * 2
    run(fn, torch.randn(shape, requires_grad=True), grads=True, tol=GRAD_TOL)


def test_full_reduction(policy):
    """A single row: two passes over every thread by default; Welford where forced."""
    sources = run(lambda x: torch.var_mean(x), torch.randn(3000))
    assert_welford(sources, policy == "everywhere")


@pytest.mark.filterwarnings("ignore:var")   # eager's "degrees of freedom is <= 0"
@pytest.mark.parametrize("correction", [0, 1])
def test_one_element_rows(policy, correction):
    """var of one element: 0 with correction 0; 0/0 = nan with correction 1 (count 0), as eager."""
    run(lambda x: (torch.var(x, -1, correction=correction), torch.std(x, 0, correction=correction)), torch.randn(5, 1))


def test_specials_propagate(policy):
    """inf or nan in a row gives a nan variance, as eager's. (Its mean is a sum here, inf for
    a row holding inf, as `x.mean()`; eager's `var_mean` gives nan there, from its Welford.)"""
    x = torch.randn(4, 200)
    x[1, 7], x[2, 150], x[3, 0] = float("inf"), float("nan"), float("-inf")
    run(lambda x: (torch.var(x, -1), torch.std(x, -1, keepdim=True), x.mean(-1)), x)


def test_float64(policy):
    run(lambda x: torch.var_mean(x, -1, correction=1), torch.randn(7, 333, dtype=torch.float64))
    run(lambda x, w, b: F.layer_norm(x, (333,), w, b), torch.randn(7, 333, dtype=torch.float64, requires_grad=True),
        torch.randn(333, dtype=torch.float64, requires_grad=True),
        torch.randn(333, dtype=torch.float64, requires_grad=True), grads=True)


def test_bfloat16_accumulates_in_float(policy):
    run(lambda x: torch.var_mean(x, -1), torch.randn(5, 300).to(torch.bfloat16))


@pytest.mark.parametrize("n", [7, 96, 1000])
def test_layer_norm(policy, n):
    def fn(x, w, b):
        return F.layer_norm(x, (n,), w, b)
    args = (torch.randn(2, 3, n, requires_grad=True), torch.randn(n, requires_grad=True), torch.randn(n, requires_grad=True))
    sources = run(fn, *args, grads=True, tol=GRAD_TOL)
    assert_welford(sources, expects_welford(policy, (6, n), (-1,)))


@pytest.mark.parametrize("shape", [(4, 3, 5, 7), (2, 3, 9, 100)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_batch_norm_training(policy, shape, channels_last):
    """Training batch norm: the output, the running statistics it updates (input mutations)
    and the gradients of the input, weight and bias."""
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(shape).to(memory_format=memory_format).requires_grad_()
    c = shape[1]

    def fn(x, w, b, mean, var):
        return F.batch_norm(x, mean, var, w, b, training=True, momentum=0.3)
    args = (x, torch.randn(c, requires_grad=True), torch.randn(c, requires_grad=True), torch.randn(c), torch.rand(c) + 0.5)
    run(fn, *args, tol=GRAD_TOL)
    sources = run(fn, *args, grads=True, tol=GRAD_TOL)
    assert_welford(sources, expects_welford(policy, shape, (0, 2, 3)))


def test_layer_norm_statistics_are_one_loop():
    """Layer norm's kernel computes its statistics in one loop over the row: the Welford
    reduction (m2) and the sum for the mean, folded into lanes together; then one loop for
    the output. No second reduction loop over the row."""
    n = 1000
    (source,) = run(lambda x, w, b: F.layer_norm(x, (n,), w, b), torch.randn(16, n), torch.randn(n), torch.randn(n))
    assert source.count("for (int64_t r0_lanes") == 1, source
    lanes = source[source.index("for (int64_t r0_lanes"):source.index("mi_welford_fold_lanes<")]
    assert WELFORD in lanes and re.search(r"acc(\d+) = acc\1 \+ tmp", lanes), source   # the m2 and the sum
    row_loops = len(re.findall(r"for \(int64_t r0 = (?!r0_lanes)", source))   # the lanes' tail's, the output's
    assert row_loops == 2 and source.count("mi_welford_fold_lanes<") == 1, source


def test_large_mean_rows_are_accurate(policy):
    """Rows of 1e4 + randn (the inputs' ulp is 1e-3, their variance 1). Welford in float32 on
    the raw values keeps a mean of ~1e4 whose rounding enters m2 at every step (~2e-4 relative
    error); on values shifted by each row's first element, the mean is O(1) and the variance
    as accurate as eager var's (float64 accumulation: ~5e-8 relative) within a few float32
    ulps: 2e-6 relative to the float64 variance of the same float32 inputs. Layer norm's
    statistics are at least as good as eager's (its CPU kernel: float32 Welford, ~2e-4)."""
    x = 1e4 + torch.randn(64, 1000)
    exact = x.double().var(-1, correction=0)
    var = compile_fn(lambda x: torch.var(x, -1, correction=0))(x)
    assert ((var.double() - exact).abs() / exact).max() < 2e-6
    eager_error = ((x.var(-1, correction=0).double() - exact).abs() / exact).max()
    assert eager_error < 2e-6   # (what eager achieves: the bound is no looser than needed)

    def stats(x):
        return torch.ops.aten.native_layer_norm(x, [1000], None, None, 0.0)[2]
    rstd = compile_fn(stats)(x)
    ours = ((rstd.double().squeeze(-1) ** -2 - exact).abs() / exact).max()
    eager = ((stats(x).double().squeeze(-1) ** -2 - exact).abs() / exact).max()
    assert ours <= max(eager, 1e-6), (ours, eager)


def test_sum_beside_a_variance_stays_a_sum(policy):
    """A row sum in the graph of a Welford variance of the same rows is a sum of its own (in
    the same loop), as accurate as eager's: taken from the Welford mean (N * mean), a sum of
    1000 randn was off by 2e-4 from the float64 sum, where eager's and our lane sum are off
    by ~1e-5 (compared with each other, their orders differ: checked here against float64)."""
    x = torch.randn(64, 1000)
    var, total = compile_fn(lambda x: (x.var(-1), x.sum(-1)))(x)
    exact = x.double().sum(-1)
    eager_error = (x.sum(-1).double() - exact).abs().max()
    assert (total.double() - exact).abs().max() <= max(3 * eager_error, 3e-5)
    torch.testing.assert_close(var, x.var(-1), **TOL)


def test_symbolic_sizes():
    """dynamic=True: one compile of a Welford kernel serves every row length, tails included."""
    fn = lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b) + torch.var(x, -1, keepdim=True)  # noqa: E731
    compiled = miniinductor.compile(fn, dynamic=True, **TEST_OPTIONS)
    with collect_compiled() as graphs:
        for rows, n in [(3, 100), (5, 1000), (4, 70), (6, 129)]:
            check(fn, torch.randn(rows, n), torch.randn(n), torch.randn(n), compiled=compiled, **TOL)
    sources = [k.source for g in graphs for k in g.kernels.values()]
    assert len(graphs) == 1 and any(WELFORD in s and "const int64_t s" in s for s in sources), sources


def test_interpreter_evaluates_welford(policy):
    """The IR interpreter (debug_accuracy's reference) computes the Welford buffers too."""
    def fn(x, w):
        return F.layer_norm(x, (100,), w), torch.var_mean(x, 0)
    inputs = (torch.randn(70, 100), torch.randn(100))
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        compile_fn(fn)(*inputs)
    (compiled,) = graphs
    graph = compiled.graph
    assert any(isinstance(b, ComputedBuffer) and isinstance(b.data, Reduction) and b.data.reduction_type == "welford_reduce"
               for b in graph.buffers)
    shapes = {n: tuple(t.shape) for n, t in zip(graph.graph_input_names, graph.example_inputs)}
    ordered = [next(x for x in inputs if tuple(x.shape) == shapes[n]) for n in graph.graph_input_names]
    for got, want in zip(graph_outputs(graph, run_graph(graph, ordered)), torch.utils._pytree.tree_leaves(fn(*inputs))):
        torch.testing.assert_close(got, want, **TOL)
