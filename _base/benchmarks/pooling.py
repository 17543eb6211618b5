"""Pooling, forward and backward: eager, miniinductor and Inductor side by side.

    python benchmarks/pooling.py                 # CPU (C++ kernels), two threads
    python benchmarks/pooling.py --device cuda   # GPU (Triton kernels)

Cases (fp32): max_pool2d(x, 3, 2, 1) on [16, 64, 112, 112] NCHW and channels-last, values
alone and with indices; max_pool2d forward + backward and avg_pool2d(x, 3, 2, 1) (NCHW and
channels-last) on [16, 64, 56, 56] (GPU: batch 64). Each is warmed up, then the median of `--repeats` calls is
printed in ms (CUDA: `triton.testing.do_bench`). Every compiled output (and gradient) is
checked against eager first. docs/benchmarks.md "Max pooling on the CPU" has the results.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import miniinductor


def cases(device: str) -> dict:
    batch = 64 if device == "cuda" else 16
    big = torch.randn(batch, 64, 112, 112, device=device)
    small = torch.randn(batch, 64, 56, 56, device=device)
    cl = big.contiguous(memory_format=torch.channels_last)
    values = lambda x: F.max_pool2d(x, 3, 2, 1)                                               # noqa: E731
    indices = lambda x: torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])   # noqa: E731
    return {
        "max_pool2d NCHW, values": (values, big, False),
        "max_pool2d NCHW, values and indices": (indices, big, False),
        "max_pool2d channels-last, values": (values, cl, False),
        "max_pool2d channels-last, values and indices": (indices, cl, False),
        "max_pool2d forward + backward": (values, small, True),
        "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), small, False),
        "avg_pool2d channels-last": (lambda x: F.avg_pool2d(x, 3, 2, 1),
                                     small.contiguous(memory_format=torch.channels_last), False),
    }


def timer(device: str, repeats: int):
    if device == "cuda":
        from triton.testing import do_bench
        return lambda fn: do_bench(fn)

    def median_ms(fn):
        for _ in range(3):
            fn()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1e3
    return median_ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    measure = timer(args.device, args.repeats)
    print("| case | eager ms | miniinductor ms | Inductor ms |\n|---|---|---|---|")
    for name, (fn, x, backward) in cases(args.device).items():
        torch._dynamo.reset()
        x = x.clone().requires_grad_(backward)
        grad = None
        row = []
        for compiled in (fn, miniinductor.compile(fn), torch.compile(fn)):
            out = compiled(x)
            if backward:
                grad = torch.randn_like(out) if grad is None else grad

                def step(compiled=compiled):
                    x.grad = None
                    compiled(x).backward(grad)
                step()
                result = x.grad.clone()
            else:
                step = (lambda compiled=compiled: compiled(x))
                result = out
            if compiled is fn:
                reference = result
            else:
                for a, b in zip(result if isinstance(result, tuple) else (result,),
                                reference if isinstance(reference, tuple) else (reference,)):
                    torch.testing.assert_close(a, b)
            row.append(measure(step))
        print(f"| {name} | " + " | ".join(f"{ms:.3f}" for ms in row) + " |", flush=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
