"""Loop-invariant code motion in C++ pointwise kernels (ext/cpu_fast/loops.py `hoist_invariant`,
tiles.hoisted): a value that varies only with outer loops (a BatchNorm's per-channel
1/sqrt(var + eps)) is computed inside the outermost loop it depends on, not in every vector;
what may not move (a masked lambda's loads, a read of a buffer the kernel writes) stays.
Outputs are checked against eager with poisoned buffers (an element not written shows as NaN).
"""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from conftest import TEST_OPTIONS, USING_MINIINDUCTOR, check, extension_on, randn

from miniinductor.ext.cpu_fast.loops import hoist_invariant

needs_cpp = pytest.mark.skipif(not USING_MINIINDUCTOR or TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                               reason="reads miniinductor's C++ kernels")
fast = pytest.mark.skipif(not extension_on("cpu_fast"), reason="the C++ kernels' fast forms: extension cpu_fast")


def test_hoist_invariant_places_each_line_by_what_it_reads():
    lines = ["auto tmp0 = in_ptr0[i1];",                      # varies with i1 only
             "auto tmp1 = std::sqrt(tmp0);",                   # ... through tmp0
             "auto tmp2 = in_ptr1[64*i1 + i2];",               # innermost
             "auto tmp3 = mi_mul(tmp2, tmp1);",
             "auto tmp4 = [&] {",                              # a masked load: stays, inside and out
             "    auto tmp5 = in_ptr2[i1];",
             "    return tmp5;",
             "};",
             "auto tmp6 = i1 >= 1 ? tmp4() : 0.0f;",
             "auto tmp7 = in_out_ptr0[i1];",                   # a buffer the kernel writes: stays
             "auto tmp8 = 2.0f;",                              # no loop: the outermost allowed
             "out_ptr0[64*i1 + i2] = tmp3 + tmp6 + tmp7 + tmp8;"]
    outer, middle, inner = hoist_invariant(lines, ["i0", "i1", "i2"], first=0)
    assert outer == ["auto tmp8 = 2.0f;"]
    assert middle == ["auto tmp0 = in_ptr0[i1];", "auto tmp1 = std::sqrt(tmp0);"]
    assert inner == [line for line in lines if line not in outer + middle]
    # not above `first` (the innermost loop of a collapsed group)
    assert hoist_invariant(lines, ["i0", "i1", "i2"], first=1)[0] == []


def sources(fn, *args) -> str:
    import miniinductor
    (cg,) = miniinductor.explain(fn, *args, **TEST_OPTIONS).graphs
    return "\n".join(k.source for k in cg.kernels.values())


def batch_norm_relu(x, mean, var, w, b):
    return ((x - mean) / torch.sqrt(var + 1e-5) * w + b).relu()


@needs_cpp
@fast
@pytest.mark.parametrize("shape", [(2, 32, 5, 20), (2, 16, 7, 6), (4, 64, 32, 32)])
def test_per_channel_values_leave_the_inner_loops(shape, poisoned_buffers):
    """NCHW BatchNorm + ReLU: the sqrt and the division run once per (image, channel) row,
    before the loop over H (or H*W, merged where W is not a whole number of vectors) opens --
    with explicit vectors, and under `parallel for collapse(2)` (the largest)."""
    n, c, h, w = shape
    x = randn(*shape)
    stats = [randn(c, 1, 1) for _ in range(4)]
    stats[1] = stats[1].abs() + 0.5
    check(batch_norm_relu, x, *stats)
    lines = [line.strip() for line in sources(batch_norm_relu, x, *stats).splitlines()]
    h_loop = next(k for k, line in enumerate(lines) if re.match(r"for \(int64_t i2 = 0; i2 < ", line))
    sqrts = [k for k, line in enumerate(lines) if "sqrt" in line and "auto tmp" in line]
    assert sqrts and sqrts[0] < h_loop, "\n".join(lines)
    # once in the whole-vector part, once more only in the scalar tail (which keeps its body)
    assert len([k for k in sqrts if k > h_loop]) <= 1, "\n".join(lines)


@needs_cpp
def test_masked_loads_stay_under_their_mask(poisoned_buffers):
    """A padded read times a per-channel scale: the padded load (masked) is not moved out of
    its lambda even where its index does not vary along W; values as eager's."""
    x, s = randn(2, 16, 6, 20), randn(16, 1, 1)
    fn = lambda x, s: F.pad(x, (0, 0, 2, 1)) * torch.exp(s)   # noqa: E731
    check(fn, x, s)
    check(lambda x, s: F.pad(x[:, :, :, :1].expand(2, 16, 6, 20), (0, 0, 2, 1)) * s, x, s)


@needs_cpp
@pytest.mark.parametrize("shape", [(2, 0, 5, 20), (0, 4, 5, 20)])
def test_empty_loops_move_nothing(shape):
    """A size of 0: nothing moved out of a loop that never runs (the kernel is not called or
    reads nothing); results as eager's."""
    x = torch.randn(*shape)
    check(lambda x, v: x / torch.sqrt(v + 1), x, torch.rand(shape[1], 1, 1))


@pytest.mark.sweep
def test_layout_kernels_benchmark_runs():
    """benchmarks/layout_kernels_cpu.py --quick: three graphs, each compiled by both compilers and
    checked against eager inside the script (rtol = atol = 1e-5: BatchNorm's few float32 ops),
    then timed; every row has three positive times."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[3] / "benchmarks" / "layout_kernels_cpu.py"
    done = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = re.findall(r"^\| (\w+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|", done.stdout, re.M)
    assert [r[0] for r in rows] == ["bn_relu_nchw", "to_nhwc", "bn_relu_nhwc"], done.stdout
    assert all(float(t) > 0 for r in rows for t in r[1:]), done.stdout
