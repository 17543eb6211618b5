"""Float32 Linear-shaped matmuls on the CPU sent to oneDNN where timed faster
(ext/cpu_conv/onednn.py): outputs and gradients against eager with oneDNN forced, ATen kept
where it wins, the choice timed once per problem (then read from the cache), and which
matmuls are never candidates.

The timing is replaced by fixed numbers in most cases (`prefer`), so that the test says
which path ran; `test_real_timing_picks_and_computes` times for real and accepts either
winner. Tolerance: oneDNN sums the K products in another order than MKL; K <= 1024 float32
products of N(0, 1)-ish values differ by a few units in the last place of sums ~sqrt(K):
rtol = 1e-4, atol = 1e-4 (a wrong element is off by O(1)).
"""
from __future__ import annotations

import logging

import pytest
import torch
from conftest import requires_miniinductor, skip_unless_extension

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.ext.cpu_conv import onednn

pytestmark = [requires_miniinductor, skip_unless_extension("cpu_conv"),
              pytest.mark.skipif(not onednn.available(), reason="this torch has no oneDNN")]

TOL = dict(rtol=1e-4, atol=1e-4)
LINEAR_POINTWISE = "torch.ops.mkldnn._linear_pointwise.default("


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIINDUCTOR_CACHE_DIR", str(tmp_path))


def prefer(monkeypatch, winner: str) -> list:
    """Make every timing say `winner` is faster; returns the list of timed problems."""
    timed = []

    def fake(fns):
        timed.append(sorted(fns))
        return {name: 1.0 if name == winner else 2.0 for name in fns}
    monkeypatch.setattr(onednn, "_best_us", fake)
    return timed


def compiled_sources(fn, *args, **options):
    """(compiled outputs, eager outputs, the wrappers' source) for one fresh compile."""
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        out = miniinductor.compile(fn, **options)(*args)
    return out, fn(*args), "\n".join(g.wrapper_source for g in graphs)


def mlp_gelu():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 128)).eval()


def test_linear_gelu_and_linear_through_onednn(monkeypatch, fresh_cache):
    """Linear + GELU (an `_addmm_activation`) and a Linear (`addmm`): two oneDNN calls, the
    GELU one of their post-ops; no ATen matmul left; outputs as eager's."""
    prefer(monkeypatch, "onednn")
    model, x = mlp_gelu(), torch.randn(64, 256)
    with torch.no_grad():
        out, expected, source = compiled_sources(model, x)
    torch.testing.assert_close(out, expected, **TOL)
    assert source.count(LINEAR_POINTWISE) == 2 and "'gelu'" in source, source
    assert "torch.addmm(" not in source and "torch._addmm_activation(" not in source


def test_nan_and_inf_through_onednn_as_eager(monkeypatch, fresh_cache):
    """NaN and +-inf in the input: the rows they reach are NaN/inf where eager's are, through
    the GELU post-op and the plain one. (oneDNN's relu post-op would make a NaN 0: not used.)"""
    prefer(monkeypatch, "onednn")
    model, x = mlp_gelu(), torch.randn(64, 256)
    x[5, 7], x[6, 3], x[7, 1] = float("nan"), float("inf"), -float("inf")
    with torch.no_grad():
        out, expected, source = compiled_sources(model, x)
    assert source.count(LINEAR_POINTWISE) == 2
    assert torch.equal(out.isnan(), expected.isnan()) and torch.equal(out.isinf(), expected.isinf())
    assert out[5:8].isnan().any(), "the special rows must reach the output"
    finite = expected.isfinite()
    torch.testing.assert_close(out[finite], expected[finite], **TOL)


def test_aten_kept_where_it_is_faster_and_the_choice_is_cached(monkeypatch, fresh_cache):
    timed = prefer(monkeypatch, "aten")
    model, x = mlp_gelu(), torch.randn(64, 256)
    with torch.no_grad():
        out, expected, source = compiled_sources(model, x)
        torch.testing.assert_close(out, expected, **TOL)
        assert LINEAR_POINTWISE not in source and len(timed) == 2
        prefer(monkeypatch, "onednn")   # (the cache answers now: no timing, ATen again)
        _, _, source = compiled_sources(model, x)
    assert LINEAR_POINTWISE not in source and len(timed) == 2


