"""Column reductions on the CPU: x.sum(0), and (x.sum(0), x.amax(1)), eager vs miniinductor vs Inductor.

    python benchmarks/column_reduction.py [--size 2048] [--repeats 15]

Prints a markdown table (the section "Column reductions" of docs/benchmarks.md): the median
over repeats of the mean time per call (each repeat runs the callable for about 100 ms).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import miniinductor

CASES = {"x.sum(0)": lambda x: x.sum(0), "(x.sum(0), x.amax(1))": lambda x: (x.sum(0), x.amax(1))}


def mean_ms(fn, x, target_s=0.1) -> float:
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < target_s:
        fn(x)
        calls += 1
    return 1000 * elapsed / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    x = torch.randn(args.size, args.size)
    print(f"| case ({args.size}x{args.size} fp32) | eager ms | miniinductor ms | inductor ms | eager/mini |")
    print("|---|---|---|---|---|")
    for name, fn in CASES.items():
        backends = {"eager": fn, "mini": miniinductor.compile(fn),
                    "inductor": torch.compile(fn, backend="inductor", dynamic=False)}
        for compiled in backends.values():
            torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-3)
        times = {b: [] for b in backends}
        for _ in range(args.repeats):   # interleaved, so that load changes hit all three
            for b, compiled in backends.items():
                times[b].append(mean_ms(compiled, x))
        med = {b: statistics.median(t) for b, t in times.items()}
        print(f"| {name} | {med['eager']:.3f} | {med['mini']:.3f} | {med['inductor']:.3f} | "
              f"{med['eager'] / med['mini']:.2f} |", flush=True)


if __name__ == "__main__":
    with torch.no_grad():
        main()
