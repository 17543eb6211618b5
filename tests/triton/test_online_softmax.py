"""Online softmax (issue 15; triton/softmax.py): a row too long for one block gets its max
and its sum of exp(x - max) from ONE reduction that reads the row once, on both backends.

Softmax, log_softmax, cross-entropy (with ignore_index and label smoothing: both go through
log_softmax) and logsumexp, forward and gradients, in float32 and bfloat16, compared with
eager; rows holding -inf, rows of -inf only, NaN and +inf. Each compile is checked to use
the online reduction (its combine helper in the kernel source, the row loaded once in the
loop that computes it), so no case passes by taking the two-pass route.

Backends: Triton kernels on the CPU through Triton's interpreter, where rows longer than
PERSISTENT_REDUCTION_MAX (4096) are looped and so online by default; and C++, whose policy
does not choose the online form (slower on the CPU, see codegen/policy.py), forced here by a
policy with `online_softmax_min` set (extension cpu_fast's kernel writes it: skipped without). Tolerances: float32 sums of ~5000 exps in another
order (and with other rescalings) than eager's: 1e-5 relative to 1e-4 absolute on values near 1;
bfloat16 results: conftest's defaults (two bf16 ulps) with the float32 reference.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from conftest import check, check_grads, compile_fn, extension_on, requires_miniinductor

import miniinductor.compile_fx as compile_fx
from miniinductor.capture import aot
from miniinductor.codegen.policy import policy_for
from miniinductor.compile_fx import collect_compiled
from miniinductor.triton.policy import PERSISTENT_REDUCTION_MAX

pytest.importorskip("triton")
pytestmark = requires_miniinductor

N = PERSISTENT_REDUCTION_MAX + 903     # looped, and not a multiple of the block (masked lanes)
TOL = dict(rtol=1e-4, atol=1e-5)
COMBINE = {"triton": "_online_softmax_combine(", "cpp": "mi_online_softmax_combine("}
BACKENDS = ["triton", "cpp"]


@pytest.fixture
def online_min(monkeypatch):
    """Set the policy's shortest online row (C++: force the online form; Triton: move it).
    For C++ the capture must decompose softmax through prepare_softmax_online as well (it
    does so only for Triton kernels: capture/aot.py)."""
    def set_min(rows):
        monkeypatch.setattr(compile_fx, "policy_for", lambda device, config: dataclasses.replace(
            policy_for(device, config), online_softmax_min=rows))
        monkeypatch.setattr(aot, "_kernel_backend", lambda config, example_inputs: "triton")
    return set_min


def run_checked(fn, backend, *cases, grads=False, **tol):
    """check (or check_grads) on `backend` for each tuple of inputs in `cases`, with one
    compiled function; returns the compiled graphs' kernel sources."""
    if backend == "cpp" and not extension_on("cpu_fast"):   # (the core's plain kernel refuses it)
        pytest.skip("the C++ online softmax reduction is written by extension cpu_fast's kernel")
    compiled = compile_fn(fn, cpu_backend=backend)
    with collect_compiled() as graphs:
        for args in cases:
            (check_grads if grads else check)(fn, *args, compiled=compiled, **tol)
    return [k.source for g in graphs for k in g.kernels.values()]


def assert_online(sources, backend, reads_in_loop=1):
    """The online reduction is used, and the loop computing it loads its row `reads_in_loop` times."""
    kernels = [s for s in sources if COMBINE[backend] in s]
    assert kernels, f"no online softmax reduction in:\n{sources}"
    for source in kernels:
        start = source.index("for (" if backend == "cpp" else "for roffset")
        loop = source[start:source.index(COMBINE[backend], start)]
        assert loop.count("tl.load(" if backend == "triton" else "in_ptr") == reads_in_loop, source


def specials(x):
    """Rows with -inf inside, of -inf only, with NaN, with +inf (the others plain)."""
    x = x.clone()
    x[0, 7] = x[0, -1] = float("-inf")
    x[1] = float("-inf")
    x[2, 100] = float("nan")
    x[3, 5] = float("inf")
    return x


#: Triton's interpreter folds a reduction's 2048 lanes one Python call at a time (about a second
#: per row and reduction): its forward softmax and cross-entropy cases run in the quick suite,
#: the others with the sweeps
SWEEP_ON_TRITON = pytest.param("triton", marks=pytest.mark.sweep)


@pytest.fixture(params=BACKENDS)
def backend(request, online_min):
    online_min(PERSISTENT_REDUCTION_MAX + 1)
    return request.param


@pytest.fixture(params=["cpp", SWEEP_ON_TRITON])
def backend_sweep_on_triton(request, online_min):
    online_min(PERSISTENT_REDUCTION_MAX + 1)
    return request.param


def softmax_and_log_softmax(x):
    return torch.softmax(x, -1), F.log_softmax(x, -1)


def test_softmax_and_log_softmax(backend):
    x = torch.randn(4, N)
    x[0, 3] = 30.0    # one row with a large max: the sum is rescaled when it is found
    assert_online(run_checked(softmax_and_log_softmax, backend, (x,), (specials(x),), **TOL), backend)


