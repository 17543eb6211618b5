"""Column reductions in C++ kernels (ext/cpu_fast, CppFastKernel.reduces_columns): the
reduction loop outside, the contiguous output index inside, and the same values as eager."""
from __future__ import annotations

import re

import pytest
import torch
from conftest import check, extension_on, requires_miniinductor

import miniinductor

pytestmark = [requires_miniinductor, pytest.mark.skipif(not extension_on("cpu_fast"), reason="the C++ kernels' fast forms: extension cpu_fast")]


def sources(fn, *inputs, **tolerances):
    """The C++ kernels of `fn`, its outputs checked against eager on these inputs and on fresh ones."""
    result = miniinductor.explain(fn, *inputs)
    torch.testing.assert_close(result.outputs, fn(*inputs), equal_nan=True, **tolerances)
    fresh = [torch.randn_like(x, dtype=torch.float32).to(x.dtype) for x in inputs]
    check(fn, *fresh, **tolerances)
    return [k.source for cg in result.graphs for k in cg.kernels.values() if k.language == "cpp"]


def loops_inside_r0(source) -> list[str]:
    """The loop variables opened inside the first `r0` loop of `source` (by indentation)."""
    lines = source.splitlines()
    start = next((k for k, line in enumerate(lines) if "for (int64_t r0 = " in line), None)
    if start is None:
        return []
    depth = len(lines[start]) - len(lines[start].lstrip())
    inside = []
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        inside += re.findall(r"for \(int64_t (\w+) = ", line)
    return inside


def is_column_form(source) -> bool:
    return any(re.fullmatch(r"i\d+", v) for v in loops_inside_r0(source))


# float32 sums of up to 2048 values in another order than eager's (ATen sums in blocks)
SUM_TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
@pytest.mark.parametrize("shape", [(37, 129), (64, 256), (1, 100), (5, 7, 130), (2048, 33)])
def test_dim0_reduction_matches_eager_in_column_form(op, shape):
    def fn(x):
        return getattr(x, op)(0)
    (source,) = sources(fn, torch.randn(*shape), **SUM_TOL)
    assert is_column_form(source) == (shape[0] > 1), source   # one row: a copy, no reduction


@pytest.mark.parametrize("threads, width", [(1, 256), (2, 64)])
def test_wide_column_tiles_where_every_thread_still_gets_one(threads, width):
    """300 columns make one 256-wide tile and a cut one on one thread; on two threads the 64-wide
    tiles keep both busy (reduction.py WIDE_COLUMN_TILE: a row's longer run streams faster)."""
    def fn(x):
        return x.sum(0), x.amax(0)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = torch.randn(97, 300)
        x[5, 299] = float("nan")   # in the cut tile's last column: it must stay NaN, its neighbours not
        (source,) = sources(fn, x, **SUM_TOL)
    finally:
        torch.set_num_threads(saved)
    assert is_column_form(source) and f"acc0_tile[{width}]" in source, source


def test_bfloat16_column_sum_accumulates_in_float():
    def fn(x):
        return x.sum(0)
    (source,) = sources(fn, torch.randn(300, 129, dtype=torch.bfloat16))
    assert is_column_form(source) and "float acc0_tile" in source, source


def test_column_reduction_with_prologue_and_epilogue():
    def fn(x, b):
        return torch.relu((x * 2 + b).amax(0)) + (x.exp().sum(0)).log()
    x, b = torch.randn(200, 77), torch.randn(77)
    kernels = sources(fn, x, b, **SUM_TOL)
    assert len(kernels) == 1 and is_column_form(kernels[0]), kernels


def test_column_reduction_keeps_nan_and_infinity():
    def fn(x):
        return x.amax(0), x.amin(0), x.sum(0)
    x = torch.randn(50, 70)
    x[3, 5], x[40, 6], x[7, 69] = float("nan"), float("inf"), -float("inf")
    (source,) = sources(fn, x, **SUM_TOL)
    assert is_column_form(source), source


def test_colsum_and_rowmax_each_walk_memory_in_order():
    """A square input gives both the same loop sizes, but they are not fused (the
    scheduler's read-order rule): the column sum takes the column form, the row max the row form."""
    def fn(x):
        return x.sum(0), x.amax(1)
    column, row = sources(fn, torch.randn(256, 256), **SUM_TOL)
    assert is_column_form(column) and not is_column_form(row), (column, row)


def test_reduction_over_leading_dims_of_3d():
    def fn(x):
        return x.sum((0, 1)), x.prod(0)
    for source in sources(fn, torch.rand(6, 9, 70) + 0.5, **SUM_TOL):
        assert is_column_form(source), source


@pytest.mark.parametrize("fn", [lambda x: x.sum(1), lambda x: x.amax(-1), lambda x: x.argmax(0),
                                lambda x: torch.softmax(x, -1)], ids=["sum1", "amax-1", "argmax0", "softmax"])
def test_row_reductions_argmax_and_row_loops_keep_the_row_form(fn):
    for source in sources(fn, torch.randn(64, 129), **SUM_TOL):
        if "r0" in source:
            assert not is_column_form(source), source


@pytest.mark.sweep
def test_bench_cpu_runs_a_subset_without_rewriting_the_docs():
    """benchmarks/bench_cpu.py (issue 15's CPU table), two of its cases in quick mode: each row
    has three times and miniinductor's error against eager is of rounding size; a run of some
    cases prints its table and leaves docs/benchmarks.md as it was."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[3]
    docs = (root / "docs" / "benchmarks.md").read_text()
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_cpu.py"), "--quick", "--no-cold",
                           "--repeats", "1", "--cases", "pointwise", "colsum_rowmax"],
                          capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for case in ("pointwise", "colsum_rowmax"):
        (row,) = [line for line in done.stdout.splitlines() if line.startswith(f"| {case} | [")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(float(ms) > 0 for ms in cells[2:5]), row
        assert float(cells[7]) < 1e-3, row   # sums of 2048 floats in another order than eager's
    assert "not written" in done.stdout and (root / "docs" / "benchmarks.md").read_text() == docs


@pytest.mark.sweep
def test_bench_cpu_runs_under_mimalloc():
    """`--malloc mimalloc` re-executes bench_cpu.py with mimalloc preloaded: the machine line says
    so, /proc/self/maps was checked inside (a preload that did not load exits non-zero), and the
    row is timed for all three backends with the same error as under glibc. Refuses
    --steady-malloc with it, naming why."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[3]
    script = [sys.executable, str(root / "benchmarks" / "bench_cpu.py"), "--quick", "--no-cold", "--repeats", "1",
              "--malloc", "mimalloc", "--cases", "layernorm"]
    done = subprocess.run(script, capture_output=True, text=True, timeout=600, cwd=root)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "'malloc': 'mimalloc'" in done.stdout, done.stdout[:2000]
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| layernorm | [")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert all(float(ms) > 0 for ms in cells[2:5]), row
    assert float(cells[7]) < 1e-4, row   # layer norm of randn rows of 1024: rounding only
    refused = subprocess.run(script + ["--steady-malloc"], capture_output=True, text=True, timeout=600, cwd=root)
    assert refused.returncode == 2 and "would do nothing" in refused.stderr, refused.stderr[-2000:]
