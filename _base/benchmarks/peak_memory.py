"""Peak memory of one training step (forward + backward) above the parameters:
eager, miniinductor and Inductor on a stack of GPT-2 blocks.

    python benchmarks/peak_memory.py                      # CPU: 4 blocks, width 256, batch 4x128
    python benchmarks/peak_memory.py --device cuda --preset h100   # 8 blocks, width 768, batch 8x256
    python benchmarks/peak_memory.py --layers 2 --width 128 --batch 2 --seq 64 --only eager,miniinductor

A step is `model(x).sum().backward()` with the gradients set to None before it; "above the
parameters" is the peak minus what was live when the step began (the parameters and the
input). With `--optimizer` an SGD step (in place, foreach) follows the backward.

On CUDA the peak is `torch.cuda.max_memory_allocated`. The CPU has no allocator statistics,
so there the profiler records every allocation and free of the CPU allocator
(`profile_memory=True`: one "[memory]" event per allocation, its size negative for a free)
and the peak is the highest running sum of them over the step (`cpu_peak_bytes`).
Each compiler gets its own copy of the model (same weights), is compiled and warmed up by
two steps, then measured on a third; the gradients are checked against eager's.
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.models import GPT2Block  # noqa: E402

PRESETS = {"cpu": dict(layers=4, width=256, batch=4, seq=128),
           "h100": dict(layers=8, width=768, batch=8, seq=256)}   # issue 15's configuration
MiB = 2 ** 20


def gpt2_stack(layers: int, width: int, device="cpu", seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[GPT2Block(width, max(1, width // 64)) for _ in range(layers)]).to(device)


def cpu_peak_bytes(fn) -> int:
    """Run `fn()` and return the highest number of bytes its CPU allocations held at once
    (allocations minus frees, in time order, from the profiler's memory events)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def cuda_peak_bytes(fn) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - start


def peak_bytes(fn, device: str) -> int:
    return cuda_peak_bytes(fn) if device == "cuda" else cpu_peak_bytes(fn)


def make_step(model, x, optimizer=None):
    """One step, the gradients None before it (set outside, so that freeing the previous
    ones is not counted: the CPU profiler does not know the size of a block it did not see
    allocated)."""
    def step():
        model(x).sum().backward()
        if optimizer is not None:
            optimizer.step()
    return step


def compiled_model(model, compiler: str, options=None):
    torch._dynamo.reset()
    if compiler == "eager":
        return model
    if compiler == "miniinductor":
        return miniinductor.compile(model, **(options or {}))
    return torch.compile(model, backend="inductor")


def measure(compiler: str, base, x, device: str, optimizer: bool = False, iters: int = 3, options=None) -> dict:
    """{'peak': bytes above what was live before the step, 'ms': median step time,
    'grads': the parameters' gradients after the measured step}. Steps never change the
    weights unless `optimizer` (then every compiler starts from `base`'s weights too)."""
    model = copy.deepcopy(base)
    fn = compiled_model(model, compiler, options)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True) if optimizer else None
    step = make_step(fn, x, opt)
    for _ in range(2):   # compile, warm up (the backward graph is compiled in the first step)
        model.zero_grad(set_to_none=True)
        step()
    if optimizer:   # back to the starting weights, so gradients compare with eager's
        with torch.no_grad():
            for p, q in zip(model.parameters(), base.parameters()):
                p.copy_(q)
    model.zero_grad(set_to_none=True)
    peak = peak_bytes(step, device)
    grads = [p.grad.detach().clone() for p in model.parameters()]
    times = []
    for _ in range(iters):
        model.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return {"peak": peak, "ms": statistics.median(times), "grads": grads}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--preset", choices=list(PRESETS), help="default: cpu, or h100 with --device cuda")
    for name in PRESETS["cpu"]:
        parser.add_argument(f"--{name}", type=int)
    parser.add_argument("--optimizer", action="store_true", help="an SGD step after the backward")
    parser.add_argument("--only", default="eager,miniinductor,inductor", help="comma-separated compilers")
    parser.add_argument("--iters", type=int, default=3, help="timed steps (median)")
    parser.add_argument("--options", default="{}", help='miniinductor options as JSON: \'{"cpu_backend": "triton"}\'')
    opts = parser.parse_args()
    cfg = dict(PRESETS[opts.preset or ("h100" if opts.device == "cuda" else "cpu")])
    cfg.update({k: getattr(opts, k) for k in cfg if getattr(opts, k) is not None})
    device = opts.device
    base = gpt2_stack(cfg["layers"], cfg["width"], device)
    x = torch.randn(cfg["batch"], cfg["seq"], cfg["width"], device=device)
    params = sum(p.numel() * p.element_size() for p in base.parameters())
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}: {cfg['layers']} GPT-2 blocks, width {cfg['width']}, batch "
          f"{cfg['batch']}x{cfg['seq']}; parameters {params / MiB:.1f} MiB, input {x.nbytes / MiB:.1f} MiB"
          + ("; with an SGD step" if opts.optimizer else ""))
    options = json.loads(opts.options)
    rows = {c: measure(c, base, x, device, opts.optimizer, opts.iters, options) for c in opts.only.split(",")}
    reference = rows.get("eager")
    print("\n| step | peak above parameters (MiB) | ms per step | max grad error vs eager |")
    print("|---|---|---|---|")
    for compiler, row in rows.items():
        err = "" if reference is None or compiler == "eager" else f"{max_error(row['grads'], reference['grads']):.1e}"
        print(f"| {compiler} | {row['peak'] / MiB:.2f} | {row['ms']:.1f} | {err} |")


def max_error(grads, reference) -> float:
    """The largest gradient difference relative to the reference gradient's largest value."""
    return max(((g - r).abs().max() / r.abs().max().clamp_min(1e-12)).item() for g, r in zip(grads, reference))


if __name__ == "__main__":
    main()