def test_softmax_and_log_softmax_bfloat16(backend_sweep_on_triton):
    x = torch.randn(4, N, dtype=torch.bfloat16)
    sources = run_checked(softmax_and_log_softmax, backend_sweep_on_triton, (x,), (specials(x),))
    assert_online(sources, backend_sweep_on_triton)


def test_softmax_and_log_softmax_gradients(backend_sweep_on_triton):
    def fn(x):
        return torch.softmax(x * 2, -1), F.log_softmax(x, -1)
    sources = run_checked(fn, backend_sweep_on_triton, (torch.randn(3, N, requires_grad=True),), grads=True, **TOL)
    assert_online(sources, backend_sweep_on_triton)


def test_logsumexp(backend_sweep_on_triton):
    def fn(x):
        return torch.logsumexp(x, -1), torch.logsumexp(x, 1, keepdim=True) * 2
    x = torch.randn(4, N) * 10
    y = specials(x)
    y[3, 9] = float("-inf")                # +inf and -inf in a row: +inf, as eager
    backend = backend_sweep_on_triton
    assert_online(run_checked(fn, backend, (x,), (y,), **TOL), backend)
    run_checked(fn, backend, (torch.randn(4, N, requires_grad=True),), grads=True, **TOL)


def cross_entropy_case(backend, grads=True, **kwargs):
    def fn(x, t):
        return F.cross_entropy(x, t, **kwargs)
    t = torch.randint(0, N, (4,))
    t[1] = 3   # ignored with ignore_index=3
    x = torch.randn(4, N, requires_grad=grads)
    cases = [(x, t)] if grads else [(x, t), (specials(x), t)]
    assert_online(run_checked(fn, backend, *cases, grads=grads, rtol=1e-4, atol=1e-4), backend)


def test_cross_entropy(backend):
    cross_entropy_case(backend, reduction="none", grads=False)   # with -inf, NaN, +inf rows


@pytest.mark.parametrize("kwargs", [{}, {"ignore_index": 3}, {"label_smoothing": 0.1, "reduction": "sum"}])
def test_cross_entropy_gradients(backend_sweep_on_triton, kwargs):
    cross_entropy_case(backend_sweep_on_triton, **kwargs)   # label smoothing: a second sum, same loop


def test_cross_entropy_bfloat16(backend_sweep_on_triton):
    def fn(x, t):
        return F.cross_entropy(x.float(), t, reduction="none")
    x, t = torch.randn(4, N, dtype=torch.bfloat16), torch.randint(0, N, (4,))
    assert_online(run_checked(fn, backend_sweep_on_triton, (x, t)), backend_sweep_on_triton)


def test_persistent_rows_keep_two_reductions(online_min):
    """A row that fits one block: no online reduction (the two plain reductions read the row
    already in registers) -- unless the policy says so: then the persistent online form."""
    def fn(x):
        return torch.softmax(x, -1)
    x = torch.randn(8, 300)
    assert not any("_online_softmax" in s for s in run_checked(fn, "triton", (x,), **TOL))
    online_min(64)
    sources = run_checked(fn, "triton", (x,), (specials(x),), **TOL)
    assert any("_online_softmax_reduce(tl.where(xmask & rmask" in s for s in sources)


def saved_for_backward(graphs):
    """{name: (size, dtype)} of the backward graph's inputs that the forward saved."""
    backward = graphs[-1].graph
    return {n: (list(backward.graph_inputs[n].get_size()), backward.graph_inputs[n].get_dtype())
            for n in backward.graph_input_names if n in backward.graph_inputs and not n.startswith("tangents")}


@pytest.mark.skipif(not extension_on("joint_graph"), reason="the joint_graph extension is off")
@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_bfloat16_cross_entropy_backward_recomputes_from_the_logits(backend, online_min):
    """A bfloat16 log_softmax rounds its float32 result to bfloat16 and its backward upcasts it
    again: ext/joint_graph drops that round trip and triton/softmax.py puts our
    prepare_softmax_online on the partitioner's lists, so the forward saves the logits (alive anyway) and two floats per
    row, not a [rows, vocab] log-softmax that the forward would have to write (as Inductor).
    Gradients: conftest's bfloat16 tolerances against eager (which rounds in between)."""
    online_min(PERSISTENT_REDUCTION_MAX + 1)   # C++ through prepare_softmax_online too; looped rows
    x, t = torch.randn(2, N, dtype=torch.bfloat16, requires_grad=True), torch.randint(0, N, (2,))
    with collect_compiled() as graphs:
        sources = run_checked(lambda x, t: F.cross_entropy(x, t), backend, (x, t), grads=True)
    assert_online(sources, backend)
    saved = saved_for_backward(graphs)
    big = {n: s for n, s in saved.items() if s[0] == [2, N]}
    assert big == {"primals_1": ([2, N], torch.bfloat16)}, saved
    assert all(size == [2, 1] and dtype == torch.float32 for n, (size, dtype) in saved.items()
               if size[:1] == [2] and n not in ("primals_1", "primals_2")), saved

