"""ext/cost_model: fusions over reduction loops weighed, bytes saved against strided loads added.

Each case compiles with the extension and checks the decision's numbers, the kernel count
and the outputs against eager (float32 sums of 64 terms: 1e-5)."""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import extension_on  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.ext.cost_model import SECTOR_BYTES  # noqa: E402

pytestmark = pytest.mark.skipif(not extension_on("cost_model"), reason="the cost_model extension is off")
BACKENDS = {"cpp": {}, "triton": {"cpu_backend": "triton"}}


def transposed_sum(x, y):
    t = x.t() + y            # [48, 64]: x read transposed
    return t, t.sum(-1)      # t stored (an output), and summed along its rows


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fusion_adding_strided_loads_is_refused(backend):
    """In one loop over t's rows, x's transposed load steps 48 floats at each step (a whole
    sector per float); apart, t's kernel tiles the transpose and the sum reads t in order.
    saves: t written and read once less (2 x 12 KB); adds: 48*64 floats x (8 - 1) sectors'
    worth (84 KB): refused, both numbers in the decision, and two kernels."""
    x, y = torch.randn(64, 48), torch.randn(48, 64)
    result = miniinductor.explain(transposed_sum, x, y, **BACKENDS[backend])
    (decision,) = result.decisions
    adds = 48 * 64 * 4 * (SECTOR_BYTES // 4 - 1)
    assert not decision.fused and f"saves 24.0 KB, adds {adds / 1024:.1f} KB" in decision.reason, decision
    assert len(result.graphs[0].kernels) == 2
    for got, want in zip(result.outputs, transposed_sum(x, y)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fusion_in_memory_order_is_taken_with_its_numbers(backend):
    """softmax's max, sum and output over rows read in order: every fusion adds nothing, each
    decision shows what it saves, and the result is one kernel."""
    x = torch.randn(8, 16, 64)
    result = miniinductor.explain(lambda x: x.softmax(-1), x, **BACKENDS[backend])
    assert result.decisions and all(d.fused and "adds 0 B" in d.reason for d in result.decisions), result.decisions
    assert len(result.graphs[0].kernels) == 1
    torch.testing.assert_close(result.outputs, x.softmax(-1), rtol=1e-5, atol=1e-6)


def test_off_the_core_fuses_by_bytes_alone():
    x, y = torch.randn(64, 48), torch.randn(48, 64)
    result = miniinductor.explain(transposed_sum, x, y, extensions=[])
    (decision,) = result.decisions
    assert decision.fused and "cost" not in decision.reason
