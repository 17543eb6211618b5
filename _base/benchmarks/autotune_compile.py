"""Cold max-autotune compile time, each (workload, compiler) in a fresh process.

    python benchmarks/autotune_compile.py                    # every workload, ours and Inductor
    python benchmarks/autotune_compile.py --only mlp --tf32  # TF32 matmuls (as `allow_tf32 = True`)
    python benchmarks/autotune_compile.py --smoke            # CPU, tiny sizes, Triton's interpreter

Issue 14 asks for max-autotune compiles at most half as long as Inductor's. `gemm_gpu.py`
compiles ours and Inductor in one process, where the second skips the imports and first-use
work the first paid; here each child process has empty cache folders (ours, Inductor's,
Triton's) and does one thing: compile the workload under `max-autotune-no-cudagraphs`, run
its first call (the seconds reported: compile, autotuning and that call), check the output
(and, for the training step, every parameter's gradient) against eager, then time a call.

Workloads: `mlp32` / `mlp16` (Linear 1024 -> 4096, GELU, Linear 4096 -> 1024 on a 4096 x 1024
batch, float32 / bfloat16, inference), `gpt` (GPT-2 block forward, B8 T512 d768, inference),
`train` (GPT-2 block training step: forward, then the backward of the output's sum; B8 T256).
`--smoke` runs ours at tiny sizes on the CPU (cpu_backend="triton" under TRITON_INTERPRET=1):
it checks that the script runs, it measures nothing.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = ("mlp32", "mlp16", "gpt", "train")


def child(backend: str, work: str, smoke: bool) -> dict:
    """One compile in this (fresh) process: {compile_s, ms, eager_ms, rel_err, grad_err, ...}."""
    for name in ("MINIINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        os.environ[name] = tempfile.mkdtemp(prefix="autotune_compile_")
    sys.path.insert(0, str(REPO))
    import torch
    from torch import nn

    from miniinductor.models import GPT2Block
    device = "cpu" if smoke else "cuda"
    torch.manual_seed(0)
    train = work == "train"
    if work in ("gpt", "train"):
        b, t, d, heads = (1, 8, 16, 2) if smoke else (8, 256 if train else 512, 768, 12)
        model, x = GPT2Block(d, heads).to(device), torch.randn(b, t, d, device=device)
    else:
        dtype = torch.float32 if work == "mlp32" else torch.bfloat16
        batch, width, hidden = (40, 24, 48) if smoke else (4096, 1024, 4096)
        model = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width)).to(device, dtype)
        x = torch.randn(batch, width, device=device, dtype=dtype)
    model.train(train)

    def step(fn):
        out = fn(x)
        if train:
            out.sum().backward()
        return out

    def sync():
        if not smoke:
            torch.cuda.synchronize()
    with contextlib.nullcontext() if train else torch.no_grad():
        reference = step(model).detach()
        reference_grads = [p.grad.clone() for p in model.parameters()] if train else []
        model.zero_grad(set_to_none=True)
        if backend == "ours":
            import miniinductor
            fn = miniinductor.compile(model, mode="max-autotune-no-cudagraphs", **({"cpu_backend": "triton"} if smoke else {}))
        else:
            fn = torch.compile(model, mode="max-autotune-no-cudagraphs")
        sync()
        start = time.perf_counter()
        out = step(fn)
        sync()
        seconds = time.perf_counter() - start
        relative = lambda got, want: ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()  # noqa: E731
        row = {"backend": backend, "workload": work, "compile_s": round(seconds, 2), "rel_err": relative(out, reference),
               "grad_err": max((relative(p.grad, r) for p, r in zip(model.parameters(), reference_grads)), default=0.0),
               "tf32": torch.backends.cuda.matmul.allow_tf32}
        if not smoke:
            from triton.testing import do_bench
            row["ms"] = round(do_bench(lambda: step(fn), warmup=25, rep=200), 4)
            row["eager_ms"] = round(do_bench(lambda: step(model), warmup=25, rep=200), 4)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=2, metavar=("BACKEND", "WORKLOAD"), help=argparse.SUPPRESS)
    parser.add_argument("--only", action="append", help="only workloads whose name contains this (repeatable)")
    parser.add_argument("--tf32", action="store_true", help="float32 matmuls in TF32 (torch.backends.cuda.matmul.allow_tf32)")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, Triton's interpreter: does it run?")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per child process")
    opts = parser.parse_args()
    if opts.child:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = opts.tf32
        print(json.dumps(child(*opts.child, opts.smoke)), flush=True)
        return
    env = dict(os.environ, **({"TRITON_INTERPRET": "1"} if opts.smoke else {}))
    flags = ["--tf32"] * opts.tf32 + ["--smoke"] * opts.smoke
    rows = {}
    for work in [w for w in WORKLOADS if not opts.only or any(o in w for o in opts.only)]:
        for backend in ("ours",) if opts.smoke else ("ours", "inductor"):
            command = [sys.executable, __file__, "--child", backend, work, *flags]
            try:
                done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=opts.timeout)
                lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                rows[work, backend] = json.loads(lines[-1]) if lines else {"error": done.stderr.strip()[-300:]}
            except subprocess.TimeoutExpired:
                rows[work, backend] = {"error": f"over the {opts.timeout:.0f} s limit"}
            print(json.dumps({"workload": work, "backend": backend, **rows[work, backend]}), flush=True)
    print("\n| workload | ours s | Inductor s | ours / Inductor | ours ms | Inductor ms | eager ms |\n|---|---|---|---|---|---|---|")
    for work in dict.fromkeys(w for w, _ in rows):
        ours, ind = rows[work, "ours"], rows.get((work, "inductor"), {})
        cell = lambda r, k: str(r.get(k, r.get("error", "-")))  # noqa: E731
        ratio = f"{ours['compile_s'] / ind['compile_s']:.2f}" if "compile_s" in ours and "compile_s" in ind else "-"
        print(f"| {work} | {cell(ours, 'compile_s')} | {cell(ind, 'compile_s')} | {ratio} | {cell(ours, 'ms')} "
              f"| {cell(ind, 'ms')} | {ours.get('eager_ms', '-')} |")


if __name__ == "__main__":
    main()
