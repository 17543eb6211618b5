"""A reduction's loops in memory order, short ones merged (CppFastKernel.dims_to_widen).

A reduction over several dims walks them nested in the IR's order; where that is not memory
order (a channels-last tensor summed over C, H and W: C has stride 1 but is the outermost
reduced dim) each step of the innermost loop jumped a row, and where the innermost reduced dim
is short (an instance norm over 6x6x6) its simd loop ran 6 of 16 lanes. The kernel is then
generated again over the reduced dims in memory order, runs of them merged. Values as eager's;
an argmax keeps its order (the first of equal values is its answer).
"""
from __future__ import annotations

import re

import pytest
import torch
from conftest import TEST_OPTIONS, USING_MINIINDUCTOR, check, extension_on, randn

import miniinductor

pytestmark = [
    pytest.mark.skipif(not USING_MINIINDUCTOR or TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                       reason="C++ kernels only"),
    pytest.mark.skipif(not extension_on("cpu_fast"), reason="the C++ kernels' fast forms: extension cpu_fast"),
]


def reduction_loops(fn, *args) -> list[list[str]]:
    """Each kernel's reduction loop bounds (`for (int64_t rK = 0; rK < N`), in the order written."""
    kernels = miniinductor.explain(fn, *args, **TEST_OPTIONS).kernels
    return [re.findall(r"for \(int64_t r\d+ = 0; r\d+ < (\d+);", k.source) for k in kernels]


def test_short_reduced_dims_are_one_loop():
    def instance_stats(x):                       # [2, 16, 6, 6, 6] -> [2, 16] twice
        return x.mean((2, 3, 4)), x.var((2, 3, 4))
    x = randn(2, 16, 6, 6, 6)
    check(instance_stats, x, rtol=1e-5, atol=1e-5)
    assert all(set(loops) == {"216"} for loops in reduction_loops(instance_stats, x) if loops)


def test_channels_last_sum_reads_channels_innermost():
    def pooled_sum(x):                           # [2, 64, 7, 7] channels-last -> [2]
        return torch.sigmoid(x).sum((1, 2, 3))
    x = randn(2, 64, 7, 7).contiguous(memory_format=torch.channels_last)
    check(pooled_sum, x, rtol=1e-5, atol=1e-4)
    (kernel,) = miniinductor.explain(pooled_sum, x, **TEST_OPTIONS).kernels
    innermost = re.findall(r"for \(int64_t (r\d+) = ", kernel.source)[-1]   # (a lane loop's too)
    (load,) = re.findall(r"in_ptr0\[([^\]]*)\]", kernel.source)
    assert re.search(rf"(^|\+ ){innermost}$", load.strip()), kernel.source   # stride 1: C, innermost


def test_argmax_keeps_its_order():
    def argmax_rows(x):                          # a permuted view: its reduced dims not in memory order
        return x.permute(0, 3, 1, 2).reshape(4, -1).argmax(1)
    x = torch.randint(0, 3, (4, 5, 6, 7)).float()   # many ties: the first index of the maximum wins
    check(argmax_rows, x)


def test_a_reduction_that_reads_nothing():
    """The gradient of a rounding division is zeros; the broadcast divisor's is a sum of them
    over the rows: a reduction with no access of its loop variables to order (it raised
    `max() arg is an empty sequence`)."""
    x, y = randn(4, 5).requires_grad_(), (randn(5).abs() + 1).requires_grad_()
    out = miniinductor.compile(lambda x, y: torch.div(x, y, rounding_mode="floor"))(x, y)
    gx, gy = torch.autograd.grad(out, (x, y), randn(4, 5))
    torch.testing.assert_close(out, torch.div(x, y, rounding_mode="floor"))
    torch.testing.assert_close((gx, gy), (torch.zeros_like(x), torch.zeros_like(y)))