def test_option_off_and_small_or_single_row_matmuls_are_not_candidates(monkeypatch, fresh_cache):
    """onednn_linear=False; a product under MIN_MACS; a single row (our own reduction kernel)."""
    timed = prefer(monkeypatch, "onednn")
    model = mlp_gelu()
    with torch.no_grad():
        _, _, source = compiled_sources(model, torch.randn(64, 256), onednn_linear=False)
        assert LINEAR_POINTWISE not in source
        small = torch.nn.Linear(16, 16)
        out, expected, source = compiled_sources(small, torch.randn(8, 16))
        torch.testing.assert_close(out, expected, **TOL)
        assert LINEAR_POINTWISE not in source
        out, expected, source = compiled_sources(model, torch.randn(1, 256))
        torch.testing.assert_close(out, expected, **TOL)
        assert LINEAR_POINTWISE not in source
    assert timed == []


def test_training_step_gradients_with_onednn(monkeypatch, fresh_cache):
    """A training step through the compiled MLP: the forward's matmuls and the backward's
    (mm of a transposed operand among them) may go to oneDNN; loss and every parameter's
    gradient as eager's."""
    prefer(monkeypatch, "onednn")
    model = mlp_gelu().train()
    eager = mlp_gelu().train()
    x = torch.randn(64, 256)
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        loss = miniinductor.compile(lambda x: model(x).square().mean())(x)
    loss.backward()
    expected = eager(x).square().mean()
    expected.backward()
    torch.testing.assert_close(loss, expected, **TOL)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m, name=name: f"{name}: {m}")
    sources = "\n".join(g.wrapper_source for g in graphs)
    assert sources.count(LINEAR_POINTWISE) >= 2, sources


def test_strided_operands_stay_aten(monkeypatch, fresh_cache):
    """mm(a.t(), b), a sliced input and a weight not transposed (`g @ w`, a backward's form):
    not candidates even where oneDNN would win (it copies such operands first, memory the plan
    does not count); only the Linear's form `x @ w.t()` goes. All equal eager's."""
    timed = prefer(monkeypatch, "onednn")

    def f(a, b, c, w, v):
        return a.t() @ b, c[:, 3:] @ b[:, :100], b @ w, b @ v.t()
    args = torch.randn(300, 128), torch.randn(300, 200), torch.randn(128, 303), torch.randn(200, 160), torch.randn(160, 200)
    with torch.no_grad():
        out, expected, source = compiled_sources(f, *args)
    for got, want in zip(out, expected):
        torch.testing.assert_close(got, want, **TOL)
    assert source.count(LINEAR_POINTWISE) == 1 and len(timed) == 1, source


def test_real_timing_picks_and_computes(fresh_cache, caplog):
    """No fixed numbers: the compile times both and logs the table; whichever wins, the output
    is eager's."""
    model, x = mlp_gelu(), torch.randn(128, 256)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="miniinductor.autotune"):
        out, expected, source = compiled_sources(model, x)
    torch.testing.assert_close(out, expected, **TOL)
    lines = [r.getMessage() for r in caplog.records if "on the CPU: ATen" in r.getMessage()]
    assert len(lines) == 2, caplog.text
    assert source.count(LINEAR_POINTWISE) == sum(line.endswith("onednn") for line in lines)


@pytest.mark.sweep
def test_onednn_benchmark_runs():
    """benchmarks/onednn_cpu.py --quick: three shapes timed both ways; both compute the same
    product (float32 sums of K <= 256 terms in two orders: differences under 1e-4)."""
    import re
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "onednn_cpu.py"
    done = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = re.findall(r"^\| (\d+) x (\d+) x (\d+) \| ([0-9.]+) \| ([0-9.]+) \| [0-9.]+ \| ([0-9.e+-]+) \|$", done.stdout, re.M)
    assert len(rows) == 3 and all(float(r[3]) > 0 and float(r[4]) > 0 and float(r[5]) < 1e-4 for r in rows), done.stdout
