"""Scans on the GPU: eager vs Inductor (torch.compile default) vs miniinductor (ext/scan).

    python benchmarks/scan_gpu.py                 # on a CUDA machine
    python benchmarks/scan_gpu.py --device cpu    # a dry run (small sizes, Triton's interpreter off:
                                                  # our C++ kernels, Inductor's C++ ones)

Cases: cumsum of softmax over [8192, 4096] float32 (the issue's target), cumsum of a
[8192, 4096] input, and cumsum of a [32768, 1024] input (rows of 1024). Each is timed with
`triton.testing.do_bench` (median) and printed as GB/s of the bytes the graph must move at
least (the input read once, the output written once) and as a percentage of the device's
copy bandwidth measured in the same run (`torch.empty_like(x).copy_(x)`), with the ratio of
our time to Inductor's (below 1: ours is faster).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MINIINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mi_cache_"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind_cache_"))

import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

import miniinductor  # noqa: E402


def cumsum_softmax(x):
    return torch.cumsum(x.softmax(-1), -1)


def cumsum(x):
    return torch.cumsum(x, -1)


CASES = [("cumsum(softmax(x)) 8192x4096", cumsum_softmax, (8192, 4096)),
         ("cumsum(x) 8192x4096", cumsum, (8192, 4096)),
         ("cumsum(x) 32768x1024", cumsum, (32768, 1024))]
#: the dry run's sizes (rows divided by this, columns kept: the same kernel kinds)
CPU_ROW_DIVISOR = 64


def time_ms(fn, x, device) -> float:
    if device == "cuda":
        return do_bench(lambda: fn(x), warmup=25, rep=200, return_mode="median")
    import time
    fn(x)
    start = time.perf_counter()
    for _ in range(5):
        fn(x)
    return (time.perf_counter() - start) / 5 * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    device = parser.parse_args().device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: use --device cpu for a dry run")
    rows = []
    for name, fn, (m, n) in CASES:
        if device == "cpu":
            m = max(1, m // CPU_ROW_DIVISOR)
        x = torch.randn(m, n, device=device)
        nbytes = 2 * x.numel() * x.element_size()   # read once, written once
        copy = time_ms(lambda t: torch.empty_like(t).copy_(t), x, device)
        compiled = {"eager": fn, "inductor": torch.compile(fn),
                    "ours": miniinductor.compile(fn)}
        expected = fn(x)
        times = {}
        for label, f in compiled.items():
            torch._dynamo.reset() if label != "eager" else None
            torch.testing.assert_close(f(x), expected, rtol=1e-4, atol=1e-3 * n ** 0.5)
            times[label] = time_ms(f, x, device)
        rows.append((name, copy, nbytes, times))
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (dry run)'}")
    print(f"| case | copy GB/s | {' | '.join(f'{k} GB/s (% copy)' for k in ('eager', 'inductor', 'ours'))} | ours/inductor |")
    print("|---|---|---|---|---|---|")
    for name, copy, nbytes, times in rows:
        copy_gbs = nbytes / copy / 1e6
        cells = [f"{nbytes / times[k] / 1e6:.0f} ({100 * copy / times[k]:.0f}%)" for k in ("eager", "inductor", "ours")]
        print(f"| {name} | {copy_gbs:.0f} | {' | '.join(cells)} | {times['ours'] / times['inductor']:.2f} |")


if __name__ == "__main__":
    main()
