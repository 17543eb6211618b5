"""`compare()`: eager vs miniinductor vs real Inductor, one row each.

Checks the rows' numbers (errors, kernel counts, bytes, times), the printed table and its
HTML, the report's timings, option forwarding, and that an Inductor failure lands in its
row instead of raising.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import requires_miniinductor

from miniinductor.tools.debug.compare import BACKENDS, HEADER, Comparison, compare, max_abs_error

pytestmark = requires_miniinductor


def layer_norm_gelu(x, w):
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w))


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    torch.manual_seed(0)
    return compare(layer_norm_gelu, torch.randn(32, 64), torch.randn(64), repeats=3)


def test_rows_against_eager(comparison):
    assert [r.backend for r in comparison.rows] == list(BACKENDS)
    eager, mini, ind = (comparison[b] for b in BACKENDS)
    assert eager.max_abs_error == 0 and eager.kernels is None and eager.bytes_moved is None
    assert mini.error is None and ind.error is None, (mini.error, ind.error)
    assert mini.max_abs_error < 1e-4 and ind.max_abs_error < 1e-4
    assert mini.kernels >= 1 and ind.kernels >= 1
    # layer norm + gelu reads x (8 KiB) and w and writes the output (8 KiB), at least
    assert mini.bytes_moved >= 2 * 32 * 64 * 4 and ind.bytes_moved >= 2 * 32 * 64 * 4
    for row in comparison:
        assert row.median_ms > 0 and row.first_call_s >= 0
    torch.testing.assert_close(mini.output, eager.output, rtol=1e-4, atol=1e-5)
    assert len(comparison.graphs) == 1 and comparison.explain.kernels


def test_table_html_and_timings(comparison):
    text = str(comparison)
    for word in HEADER + list(BACKENDS):
        assert word in text
    assert len(text.splitlines()) == 2 + len(BACKENDS)   # header, rule, one line per backend
    html = comparison._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == 1 + len(BACKENDS)
    timings = comparison.timings()
    assert list(timings) == list(BACKENDS) and "median ms" in timings["inductor"]
    with pytest.raises(KeyError, match="no row"):
        comparison["tvm"]


def test_report_takes_timings(comparison, tmp_path):
    page = comparison.write_report(tmp_path / "r.html").read_text()
    assert 'id="timings"' in page and "median ms" in page and "inductor" in page
    page = comparison.explain.write_report(tmp_path / "r2.html", timings=comparison.timings()).read_text()
    assert "max abs err" in page


def test_options_reach_miniinductor():
    x, w = torch.randn(16, 32), torch.randn(32)
    fused = compare(layer_norm_gelu, x, w, repeats=0, inductor=False)
    unfused = compare(layer_norm_gelu, x, w, repeats=0, inductor=False, fusion=False)
    assert unfused["miniinductor"].kernels > fused["miniinductor"].kernels
    assert fused["inductor"].error == "skipped" and fused["miniinductor"].median_ms is None
    with pytest.raises(ValueError, match="fusoin"):
        compare(layer_norm_gelu, x, w, inductor=False, fusoin=False)


def test_inductor_failure_is_reported(monkeypatch):
    import torch._inductor.compile_fx

    def broken(*args, **kwargs):
        raise RuntimeError("inductor is broken today")
    monkeypatch.setattr(torch._inductor.compile_fx, "compile_fx", broken)
    result = compare(lambda x: x.sin() + 1, torch.randn(64), repeats=2)
    ind = result["inductor"]
    assert "inductor is broken today" in ind.error and ind.median_ms is None and ind.output is None
    assert result["miniinductor"].error is None and result["miniinductor"].median_ms > 0
    assert "inductor is broken today" in str(result)


def test_max_abs_error_on_nested_outputs():
    a = (torch.tensor([1.0, float("inf"), float("nan")]), [torch.zeros(2)])
    b = (torch.tensor([1.5, float("inf"), float("nan")]), [torch.ones(2)])
    assert max_abs_error(a, b) == 1.0
    with pytest.raises(ValueError, match="structure"):
        max_abs_error((torch.zeros(1),), [torch.zeros(1)])
    with pytest.raises(ValueError, match="shape"):
        max_abs_error(torch.zeros(2), torch.zeros(3))
