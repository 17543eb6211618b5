"""Per-call overhead: tiny graphs where host work, not the kernels, sets the time.

    python benchmarks/per_call.py                  # CPU (and CUDA if present): the table
    python benchmarks/per_call.py --profile        # + cProfile of 10k of our calls per case
    python benchmarks/per_call.py --device cpu --cpu-time   # CPU time, on a loaded machine

Cases (fp32, inference under ``torch.no_grad()``, batch 1):
  mlp        six Linear(256, 256) + ReLU layers on a [1, 256] input
  pointwise  relu(x * a + 1) on 64 elements

Each case runs eagerly and compiled three ways: `miniinductor.compile(fn)` (which passes
`dynamic=False`: Dynamo then patches its config on every call), `torch.compile(fn,
backend="miniinductor")` (Dynamo's default settings, as Inductor's) and Inductor
(`torch.compile(fn)`, default mode). Each is warmed up, then all are timed interleaved:
each repeat runs every backend for about 100 ms (CUDA: synchronised every 10 calls) and
the table holds the median µs per call and eager/backend (> 1: faster than eager).
`--profile` runs `miniinductor.compile(fn)` 10,000 times under cProfile and prints where
the host time goes (the functions by own time).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout, installed or not
import miniinductor  # noqa: E402


def mlp_case(device):
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device).eval(), (torch.randn(1, 256, device=device),)


def pointwise_case(device):
    x, a = torch.randn(64, device=device), torch.randn(64, device=device)
    return (lambda x, a: torch.relu(x * a + 1)), (x, a)


CASES = {"mlp": mlp_case, "pointwise": pointwise_case}
BACKENDS = ("eager", "miniinductor", "torch.compile mini", "inductor")


def compiled_with(backend: str, fn):
    if backend == "eager":
        return fn
    if backend == "miniinductor":
        return miniinductor.compile(fn)
    return torch.compile(fn, backend="miniinductor" if backend == "torch.compile mini" else "inductor")


def mean_us(fn, args, sync, target_s: float, clock=time.perf_counter) -> float:
    calls, start = 0, clock()
    while (elapsed := clock() - start) < target_s:
        for _ in range(10):
            fn(*args)
        calls += 10
        sync()
    return 1e6 * elapsed / calls


def run(device: str, repeats: int, target_s: float, profile: bool, clock):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    print(f"\n{device}: {torch.cuda.get_device_name() if device == 'cuda' else f'{torch.get_num_threads()} threads'}")
    print("| case | eager µs | miniinductor.compile µs | torch.compile mini µs | Inductor µs "
          "| eager/mini | eager/Inductor |")
    print("|---|---|---|---|---|---|---|")
    for name, make in CASES.items():
        fn, args = make(device)
        torch._dynamo.reset()
        backends = {}
        for backend in BACKENDS:
            backends[backend] = compiled_with(backend, fn)
            for _ in range(3):   # compile, then warm
                out = backends[backend](*args)
            torch.testing.assert_close(out, fn(*args), rtol=1e-4, atol=1e-4)
        times = {b: [] for b in backends}
        for _ in range(repeats):   # interleaved, so that a change of load hits all three
            for b, compiled in backends.items():
                times[b].append(mean_us(compiled, args, sync, target_s, clock))
        med = {b: statistics.median(t) for b, t in times.items()}
        print(f"| {name} | " + " | ".join(f"{med[b]:.1f}" for b in BACKENDS) +
              f" | {med['eager'] / med['miniinductor']:.2f} | {med['eager'] / med['inductor']:.2f} |", flush=True)
        if profile:
            ours = backends["miniinductor"]
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(10_000):
                ours(*args)
            sync()
            profiler.disable()
            print(f"\ncProfile, 10k calls of ours ({name}, {device}):")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], action="append")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--target-s", type=float, default=0.1)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--cpu-time", action="store_true",
                   help="time by the process's CPU time, not the wall clock (on a shared, loaded machine)")
    args = p.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    devices = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    with torch.no_grad():
        for device in devices:
            run(device, args.repeats, args.target_s, args.profile, clock)


if __name__ == "__main__":
    main()
