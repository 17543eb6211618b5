"""The C++ kernels around a convolution, one graph each: eager vs miniinductor vs Inductor.

    python benchmarks/layout_kernels_cpu.py            # the table in docs/benchmarks.md (layout kernels)
    python benchmarks/layout_kernels_cpu.py --quick    # fewer rounds: does it run?

Each graph compiles to one C++ kernel (ours and Inductor's), so its time is that kernel's plus
each compiler's per-call cost (Dynamo's guards, the wrapper: ~15 us for either, a trivial graph):

  bn_relu_nchw  BatchNorm (eval, per-channel statistics) + ReLU, NCHW in and out: what the
                per-channel values cost when computed in every vector (codegen/cpp_loops.py
                `hoist_invariant` computes them once per (image, channel) row)
  to_nhwc       NCHW -> channels-last copy: a convolution's input under layout optimisation
  bn_relu_nhwc  BatchNorm + ReLU, channels-last in, NCHW out: the convolution's epilogue
                (both transposes tiled 16 x 16; `_tiles_along_a` picks which tile loop is inner)

[8, 64, 32, 32] float32; us a call, the median of interleaved rounds whose order rotates, and
the bytes each call must move (read once, write once) over that time.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import miniinductor

SHAPE = (8, 64, 32, 32)


def bn_relu(x, mean, var, w, b):
    return ((x - mean) / torch.sqrt(var + 1e-5) * w + b).relu()


def cases() -> dict:
    """{name: (fn, args)}."""
    torch.manual_seed(0)
    c = SHAPE[1]
    stats = [torch.randn(c, 1, 1), torch.rand(c, 1, 1) + 0.5, torch.randn(c, 1, 1), torch.randn(c, 1, 1)]
    x = torch.randn(SHAPE)
    return {"bn_relu_nchw": (bn_relu, (x, *stats)),
            "to_nhwc": (lambda x: x.contiguous(memory_format=torch.channels_last), (x,)),
            "bn_relu_nhwc": (lambda x, *s: bn_relu(x, *s).contiguous(), (x.contiguous(memory_format=torch.channels_last), *stats))}


def per_call_us(fns: dict, args, rounds: int, calls: int) -> dict:
    names = list(fns)
    samples = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(calls):
                fns[name](*args)
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, calls = (3, 5) if args.quick else (31, 100)
    print(f"{torch.get_num_threads()} threads, torch {torch.__version__}, {list(SHAPE)} float32")
    print("| graph | eager us | miniinductor us | Inductor us | eager / mini | Inductor / mini | GB/s (mini) |")
    print("|---|---|---|---|---|---|---|")
    with torch.no_grad():
        for name, (fn, inputs) in cases().items():
            fns = {"eager": fn, "mini": miniinductor.compile(fn), "inductor": torch.compile(fn)}
            expected = fn(*inputs)
            for label, f in fns.items():
                torch.testing.assert_close(f(*inputs), expected, rtol=1e-5, atol=1e-5, msg=lambda m, label=label: f"{label}: {m}")
            us = per_call_us(fns, inputs, rounds, calls)
            moved = 2 * inputs[0].numel() * inputs[0].element_size()
            print(f"| {name} | {us['eager']:.1f} | {us['mini']:.1f} | {us['inductor']:.1f} | {us['eager'] / us['mini']:.2f} "
                  f"| {us['inductor'] / us['mini']:.2f} | {moved / us['mini'] / 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
