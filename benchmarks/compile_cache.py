"""The compiled-graph cache (ext/fx_graph_cache): a cold compile against a warm one.

    python benchmarks/compile_cache.py [--device cuda] [--train] [--repeats 3]

The demo's GPT-2 block (`python -m miniinductor demo`: GPT2Block(128, 4), input [2, 64, 128],
inference under no_grad; `--train` adds the backward of `out.sum()`) is compiled in a fresh
process with a new, empty MINIINDUCTOR_CACHE_DIR (and TRITON_CACHE_DIR): cold; then in a
second fresh process with the same folders: warm, its graphs found in the cache. Each time is
the wall time of the first call of the compiled model (Dynamo, AOTAutograd, our compile or
cache lookup, kernel builds or loads, and the run), measured inside the process (not Python's
and torch's start-up). Prints both, warm/cold, whether the outputs (and gradients) of the two
processes are bitwise identical, and where the warm time goes: the backend call (the
capture level's key and, on its hit, the loaded inference graph; else AOTAutograd with our
decomposition table, then per graph the ATen level's lookup), the rest of the first call
being Dynamo's tracing and the run. Inference hits at the capture level (AOTAutograd
skipped); `--train` bypasses it (gradients are needed), its graphs hit at the ATen level. `--repeats` runs the pair that many times, each with new
folders, and reports the median of each.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BACKEND = "backend (capture: AOTAutograd + ours)"


def child(device: str, train: bool, out_file: str) -> dict:
    """One process's first call: its time, what the cache did, and a breakdown."""
    import torch

    import miniinductor
    from miniinductor import compile_fx
    from miniinductor.capture import aot
    from miniinductor.ext import fx_graph_cache
    from miniinductor.tools.models import GPT2Block, make_demo_inputs
    spent: dict[str, float] = {}

    def timed(module, name, label):
        real = getattr(module, name)

        @functools.wraps(real)
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - start
        setattr(module, name, run)
    timed(compile_fx, "compile_fx", BACKEND)
    timed(fx_graph_cache.key, "capture_details", "  capture-level key")
    timed(fx_graph_cache.capture, "_hit_capture", "  capture-level hit (AOTAutograd skipped)")
    timed(aot, "decomposition_table", "  decomposition table")
    timed(compile_fx, "compile_graph", "  compile_graph (miss: lowering to load)")
    timed(fx_graph_cache.key, "details", "  ATen-level key")
    timed(fx_graph_cache.graph, "_hit", "  ATen-level hit (read, import wrapper)")
    torch.manual_seed(0)
    model = GPT2Block(128, 4).to(device)
    x = make_demo_inputs().to(device).requires_grad_(train)
    compiled = miniinductor.compile(model if train else model.eval())
    start = time.perf_counter()
    with torch.set_grad_enabled(train):
        out = compiled(x)
        if train:
            out.sum().backward()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    results = [out.detach()] + ([x.grad] + [p.grad for p in model.parameters()] if train else [])
    torch.save([r.cpu() for r in results], out_file)
    return {"first_call_s": seconds, "counters": dict(fx_graph_cache.counters),
            "capture": dict(fx_graph_cache.capture_counters), "spent": spent}


def run_child(device, train, folder: Path, name: str) -> tuple[dict, list]:
    import torch
    env = {**os.environ, "MINIINDUCTOR_CACHE_DIR": str(folder / "miniinductor"),
           "TRITON_CACHE_DIR": str(folder / "triton"), "MINIINDUCTOR_FX_GRAPH_CACHE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out_file = folder / f"{name}.pt"
    args = [sys.executable, __file__, "--child", "--device", device, "--out", str(out_file)] + ["--train"] * train
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the {name} process failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), torch.load(out_file)


def one_pair(device, train) -> tuple[dict, dict, bool]:
    with tempfile.TemporaryDirectory(prefix="compile_cache_") as tmp:
        cold, cold_out = run_child(device, train, Path(tmp), "cold")
        warm, warm_out = run_child(device, train, Path(tmp), "warm")
    import torch
    identical = len(cold_out) == len(warm_out) and all(torch.equal(a, b) for a, b in zip(cold_out, warm_out))
    return cold, warm, identical


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--train", action="store_true", help="forward and backward (the demo is inference)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.device, args.train, args.out)))
        return 0
    pairs = [one_pair(args.device, args.train) for _ in range(args.repeats)]
    cold = statistics.median(c["first_call_s"] for c, _, _ in pairs)
    warm = statistics.median(w["first_call_s"] for _, w, _ in pairs)
    what = "forward + backward" if args.train else "inference"
    print(f"GPT-2 block (GPT2Block(128, 4), input [2, 64, 128]), {what}, {args.device}, "
          f"median of {args.repeats}: first call of the compiled model, in a fresh process")
    for name, index, seconds in (("cold (empty cache folders):", 0, cold), ("warm (the same folders):  ", 1, warm)):
        print(f"  {name} {seconds:8.3f} s   ATen level {pairs[-1][index]['counters']}, "
              f"capture level {pairs[-1][index]['capture']}")
    print(f"  warm / cold: {warm / cold:.1%}")
    print(f"  outputs{' and gradients' if args.train else ''} bitwise identical: {all(p[2] for p in pairs)}")
    for name, index in (("cold", 0), ("warm", 1)):
        spent = {k: statistics.median(p[index]["spent"].get(k, 0.0) for p in pairs) for k in pairs[-1][index]["spent"]}
        total = statistics.median(p[index]["first_call_s"] for p in pairs)
        backend = spent.get(BACKEND, 0.0)
        print(f"  where the {name} first call goes:")
        print(f"    {'Dynamo (tracing, guards) and the run':42s} {total - backend:7.3f} s")
        for label, seconds in sorted(spent.items(), key=lambda item: item[0].startswith(" ")):
            print(f"    {label:42s} {seconds:7.3f} s")
    return 0 if all(p[2] for p in pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
