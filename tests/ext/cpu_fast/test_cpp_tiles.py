"""The loop nests of extension cpu_fast's C++ pointwise kernels on channels-last tensors
(ext/cpu_fast/loops.py, tiles.py): loops in the store's memory order, 16 x 16 tiles for a
transpose (transposed in registers where a whole tile can be read, else copied by a scalar
loop), dims merged where every access walks them as one, per-channel values computed once per
row of a tile, and which tile loop runs inside. Values against eager (tests/test_channels_last_conv.py
checks them with every extension off too), then the loops in the kernel text.
"""
import re

import pytest
import torch
from conftest import TEST_OPTIONS, USING_MINIINDUCTOR, check, extension_on, randn

pytestmark = [pytest.mark.skipif(not USING_MINIINDUCTOR or TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                                 reason="reads the C++ kernels of miniinductor"),
              pytest.mark.skipif(not extension_on("cpu_fast"), reason="the C++ kernels' fast forms: extension cpu_fast")]


def channels_last(*shape):
    return randn(*shape).to(memory_format=torch.channels_last)


def kernel_sources(fn, *args):
    import miniinductor
    (cg,) = miniinductor.explain(fn, *args, **TEST_OPTIONS).graphs
    return [k.source for k in cg.kernels.values()]


def innermost_loop_var(source) -> str:
    """The variable of the innermost loop (omp simd, or explicit vectors and their tail)."""
    return re.findall(r"for \(int64_t (\w+) =", source)[-1]


def test_channels_last_pointwise_loops_in_memory_order():
    x = channels_last(2, 32, 5, 6)
    fn = lambda x: torch.relu(x) * 2   # noqa: E731
    check(fn, x)
    (source,) = kernel_sources(fn, x)
    assert innermost_loop_var(source) == "i1" and "tile" not in source   # C is contiguous
    assert "explicit vectors (cpp_vec.py): yes" in source and "mi_vload(" in source   # along C


@pytest.mark.parametrize("shape", [(2, 32, 4, 16), (2, 24, 3, 30)])
def test_transposing_tiles(shape, poisoned_buffers):
    """channels-last in, NCHW out: tiles, full or cut by the loops' ends. A float tile cut short
    is still transposed in registers where the whole 16 x 16 tile lies inside the input (the rows
    past the edge read, never stored), else copied by a scalar loop: the last tiles of
    (2, 24, 3, 30) take the scalar copy, the others the transpose."""
    x, s = channels_last(*shape), randn(shape[1], 1, 1)
    to_nchw = lambda x, s: (x * s + 1).contiguous()   # noqa: E731
    check(to_nchw, x, s)
    (source,) = kernel_sources(to_nchw, x, s)
    if shape == (2, 32, 4, 16):
        assert "mi_transpose_16x16" in source and innermost_loop_var(source) == "i2", source   # H*W: one loop
    else:
        assert re.search(r"if \(\(.*\) \+ \d+ < 4320\) \{\s*mi_transpose_16x16", source), source


@pytest.mark.parametrize("case", ["merged", "not merged"])
def test_transposing_kernel_merges_dims_walked_as_one(case, poisoned_buffers):
    """A transposing C++ kernel runs H and W as one loop where every access walks them as
    one (CppFastKernel.dims_to_merge): channels-last [2, 32, 5, 6] written NCHW tiles H*W = 30
    (one whole tile of 16 and one cut; W = 6 alone is too short to tile). A load that
    broadcasts along W alone (a [W] bias) keeps them apart: no tiles, W innermost."""
    x = channels_last(2, 32, 5, 6)
    extra = randn(32, 1, 1) if case == "merged" else randn(6)
    fn = lambda x, e: (x * 2 + e).contiguous()   # noqa: E731
    check(fn, x, extra)
    (source,) = kernel_sources(fn, x, extra)
    if case == "merged":
        assert re.search(r"for \(int64_t i2_tile = 0; i2_tile < 30; i2_tile \+= 16\)", source) and "i3" not in source, source
    else:
        assert "tile" not in source and innermost_loop_var(source) == "i3", source


def test_transposing_kernel_computes_per_channel_values_once_per_row(poisoned_buffers):
    """Inside a tile, what does not vary along the innermost loop (a per-channel 1/sqrt(var +
    eps), as a BatchNorm's) is computed before that loop, once per row of the tile; a tile cut
    short by an edge (H*W = 30: one whole tile of 16, one of 14) gets its own copy of the loops,
    the whole ones loop to a constant 16 (tiles.codegen_tile)."""
    x, var = channels_last(2, 32, 5, 6), randn(32, 1, 1).abs()
    fn = lambda x, v: ((x - 1) / torch.sqrt(v + 1e-5)).relu().contiguous()   # noqa: E731
    check(fn, x, var)
    (source,) = kernel_sources(fn, x, var)
    lines = [line.strip() for line in source.splitlines()]
    whole = lines.index("if (i2_tile + 16 <= 30) {")
    inner = lines.index("for (int64_t i2 = i2_tile; i2 < i2_tile + 16; i2 += 1) {")
    sqrt = next(k for k, line in enumerate(lines) if "std::sqrt" in line)
    assert whole < sqrt < inner and "std::min<int64_t>(i2_tile + 16, 30)" in source, source
    assert not any("std::sqrt" in line for line in lines[inner:lines.index("} else {", inner)]), source


@pytest.mark.parametrize("direction", ["to channels-last", "to NCHW"])
def test_tiles_walk_along_the_spatial_dims_innermost(direction, poisoned_buffers):
    """The two loops over tiles: the inner one runs along H*W both ways (as Inductor's), where
    the strided side of the transpose moves by short rows (loops._tiles_along_a): NCHW ->
    channels-last tiles along the load's contiguous dim, channels-last -> NCHW along the store's."""
    x = randn(2, 32, 8, 16)
    x, fn = ((x, lambda x, s: (x * s).contiguous(memory_format=torch.channels_last)) if direction == "to channels-last"
             else (x.to(memory_format=torch.channels_last), lambda x, s: (x * s).contiguous()))
    s = randn(32, 1, 1)
    check(fn, x, s)
    (source,) = kernel_sources(fn, x, s)
    tile_loops = re.findall(r"for \(int64_t (\w+)_tile = 0; \w+ < (\d+);", source)
    assert [n for _, n in tile_loops] == ["32", "128"], source   # C's tiles outside, H*W's inside
