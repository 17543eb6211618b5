"""Per-call overhead: tiny graphs where host work, not the kernels, sets the time.

    python benchmarks/per_call.py                  # CPU (and CUDA if present): the table
    python benchmarks/per_call.py --profile        # + cProfile of 10k of our calls per case
    python benchmarks/per_call.py --device cpu --cpu-time   # CPU time, on a loaded machine

Cases (fp32, inference under ``torch.no_grad()``, batch 1):
  mlp        six Linear(256, 256) + ReLU layers on a [1, 256] input
  mlp8       the same with Linear(8, 8): next to no arithmetic, host work only
  pointwise  relu(x * a + 1) on 64 elements

Each case runs eagerly and compiled three ways: `miniinductor.compile(fn)` (our entry
point, `dynamic=None` as torch.compile's default), `torch.compile(fn,
backend="miniinductor")` (Dynamo's default settings, as Inductor's) and Inductor
(`torch.compile(fn)`, default mode). Each is warmed up, then all are timed interleaved:
each repeat runs every backend for about 100 ms (CUDA: synchronised every 10 calls) and
the table holds the median µs per call and eager/backend (> 1: faster than eager).
`--profile` runs `miniinductor.compile(fn)` 10,000 times under cProfile and prints where
the host time goes (the functions by own time). A fifth column, "cpp_wrapper", is
`torch.compile(fn, backend="miniinductor", options={"cpp_wrapper": True})` (to compare with
"torch.compile mini"; on the GPU its C++ launches the Triton kernels through the CUDA driver),
and a second line times the generated `call(args)` alone (Python wrapper vs C++ wrapper,
without Dynamo's and AOTAutograd's layers above it); on the GPU a third, the host time of
that call alone (`host_us`: the GPU may take longer than the host to run a call).
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
from miniinductor.compile_fx import collect_compiled  # noqa: E402


def mlp_case(device, width=256):
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(device).eval(), (torch.randn(1, width, device=device),)


def pointwise_case(device):
    x, a = torch.randn(64, device=device), torch.randn(64, device=device)
    return (lambda x, a: torch.relu(x * a + 1)), (x, a)


CASES = {"mlp": mlp_case, "mlp8": lambda device: mlp_case(device, 8), "pointwise": pointwise_case}
BACKENDS = ("eager", "miniinductor", "torch.compile mini", "inductor", "cpp_wrapper")


def compiled_with(backend: str, fn):
    if backend == "eager":
        return fn
    if backend == "miniinductor":
        return miniinductor.compile(fn)
    if backend == "cpp_wrapper":
        return torch.compile(fn, backend="miniinductor", options={"cpp_wrapper": True})
    return torch.compile(fn, backend="miniinductor" if backend == "torch.compile mini" else "inductor")


def wrapper_calls(fn, args) -> dict:
    """{"python": call, "c++": call}: each wrapper's `call(args)` with the arguments
    AOTAutograd handed it, to be timed without the layers above it."""
    calls = {}
    for label, cpp_wrapper in (("python", False), ("c++", True)):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="miniinductor", options={"cpp_wrapper": cpp_wrapper})
        with collect_compiled() as graphs:
            compiled(*args)
        (graph,) = graphs
        seen = []
        real = graph.call
        graph.call = lambda a, real=real: (seen.append(list(a)), real(a))[1]
        compiled(*args)
        assert ("CPP_SOURCE" in graph.wrapper_source and "PyObject* call" in graph.wrapper_source) == cpp_wrapper
        calls[label] = (real, seen[0])
    return calls


def mean_us(fn, args, sync, target_s: float, clock=time.perf_counter) -> float:
    calls, start = 0, clock()
    while (elapsed := clock() - start) < target_s:
        for _ in range(10):
            fn(*args)
        calls += 10
        sync()
    return 1e6 * elapsed / calls


def host_us(fn, sync, target_s: float) -> float:
    """µs of host time per call: the time to issue 10 calls, the GPU's queue draining
    (synchronize) outside the clock. A call that waits on the GPU less than it issues
    (a batch-1 MLP) shows its wrapper's own cost here, which the wall clock hides."""
    calls, issuing, start = 0, 0.0, time.perf_counter()
    while time.perf_counter() - start < target_s:
        sync()
        t0 = time.perf_counter()
        for _ in range(10):
            fn()
        issuing += time.perf_counter() - t0
        calls += 10
    sync()
    return 1e6 * issuing / calls


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
        print(f"| {name} | " + " | ".join(f"{med[b]:.1f}" for b in BACKENDS[:4]) +
              f" | {med['eager'] / med['miniinductor']:.2f} | {med['eager'] / med['inductor']:.2f} |" +
              (f" cpp_wrapper {med['cpp_wrapper']:.1f} µs" if "cpp_wrapper" in med else ""), flush=True)
        calls = wrapper_calls(fn, args)
        wrapper_times = {k: [] for k in calls}
        host_times = {k: [] for k in calls}
        for _ in range(repeats):
            for k, (call, call_args) in calls.items():
                wrapper_times[k].append(mean_us(lambda: call(list(call_args)), (), sync, target_s, clock))
                if device == "cuda":
                    host_times[k].append(host_us(lambda: call(list(call_args)), sync, target_s))
        py, cpp = (statistics.median(wrapper_times[k]) for k in ("python", "c++"))
        print(f"|   {name}: call(args) alone | Python wrapper {py:.1f} µs | C++ wrapper {cpp:.1f} µs "
              f"| C++/Python {cpp / py:.2f} |", flush=True)
        if device == "cuda":
            py, cpp = (statistics.median(host_times[k]) for k in ("python", "c++"))
            print(f"|   {name}: call(args) host time | Python wrapper {py:.1f} µs | C++ wrapper {cpp:.1f} µs "
                  f"| C++/Python {cpp / py:.2f} |", flush=True)
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
