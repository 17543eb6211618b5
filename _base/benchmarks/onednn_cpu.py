"""ATen's BLAS call against oneDNN's matmul for float32 Linears on this CPU.

    python benchmarks/onednn_cpu.py            # the table in docs/benchmarks.md (oneDNN for Linears)
    python benchmarks/onednn_cpu.py --quick    # three shapes, fewer rounds: does it run?

For each `x [M, K] @ W.t() + b` (W a Linear's [N, K] weight): `torch.addmm(b, x, W.t())` (what
eager's Linear calls: MKL on x86) and `torch.ops.mkldnn._linear_pointwise(x, W, b, "none")`,
µs a call, the median of 9 rounds of ~50 ms, interleaved; and the largest difference between
their results. This is what lowering/onednn.py times per shape at compile time (it takes
oneDNN where it is at least 5% faster); the table shows where the line falls on a machine.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

SHAPES = [(1, 256, 256), (4, 256, 256), (64, 256, 768), (512, 256, 768), (512, 256, 1024), (512, 1024, 256),
          (256, 512, 2048), (256, 2048, 512), (4096, 1024, 1024)]


def per_call_us(fns: dict, rounds: int, round_s: float) -> dict:
    calls = {}
    for name, fn in fns.items():
        fn()
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < round_s:
            fn()
            n += 1
        calls[name] = n
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / calls[name] * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        raise SystemExit("this torch has no oneDNN (torch.backends.mkldnn.is_available() is False)")
    shapes, rounds, round_s = (SHAPES[:3], 3, 0.01) if args.quick else (SHAPES, 9, 0.05)
    print(f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    print("| x @ W.t() + b (M x K x N) | ATen addmm us | oneDNN us | ATen / oneDNN | max abs difference |")
    print("|---|---|---|---|---|")
    torch.manual_seed(0)
    with torch.no_grad():
        for m, k, n in shapes:
            x, w, b = torch.randn(m, k), torch.randn(n, k) / k ** 0.5, torch.randn(n)
            aten = lambda: torch.addmm(b, x, w.t())  # noqa: E731
            onednn = lambda: torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")  # noqa: E731
            diff = (aten() - onednn()).abs().max().item()
            us = per_call_us({"aten": aten, "onednn": onednn}, rounds, round_s)
            print(f"| {m} x {k} x {n} | {us['aten']:.1f} | {us['onednn']:.1f} | {us['aten'] / us['onednn']:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
