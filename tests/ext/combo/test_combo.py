"""Combo kernels (ext/combo: schedule.py, kernel.py): an optimizer step over many
parameters runs as a few kernels, and gives eager's numbers.

Every compile here allocates its buffers poisoned (NaN, or an extreme integer), so a part
of a combo kernel that does not run, or a program range that misses elements, shows up
in the parameters. Both backends: C++, and Triton through its interpreter (slow: fewer,
smaller tensors).
"""
from __future__ import annotations

import contextlib
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton decorates anything

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import extension_on  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.compile_fx import collect_compiled  # noqa: E402
from miniinductor.ext.combo.schedule import ComboGroup  # noqa: E402
from miniinductor.runtime import helpers  # noqa: E402

pytestmark = pytest.mark.skipif(not extension_on("combo"), reason="the combo extension is off")

#: float32 ops in the same order as eager's, except that our kernels compute the bias
#: corrections (beta ** step) in float32 where eager's CPU step does them in Python floats
#: (float64): a relative 1e-7 on the step size, a few ulps on a parameter after 3 steps
TOL = dict(rtol=2e-6, atol=2e-6)
STEPS = 3

OPTIMIZERS = {
    "adam_foreach": lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=False),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=True),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, foreach=False),
}
BACKENDS = {"cpp": {}, "triton": {"cpu_backend": "triton"}}


@pytest.fixture(autouse=True)
def poisoned_buffers(monkeypatch):
    """The wrappers compiled in a test allocate NaN-filled buffers (their import reads
    helpers.empty_strided_cpu)."""
    empty = helpers.empty_strided_cpu

    def poisoned(size, stride, dtype):
        out = empty(size, stride, dtype)
        fill = float("nan") if dtype.is_floating_point else True if dtype == torch.bool else torch.iinfo(dtype).min
        return out.fill_(fill)
    monkeypatch.setattr(helpers, "empty_strided_cpu", poisoned)
    torch._dynamo.reset()


def shapes(n: int, scale: int) -> list[tuple]:
    """n parameter shapes of varied sizes and ranks (1-d, 2-d, 3-d; a few elements to a few
    thousand with scale=8)."""
    return [((k + 1) * scale,) if k % 3 == 0 else (k + 2, scale + k % 5) if k % 3 == 1 else (2, k + 1, scale)
            for k in range(n)]


def run_steps(make_opt, n, scale, options):
    """Eager and compiled optimizers from the same parameters, STEPS steps with fresh random
    gradients; returns (eager params, compiled params, their optimizers, compiled graphs)."""
    torch.manual_seed(0)
    params_e = [torch.nn.Parameter(torch.randn(s)) for s in shapes(n, scale)]
    params_c = [torch.nn.Parameter(p.detach().clone()) for p in params_e]
    opt_e, opt_c = make_opt(params_e), make_opt(params_c)
    step_c = miniinductor.compile(opt_c.step, **options)
    profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with collect_compiled() as graphs:
        for k in range(STEPS):
            for p_e, p_c in zip(params_e, params_c):
                p_e.grad = torch.randn_like(p_e)
                p_c.grad = p_e.grad.clone()
            opt_e.step()
            with profile if k == STEPS - 1 else contextlib.nullcontext():   # (compiled already)
                step_c()
    return params_e, params_c, opt_e, opt_c, graphs, aten_copies(profile)


def aten_copies(prof) -> int:
    """How many `aten::copy_` a profiled run called."""
    return sum(e.count for e in prof.key_averages() if e.key == "aten::copy_")


