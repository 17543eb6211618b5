"""Compile time against graph size: a stack of N GPT-2 blocks, cold caches, on the CPU.

    python benchmarks/compile_scaling.py                       # N = 1, 4, 16, 32, 64; ours and Inductor
    python benchmarks/compile_scaling.py --sizes 16 32 64 --backends miniinductor

Each (N, backend) runs in a fresh process with empty MINIINDUCTOR_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR and times the first call of `torch.compile(blocks)` (Dynamo,
AOTAutograd, lowering, scheduling, codegen, the C++ build, one run) on a [2, 32, 128]
input, width 128, 4 heads, eval, no grad. The table gives seconds and the ratio to the
previous size: a compiler that scales linearly doubles its time when N doubles.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(n_blocks: int, backend: str) -> float:
    import torch

    import miniinductor  # noqa: F401  (registers the backend)
    from miniinductor.models import GPT2Block
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[GPT2Block(128, 4) for _ in range(n_blocks)]).eval()
    x = torch.randn(2, 32, 128)
    compiled = torch.compile(model, backend=backend)
    start = time.perf_counter()
    with torch.no_grad():
        compiled(x)
    return time.perf_counter() - start


def run(n_blocks: int, backend: str, timeout: float) -> float | None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MINIINDUCTOR_CACHE_DIR": f"{tmp}/mi", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/ind",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, __file__, "--child", str(n_blocks), backend], env=env,
                              capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SECONDS ")]
    if proc.returncode or not lines:
        print(f"{backend} N={n_blocks} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return float(lines[-1].split()[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 32, 64])
    parser.add_argument("--backends", nargs="+", default=["miniinductor", "inductor"])
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("SECONDS", child(int(args.child[0]), args.child[1]))
        return
    results = {b: {} for b in args.backends}
    print(f"{'N':>4} " + " ".join(f"{b:>22}" for b in args.backends))
    for n in args.sizes:
        cells = []
        for backend in args.backends:
            seconds = run(n, backend, args.timeout)
            results[backend][n] = seconds
            previous = [results[backend][m] for m in args.sizes if m < n and results[backend].get(m)]
            ratio = f" (x{seconds / previous[-1]:.2f})" if seconds and previous else ""
            cells.append(f"{seconds:8.1f} s{ratio:>10}" if seconds else f"{'failed':>22}")
        print(f"{n:>4} " + " ".join(f"{c:>22}" for c in cells), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
