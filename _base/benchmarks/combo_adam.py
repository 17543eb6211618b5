"""Adam's step over many parameters: eager vs miniinductor (combo kernels on and off) vs Inductor.

    python benchmarks/combo_adam.py [--device cpu|cuda] [--tensors 64] [--width 256] [--repeats 7]

`torch.compile(opt.step)` for torch.optim.Adam (PyTorch's default foreach choice, or
--foreach / --no-foreach) over `--tensors` parameters shaped like a transformer's: (w,),
(w, w), (4w, w), (4w,) in turn. Prints a markdown row per backend (the section "Combo
kernels: Adam over 64 tensors" of docs/benchmarks.md): ms per step (the median over
repeats of the mean over about 0.2 s of steps), the kernels one step launches (the
steady-state graph's: the first steps compile the graphs that create the state) and the
`aten::copy_` calls in one profiled step (a compiled step that wrote its results beside
the parameters had them copied back, one per tensor: capture/aot.py).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import miniinductor
from miniinductor.compile_fx import collect_compiled


def shapes(n: int, w: int) -> list[tuple]:
    return [[(w,), (w, w), (4 * w, w), (4 * w,)][k % 4] for k in range(n)]


def make_step(backend: str, params, foreach):
    """(step function, a list that the compiles' kernel counts are appended to)."""
    opt = torch.optim.Adam(params, lr=1e-3, foreach=foreach)
    counts = []
    if backend == "eager":
        return opt.step, counts
    if backend == "inductor":
        def counted(gm, example_inputs):
            before = torch._inductor.metrics.generated_kernel_count
            compiled = torch._inductor.compile(gm, example_inputs)
            counts.append(torch._inductor.metrics.generated_kernel_count - before)
            return compiled
        return torch.compile(opt.step, backend=counted), counts
    options = {"combo_kernels": backend == "miniinductor"}
    compiled = miniinductor.compile(opt.step, **options)

    def step():
        with collect_compiled(lambda cg: counts.append(len(cg.kernels))):
            compiled()
    return step, counts


def copies_per_step(step, sync) -> int:
    """`aten::copy_` calls in one step, from the profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
        sync()
    return sum(e.count for e in prof.key_averages() if e.key == "aten::copy_")


def mean_ms(step, sync, target_s=0.2) -> float:
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < target_s:
        step()
        calls += 1
    sync()
    return 1000 * (time.perf_counter() - start) / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tensors", type=int, default=64)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--foreach", action=argparse.BooleanOptionalAction, default=None)
    args = p.parse_args()
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    torch.manual_seed(0)
    init = [torch.randn(s, device=args.device) for s in shapes(args.tensors, args.width)]
    grads = [torch.randn_like(x) for x in init]
    backends = {}
    for backend in ("eager", "miniinductor", "miniinductor, combo_kernels=False", "inductor"):
        params = [torch.nn.Parameter(x.clone()) for x in init]
        for q, g in zip(params, grads):
            q.grad = g.clone()
        step, counts = make_step(backend, params, args.foreach)
        start = time.perf_counter()
        for _ in range(3):   # compile: the first steps create the optimizer state
            step()
        sync()
        print(f"{backend}: first 3 steps (compiles) in {time.perf_counter() - start:.1f} s", flush=True)
        backends[backend] = (step, counts, params)
    ref = backends["eager"][2]
    for name, (_, _, params) in backends.items():   # the same 3 steps from the same start
        for a, b in zip(params, ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")
    times = {b: [] for b in backends}
    for _ in range(args.repeats):   # interleaved, so that load changes hit every backend
        for name, (step, _, _) in backends.items():
            times[name].append(mean_ms(step, sync))
    numel = sum(x.numel() for x in init)
    print(f"Adam over {args.tensors} tensors ({numel / 1e6:.2f} M parameters, width {args.width}), "
          f"{args.device}, foreach={args.foreach}")
    print("| backend | ms per step | x eager | kernels per step | aten::copy_ per step |")
    print("|---|---|---|---|---|")
    eager = statistics.median(times["eager"])
    for name, (step, counts, _) in backends.items():
        ms = statistics.median(times[name])
        kernels = str(counts[-1]) if counts else "-"
        print(f"| {name} | {ms:.3f} | {eager / ms:.2f} | {kernels} | {copies_per_step(step, sync)} |", flush=True)


if __name__ == "__main__":
    main()
