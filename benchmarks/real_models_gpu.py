"""Real library models (miniinductor/tools/real_models/) trained compiled vs eager on a device.

    python benchmarks/real_models_gpu.py --out real_models_h100.json          # every model, CUDA
    python benchmarks/real_models_gpu.py --models gpt2-sdpa,llama-sdpa --out r.json
    python benchmarks/real_models_gpu.py --device cpu --models gpt2-sdpa     # a dry run here
    python benchmarks/real_models_gpu.py --compiler inductor --out inductor.json   # the reference

For each model -- transformers gpt2, opt, llama, mistral, qwen2, bert, distilbert, roberta,
t5, bart, vit and whisper with SDPA and with eager attention, nn.TransformerEncoder and
nn.MultiheadAttention modules, torchvision resnet18 and mobilenet_v3_small where
torchvision imports -- trains `torch.compile(model, backend=...)` and an eager deepcopy
for 3 SGD steps on the same inputs (real_models.compare_training) and prints the worst
relative error of the loss, the logits, every parameter's gradient (||g_c - g_e|| /
||g_e||, its norm floored at 1e-3 of the step's largest), the parameters and the buffers
after training, and the wall time. A model FAILs when a gradient is off by more than
1e-3, the loss by more than 1e-5 or the logits by more than 1e-4 (tests/core/test_real_models.py's
tolerances). Each model runs in a subprocess of its own (a CUDA error poisons its
process's context), `--jobs` at a time. `--out PATH` writes every number as JSON, with the
environment (torch, GPU, TF32 flags), rewritten after each model. By default each step
starts both copies from the same state (`--no-sync`: they train apart; see
real_models.compare_training for why that measures chaotic models rather than the
compiler).

TF32 is off (torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False, float32
matmul precision "highest"): with TF32 on, eager and compiled matmuls and convolutions
round their inputs to 10 mantissa bits, errors of ~1e-3 relative in every product, and
whether a compiled graph's matmul sees the same operands as eager's (a transposed copy, a
fused epilogue) changes the rounding: the difference would be TF32's, not the compiler's,
and at the 1e-3 tolerance. With full float32 both sides use the same cuBLAS/cuDNN
kernels and attention kernels, and what differs is only the accumulation order of fused
reductions, as on the CPU (errors ~1e-6), so the CPU tolerances hold.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from miniinductor.tools import real_models  # noqa: E402

GRAD_RTOL, LOSS_RTOL, OUTPUT_RTOL = 1e-3, 1e-5, 1e-4


def full_float32():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def run_one(name: str, device: str, compiler: str, steps: int, sync: bool) -> dict:
    """In the child: one model; returns compare_training's result."""
    full_float32()
    try:
        import transformers
        transformers.logging.set_verbosity_error()
    except ImportError:
        pass
    if not real_models.available(name):
        return {"model": name, "skipped": f"{real_models.needs(name)} is not installed"}
    if compiler == "miniinductor":
        compile = None          # torch.compile(model, backend="miniinductor")
    else:
        compile = lambda m: torch.compile(m, backend=compiler)
    return real_models.compare_training(name, device=device, steps=steps, sync=sync, compile=compile)


def spawn(name: str, args) -> dict:
    """The parent: run one model in a subprocess, its result or its failure."""
    cmd = [sys.executable, __file__, "--child", name, "--device", args.device, "--compiler", args.compiler,
           "--steps", str(args.steps)] + (["--no-sync"] if args.no_sync else [])
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired:
        return {"model": name, "error": f"timed out after {args.timeout} s", "seconds": args.timeout}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"model": name, "error": f"exit {proc.returncode}: " + (proc.stderr or proc.stdout)[-3000:],
                "seconds": time.perf_counter() - start}
    return json.loads(lines[-1].removeprefix("RESULT "))


def verdict(result: dict) -> str:
    if "skipped" in result:
        return "skip"
    if "error" in result:
        return "ERROR"
    s = real_models.summarize(result)
    ok = s["grad"] <= GRAD_RTOL and s["loss"] <= LOSS_RTOL and s["output"] <= OUTPUT_RTOL
    return "ok" if ok else "FAIL"


def environment(device: str) -> dict:
    env = {"torch": torch.__version__, "device": device, "python": sys.version.split()[0]}
    for package, load in (("transformers", lambda: __import__("transformers")), ("torchvision", real_models.import_torchvision)):
        try:
            env[package] = getattr(load(), "__version__", "not installed")
        except Exception as e:
            env[package] = f"unavailable ({type(e).__name__}: {e})"
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["tf32"] = {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", help=f"comma-separated (default: all): {','.join(real_models.MODELS)}")
    parser.add_argument("--compiler", default="miniinductor", help="a Dynamo backend (inductor: the reference)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--no-sync", action="store_true",
                        help="let the compiled and eager copies train apart (default: the compiled copy is reset to "
                             "the eager copy's state after every step, see real_models.compare_training)")
    parser.add_argument("--jobs", type=int, default=4, help="models at a time, each in its own process")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per model")
    parser.add_argument("--out", help="write every result here (JSON)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print("RESULT " + json.dumps(run_one(args.child, args.device, args.compiler, args.steps, not args.no_sync)), flush=True)
        return 0
    models = args.models.split(",") if args.models else real_models.MODELS
    unknown = [m for m in models if m not in real_models.MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(real_models.MODELS)}")
    full_float32()
    env = environment(args.device)
    print(f"{args.compiler} vs eager, {args.steps} SGD steps{'' if args.no_sync else ' (synced after each)'}, "
          f"float32, TF32 off; {env}")
    print("errors: loss relative, the rest relative norms (gradients: the worst parameter at any step)")
    header = f"{'model':22} {'loss':>9} {'output':>9} {'grad':>9} {'param':>9} {'buffer':>9} {'secs':>6}  verdict  worst gradient"
    print(header, flush=True)
    results = {}

    def report(result):
        name, v = result["model"], verdict(result)
        results[name] = dict(result, verdict=v)
        if args.out:            # after every model: a run cut short keeps what it finished
            Path(args.out).write_text(json.dumps({"environment": env, "compiler": args.compiler, "steps": args.steps,
                                                  "sync": not args.no_sync, "results": results}, indent=1))
        if v in ("ok", "FAIL"):
            s = real_models.summarize(result)
            print(f"{name:22} " + " ".join(f"{x:9.2e}" for x in s.values())
                  + f" {result['seconds']:6.1f}  {v:7}  step {result['worst_grad'][0]} {result['worst_grad'][1]}", flush=True)
        else:
            print(f"{name:22} {v}: {result.get('skipped') or result.get('error', '').strip().splitlines()[-1:]}", flush=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for result in pool.map(lambda name: spawn(name, args), models):
            report(result)
    verdicts = [r["verdict"] for r in results.values()]
    print(f"{verdicts.count('ok')} ok, {verdicts.count('FAIL')} FAIL, {verdicts.count('ERROR')} ERROR, "
          f"{verdicts.count('skip')} skipped in {time.perf_counter() - start:.0f} s")
    return 0 if all(v in ("ok", "skip") for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
