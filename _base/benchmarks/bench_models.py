"""Model workloads on the GPU: wall-clock time per step, GPU busy time, and where it goes.

    python benchmarks/bench_models.py [--rounds 5] [--iters 200] [--profile] [--only NAME]

The memory-bound rows of `bench_gpu.py` are timed with `triton.testing.do_bench`, which
measures GPU time between two events. A model step is often bound by the host instead
(the CPU launching kernels more slowly than the GPU runs them: a batch-1 MLP, the many
small kernels of a backward pass), and then GPU time is not what a user waits for. So the
model rows are timed the way a training or serving loop runs: `iters` calls back to back,
one synchronize at the end, wall clock divided by `iters`. Eager, miniinductor and
Inductor are compiled once in one process and timed in interleaved rounds, and the median
of `rounds` is reported, so a drift of the machine moves all three alike.

Also reported per call: the GPU's busy time (the kernels' durations under
`torch.profiler`, summed) and the peak memory it allocates (`torch.cuda.max_memory_allocated`
above what was live before it). With `--profile`: each compiled step's kernels by GPU time and
the top of a cProfile of its Python side. `bench_gpu.py` calls `time_models` for its table.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from peak_memory import cuda_peak_bytes  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.models import GPT2Block  # noqa: E402


def model_workloads() -> dict:
    """{name: (module, step(fn) -> output, torch.compile mode)}"""
    torch.manual_seed(0)
    block = GPT2Block(768, 12).cuda().eval()
    x = torch.randn(8, 512, 768, device="cuda")              # B=8, T=512, d=768
    train_block = GPT2Block(768, 12).cuda()
    xt = torch.randn(8, 256, 768, device="cuda", requires_grad=True)   # T=256 for training

    def fwd(fn):
        with torch.no_grad():
            return fn(x)

    def fwd_bwd(fn):
        out = fn(xt)
        out.sum().backward()
        return out
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    mlp = torch.nn.Sequential(*layers).cuda().eval()
    xm = torch.randn(1, 256, device="cuda")                  # batch 1

    def mlp_fwd(fn):
        with torch.no_grad():
            return fn(xm)
    return {"GPT-2 block fwd B8 T512 d768": (block, fwd, None),
            "GPT-2 block fwd+bwd T256": (train_block, fwd_bwd, None),
            "6-layer 256-wide MLP, batch 1, reduce-overhead": (mlp, mlp_fwd, "reduce-overhead")}


def compile_timed(fn, backend: str, step, mode=None):
    """(fn compiled by `backend`, seconds its first `step` took: compiling included)."""
    torch._dynamo.reset()
    compiled = miniinductor.compile(fn, mode=mode) if backend == "miniinductor" else torch.compile(fn, mode=mode)
    torch.cuda.synchronize()
    start = time.perf_counter()
    step(compiled)
    torch.cuda.synchronize()
    return compiled, time.perf_counter() - start


def wall_ms(step, fn, iters: int) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        step(fn)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e3


def gpu_busy_ms(step, fn, iters: int = 20, per_kernel: dict | None = None) -> float:
    """Sum of the durations of the kernels (and memcpys/memsets) one call runs on the GPU.
    `per_kernel`, if given, is filled with {kernel name: microseconds per call}."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step(fn)
        torch.cuda.synchronize()
    total_us = 0.0
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            total_us += e.time_range.elapsed_us()
            if per_kernel is not None:
                per_kernel[e.name] = per_kernel.get(e.name, 0.0) + e.time_range.elapsed_us() / iters
    return total_us / iters / 1e3


def peak_mib(step, fn) -> float:
    """MiB one call allocates above what was live before it, at its peak (the step's
    output and a training step's gradients included; they are freed or kept alike for
    eager, miniinductor and Inductor). benchmarks/peak_memory.py measures a stack of blocks."""
    if hasattr(fn, "zero_grad"):   # (an nn.Module or compiled one: gradients None before the step)
        fn.zero_grad(set_to_none=True)
    return cuda_peak_bytes(lambda: step(fn)) / 2 ** 20


def replay_floor_ms(step, module, iters: int) -> float:
    """The same step recorded in one CUDA graph by hand and replayed: no guards, no
    wrappers, no input or output handling. What a reduce-overhead mode could at best reach."""
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(module)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        step(module)
    return wall_ms(lambda g: g.replay(), graph, iters)


def top_of_profile(step, fn, iters: int, lines: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iters):
        step(fn)
    torch.cuda.synchronize()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(lines)
    return out.getvalue()


def time_models(rounds: int = 5, iters: int = 200, only: str | None = None, profile: bool = False) -> list[dict]:
    """One row per workload: {'workload', 'eager_ms', 'miniinductor': {...}, 'inductor': {...}}
    with wall-clock ms (median of the rounds), speed-up over eager, GPU busy ms and the
    first call's seconds (compile included, caches as they are in this process)."""
    rows = []
    for name, (module, step, mode) in model_workloads().items():
        if only and only not in name:
            continue
        fns, compile_s = {"eager": module}, {}
        for key in ("miniinductor", "inductor"):
            fns[key], compile_s[key] = compile_timed(module, key, step, mode)
        for fn in fns.values():   # warm up (and record the CUDA graphs)
            for _ in range(5):
                step(fn)
        times = {key: [] for key in fns}
        for _ in range(rounds):
            for key, fn in fns.items():
                times[key].append(wall_ms(step, fn, iters))
        kernels = {key: {} for key in fns}
        row = {"workload": name, "eager_ms": statistics.median(times["eager"]),
               "eager_busy_ms": gpu_busy_ms(step, module), "rounds_ms": times,
               "eager_peak_mib": peak_mib(step, module)}
        for key in ("miniinductor", "inductor"):
            ms = statistics.median(times[key])
            row[key] = {"ms": ms, "x_eager": row["eager_ms"] / ms, "compile_s": compile_s[key],
                        "busy_ms": gpu_busy_ms(step, fns[key], per_kernel=kernels[key]),
                        "peak_mib": peak_mib(step, fns[key])}
        if mode == "reduce-overhead":
            row["replay_floor_ms"] = replay_floor_ms(step, module, iters)
        rows.append(row)
        print({k: v for k, v in row.items() if k != "rounds_ms"}, flush=True)
        if profile:
            for key in ("miniinductor", "inductor"):
                print(f"--- GPU kernels of one {key} call (us): {name}")
                for kname, us in sorted(kernels[key].items(), key=lambda kv: -kv[1])[:40]:
                    print(f"  {us:9.1f}  {kname[:110]}")
                print(f"--- cProfile of {iters} {key} calls: {name}")
                print(top_of_profile(step, fns[key], iters))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="print each compiled step's kernels and a cProfile")
    parser.add_argument("--only", help="run only workloads whose name contains this")
    opts = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    rows = time_models(opts.rounds, opts.iters, opts.only, opts.profile)
    print("\n| workload | eager ms | mini ms | Inductor ms | mini x eager | Inductor x eager | GPU busy ms eager / mini / Inductor "
          "| peak MiB eager / mini / Inductor |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        mi, ind = r["miniinductor"], r["inductor"]
        print(f"| {r['workload']} | {r['eager_ms']:.3f} | {mi['ms']:.3f} | {ind['ms']:.3f} | {mi['x_eager']:.2f} | "
              f"{ind['x_eager']:.2f} | {r['eager_busy_ms']:.3f} / {mi['busy_ms']:.3f} / {ind['busy_ms']:.3f} "
              f"| {r['eager_peak_mib']:.1f} / {mi['peak_mib']:.1f} / {ind['peak_mib']:.1f} |")


if __name__ == "__main__":
    main()
