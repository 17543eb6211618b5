"""Channels-last or not, decided by timing the graph's own convolutions (GPU and CPU).

Inductor decides its GPU layout by rules and constants measured once on a benchmark set
(`GraphLowering.decide_layout_opt` in `torch/_inductor/graph.py`: grouped, small-channel and
"in-out" convolutions each weighted by their average channels-last speed-up). Those
averages are wrong for a given convolution often enough that channels-last loses to eager's
NCHW on some graphs (a convolution of 8 input channels over a large image, where cuDNN's NCHW
kernel is faster). Here the decision is measured instead: each convolution of the graph is run
by ATen on random inputs of its traced sizes, NCHW and channels-last, and the graph goes
channels-last when the channels-last total is smaller. It is a compile-time cost of a few
runs per distinct convolution, remembered for the process.

Simplified: the copies the layout adds or removes around the convolutions (our kernels'
transposing reads and writes, cuDNN's own conversions) are not timed, only the
convolution calls, each as often as the graph calls it.
"""
from __future__ import annotations

import functools
import logging
import time

import torch
from torch._dispatch.python import no_python_dispatcher
from torch._subclasses.fake_tensor import unset_fake_temporarily

log = logging.getLogger("miniinductor")
aten = torch.ops.aten
WARMUP, REPEATS = 3, 10   # untimed runs (cuDNN picks and builds its kernel on the first), then timed ones: the median is kept


def _memory_format(dim: int):
    return torch.channels_last if dim == 4 else torch.channels_last_3d


@functools.lru_cache(maxsize=None)
def _conv_time(x_shape, w_shape, has_bias, params, dtype, device: str, channels_last: bool) -> float:
    """The median time (ms) of one ATen convolution call with these sizes, in one layout
    (CUDA events on the GPU, the wall clock on the CPU)."""
    x = torch.randn(x_shape, device=device, dtype=dtype)
    w = torch.randn(w_shape, device=device, dtype=dtype)
    b = torch.randn(w_shape[1] * params[-1] if params[3] else w_shape[0], device=device, dtype=dtype) if has_bias else None
    if channels_last:
        x, w = (t.contiguous(memory_format=_memory_format(t.dim())) for t in (x, w))
    times = []
    for k in range(WARMUP + REPEATS):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            aten.convolution(x, w, b, *params)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end)
        else:
            start = time.perf_counter()
            aten.convolution(x, w, b, *params)
            elapsed = (time.perf_counter() - start) * 1e3
        if k >= WARMUP:
            times.append(elapsed)
    return sorted(times)[len(times) // 2]


def channels_last_pays(convs, value=lambda node: node.meta["val"]) -> bool:
    """Do the graph's convolutions (FX nodes of aten.convolution) take less time channels-last?
    `value(node)`: an input's tensor (its meta's; a frozen weight's is the graph's attribute)."""
    totals = [0.0, 0.0]
    # real tensors, timed as eager runs them: the pass runs under the compile's FakeTensorMode
    # (fake convolutions take the same time in either layout) and its Python dispatcher
    with unset_fake_temporarily(), no_python_dispatcher():
        for node in convs:
            x, w = (value(a) for a in node.args[:2])
            params = tuple(tuple(p) if isinstance(p, (list, tuple)) else p for p in node.args[3:])
            key = (tuple(x.shape), tuple(w.shape), node.args[2] is not None, params, x.dtype, x.device.type)
            for k in (0, 1):
                totals[k] += _conv_time(*key, channels_last=bool(k))
    log.info("layout_opt: %d convolution(s) take %.3f ms NCHW, %.3f ms channels-last", len(convs), *totals)
    return totals[1] < totals[0]
