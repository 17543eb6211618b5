"""Cold compile time: the first call of each workload, each in a fresh process with empty caches.

    python benchmarks/compile_time.py [--out results.json] [--only zoo --only OPT]

bench_gpu.py times first calls inside one long process, where Triton's in-memory caches,
Inductor's warm compile workers and the CUDA context built by earlier rows all help the
later ones. Here every (workload, backend) pair starts a new Python process with new,
empty MINIINDUCTOR_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR, builds the
model and its inputs, and times `compiled(*inputs)` once (Dynamo, AOTAutograd, lowering,
code generation, every kernel compile, and the run). Needs a CUDA GPU.

Beside the kernels' own workloads there is a row per model family: each `miniinductor.zoo`
model (GPT-2, Llama, BERT, T5, ViT, Whisper, ResNet at the zoo's small configs) as a
training step (forward with its loss, then backward), and the OPT-style decoder of
`compile_scaling.py` (4 layers, width 256, eval forward).
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
ZOO_FAMILIES = ["gpt2", "llama", "bert", "t5", "vit", "whisper", "resnet"]
WORKLOADS = ["pointwise chain", "layer norm", "softmax", "colsum + rowmax", "GPT-2 block fwd",
             "GPT-2 block fwd+bwd", "MLP batch 1 reduce-overhead", "OPT decoder fwd (4 layers)"] + \
    [f"zoo {name} train step" for name in ZOO_FAMILIES]


def build(name: str):
    """(module or function, inputs, mode, run) for one workload, on the GPU."""
    import torch
    import torch.nn.functional as F

    from miniinductor.models import GPT2Block
    torch.manual_seed(0)
    d = "cuda"

    def no_grad(fn, args):
        with torch.no_grad():
            return fn(*args)
    if name == "pointwise chain":
        return (lambda x, a: F.gelu(x * a + 1) * torch.sigmoid(x) - torch.tanh(a)), \
            (torch.randn(2**24, device=d), torch.randn(2**24, device=d)), None, no_grad
    if name == "layer norm":
        x = torch.randn(8192, 4096, device=d)
        return (lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b)), \
            (x, torch.randn(4096, device=d), torch.randn(4096, device=d)), None, no_grad
    if name == "softmax":
        return (lambda x: torch.softmax(x, -1)), (torch.randn(8192, 4096, device=d),), None, no_grad
    if name == "colsum + rowmax":
        return (lambda x: (x.sum(0), x.amax(1))), (torch.randn(16384, 4096, device=d),), None, no_grad
    if name == "GPT-2 block fwd":
        return GPT2Block(768, 12).to(d).eval(), (torch.randn(8, 512, 768, device=d),), None, no_grad
    if name == "GPT-2 block fwd+bwd":
        def train(fn, args):
            out = fn(*args)
            out.sum().backward()
            return out
        return GPT2Block(768, 12).to(d), (torch.randn(8, 256, 768, device=d, requires_grad=True),), None, train
    if name == "MLP batch 1 reduce-overhead":
        layers = []
        for _ in range(6):
            layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers).to(d).eval(), (torch.randn(1, 256, device=d),), "reduce-overhead", no_grad
    if name == "OPT decoder fwd (4 layers)":
        sys.path.insert(0, str(REPO / "benchmarks"))
        from compile_scaling import opt_decoder
        model, args = opt_decoder(4)
        return model.to(d).eval(), tuple(a.to(d) for a in args), None, no_grad
    if name.startswith("zoo "):
        from miniinductor import zoo
        entry = zoo.ZOO[name.split()[1]]
        model = zoo.WithLoss(entry.make_model(entry.config).to(d), entry.loss_fn)
        args, target = entry.make_inputs(entry.config, torch.Generator().manual_seed(1))

        def step(fn, args):
            loss = fn(*args)
            loss.backward()
            return loss
        return model, (target.to(d), *(a.to(d) for a in args)), None, step
    raise ValueError(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")


def child(name: str, backend: str) -> float:
    import torch

    import miniinductor
    fn, args, mode, run = build(name)
    torch.cuda.synchronize()
    compiled = miniinductor.compile(fn, mode=mode) if backend == "miniinductor" else torch.compile(fn, mode=mode)
    start = time.perf_counter()
    run(compiled, args)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "BACKEND"), help=argparse.SUPPRESS)
    parser.add_argument("--out")
    parser.add_argument("--only", action="append", help="only the workloads whose name contains this (repeatable)")
    parser.add_argument("--cprofile", metavar="WORKLOAD", help="cProfile our cold compile of one workload "
                        "(in this process, fresh caches) and print the functions that took longest")
    opts = parser.parse_args()
    if opts.cprofile:
        import cProfile
        import pstats
        for var in ("MINIINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            os.environ[var] = tempfile.mkdtemp(prefix="cold_")
        profiler = cProfile.Profile()
        seconds = profiler.runcall(child, opts.cprofile, "miniinductor")
        print(f"{opts.cprofile}: {seconds:.2f} s (under cProfile)")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    if opts.child:
        print(json.dumps({"seconds": child(*opts.child)}))
        return
    rows = []
    for name in [w for w in WORKLOADS if not opts.only or any(o in w for o in opts.only)]:
        row = {"workload": name}
        for backend in ("miniinductor", "inductor"):
            env = dict(os.environ, PYTHONPATH=str(REPO))
            for var in ("MINIINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
                env[var] = tempfile.mkdtemp(prefix="cold_")
            done = subprocess.run([sys.executable, __file__, "--child", name, backend], env=env,
                                  capture_output=True, text=True)
            last = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
            row[backend] = json.loads(last[0])["seconds"] if last else f"failed: {done.stderr.strip()[-200:]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| workload | miniinductor s | Inductor s |\n|---|---|---|")
    for row in rows:
        cells = [f"{v:.2f}" if isinstance(v, float) else v for v in (row["miniinductor"], row["inductor"])]
        print(f"| {row['workload']} | {cells[0]} | {cells[1]} |")
    if opts.out:
        Path(opts.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