def check_against_eager(params_e, params_c, opt_e, opt_c):
    for k, (p_e, p_c) in enumerate(zip(params_e, params_c)):
        torch.testing.assert_close(p_c.detach(), p_e.detach(), **TOL, msg=lambda m: f"param {k}: {m}")
        for key, value in opt_e.state[p_e].items():
            torch.testing.assert_close(opt_c.state[p_c][key], value, **TOL,
                                       msg=lambda m: f"param {k}, state {key}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_optimizer_step_in_few_kernels(optimizer, backend):
    """32 parameters of mixed sizes (smaller ones under the Triton interpreter): at most 8
    kernels per compiled graph, and the parameters and optimizer state of eager after 3
    steps. The kernels write the parameters and the state in place (AOTAutograd keeps the
    mutations in the graph: capture/aot.py): no copy back into them, in the wrapper or after
    it (C++: the last step's profile has no aten::copy_ at all)."""
    n, scale = (32, 8) if backend == "cpp" else (32, 2)
    params_e, params_c, opt_e, opt_c, graphs, copies = run_steps(OPTIMIZERS[optimizer], n, scale, BACKENDS[backend])
    assert graphs
    for cg in graphs:
        assert len(cg.kernels) <= 8, cg.scheduler
        assert any(isinstance(g, ComboGroup) for g in cg.scheduler.schedule), cg.scheduler
        assert "copy_(" not in cg.wrapper_source and "aten.copy" not in cg.wrapper_source
    state = [t for p in params_c for t in opt_c.state[p].values() if isinstance(t, torch.Tensor)]
    assert len(graphs[-1].scheduler.mutations) == n + len(state), graphs[-1].scheduler.mutations
    if backend == "cpp":   # (Triton's interpreter copies every tensor argument to and from the host)
        assert copies == 0, copies
    check_against_eager(params_e, params_c, opt_e, opt_c)


def test_combo_kernels_option():
    """combo_kernels=False: one kernel per parameter (and per step counter) again; the
    option is listed."""
    *_, graphs, _ = run_steps(OPTIMIZERS["adam_foreach"], 8, 4, {"combo_kernels": False})
    assert all(len(cg.kernels) >= 16 for cg in graphs), [len(cg.kernels) for cg in graphs]
    assert not any(isinstance(g, ComboGroup) for cg in graphs for g in cg.scheduler.schedule)
    assert "combo_kernels" in miniinductor.config.list_options()


def test_decisions_and_sources():
    """explain shows why the groups were combined; the C++ combo runs its parts in one
    OpenMP region (big enough for one), each an `omp for nowait`, a 0-d part an
    `omp single nowait`."""
    def step(xs, n):
        return [x * 2 + 1 for x in xs], n + 1
    xs = [torch.randn(40000 + k) for k in range(3)]
    result = miniinductor.explain(step, xs, torch.tensor(3.0))
    assert any("combined into one combo kernel (4 independent pointwise kernels" in str(d) for d in result.decisions), \
        [str(d) for d in result.decisions]
    (kernel,) = result.kernels
    assert kernel.name.startswith("cpp_for_fused_")
    assert kernel.source.count("#pragma omp parallel\n") == 1, kernel.source
    assert kernel.source.count("#pragma omp for nowait") == 3 and "#pragma omp single nowait" in kernel.source


def test_inplace_not_over_an_input_another_part_reads():
    """t = x @ w dies in the combo of t[:2] * 2 and t + 1. Alone, t + 1 would be written
    over t (C++: every read of t comes before or in the writing node); in a combo it may not
    be: in the OpenMP region the other part's `omp for nowait` may still be reading t."""
    def fn(x, w):
        t = x @ w
        return t[:2] * 2, t + 1
    x, w = torch.randn(6, 5), torch.randn(5, 6)
    with collect_compiled() as graphs:
        got = miniinductor.compile(fn)(x, w)
    (cg,) = graphs
    (kernel,) = cg.kernels.values()
    assert kernel.name.startswith("cpp_for_") and not kernel.inplace, (kernel.name, kernel.inplace)
    for g, e in zip(got, fn(x, w)):
        torch.testing.assert_close(g, e)


def test_triton_combo_source():
    """One @triton.jit function per part and a kernel that splits the program ids."""
    def fn(a, b):
        return a * 2, b + 1
    compiled = miniinductor.compile(fn, cpu_backend="triton")
    a, b = torch.randn(3000), torch.randn(5, 7)
    with collect_compiled() as graphs:
        got = compiled(a, b)
    (kernel,) = graphs[0].kernels.values()
    assert kernel.name.startswith("triton_for_fused_"), kernel.name
    assert "if pid < 3:" in kernel.source and "elif pid < 4:" in kernel.source, kernel.source
    for g, e in zip(got, fn(a, b)):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_transposing_copies(backend):
    """The q, k, v copies of an attention block, k transposed: one C++ combo kernel (its k
    part a loop nest like the others: one OpenMP region), while Triton keeps the transposing
    copy in a tiled kernel of its own. Eager's values either way (the buffers are poisoned)."""
    def fn(qkv):
        q, k, v = qkv.view(2, 16, 3, 4, 8).unbind(2)
        return q.transpose(1, 2).contiguous(), k.permute(0, 2, 3, 1).contiguous(), v.transpose(1, 2).contiguous()
    qkv = torch.randn(2, 16, 96)
    with collect_compiled() as graphs:
        got = miniinductor.compile(fn, **BACKENDS[backend])(qkv)
    for g, e in zip(got, fn(qkv)):
        torch.testing.assert_close(g, e)
    (cg,) = graphs
    combos = [g for g in cg.scheduler.schedule if isinstance(g, ComboGroup)]
    if backend == "cpp":
        assert len(cg.kernels) == 1 and len(combos) == 1, cg.scheduler
    else:
        assert all(len(c.parts) < 3 for c in combos) and len(cg.kernels) >= 2, cg.scheduler
