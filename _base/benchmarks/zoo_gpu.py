"""The model zoo's training comparison on a device: miniinductor and Inductor vs eager.

    python benchmarks/zoo_gpu.py                          # every zoo model, CUDA if present
    python benchmarks/zoo_gpu.py --device cpu --model gpt2 --compiler ours
    python benchmarks/zoo_gpu.py --config t5-large-ish --worst 8

For each model (miniinductor/zoo.py) and compiler, trains a compiled copy and an eager
copy for a few SGD steps (zoo.compare_training) and prints the worst parameter
gradient's error relative to that gradient's max |value| (over all steps), the loss
error and the eval-mode output error, each relative to the eager value's max. With
`--worst K`, the K worst parameters are listed too, so a single drifting gradient can be
named, with the error outside its worst row (dim 0): an error confined to one row of an
FF input weight is one ReLU mask flipped for one token, its pre-activation within float32
rounding of 0. (On the CPU, t5-large-ish: decoder.2.wi.weight off by 3.9e-3 of its max at
step 2, all in one row, whose unit had a pre-activation of 6.5e-8 at scale 2.7; the other
rows agree to 7e-7 of the max; the 8 worst gradients are all at step 2, downstream of it.)
`--config t5-large-ish` is the T5 size of the GPU report (batch 4, seq 128,
width 256, 4 layers). `--json PATH` writes every number.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.zoo import CONFIGS, ZOO, compare_training, worst_grads  # noqa: E402

COMPILERS = {
    "ours": miniinductor.compile,
    "inductor": lambda m: torch.compile(m, backend="inductor", dynamic=False),
}


def summarize(result) -> dict:
    loss = max(abs(c - e) / max(abs(e), 1e-12) for e, c in result["losses"])
    grad = worst_grads(result, 1)[0]
    err, scale, _ = result["eval"]
    return {"loss_rel": loss, "grad_rel": grad[0], "grad_worst": grad[2],
            "eval_rel": err / scale if scale else err}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", action="append", choices=sorted(ZOO), help="repeatable; default: all")
    parser.add_argument("--config", choices=sorted(CONFIGS), help="a named size (overrides --model)")
    parser.add_argument("--compiler", action="append", choices=sorted(COMPILERS), help="default: both")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--worst", type=int, default=0, help="list the K worst parameter gradients")
    parser.add_argument("--json", help="write all results here")
    args = parser.parse_args(argv)

    runs = ([(args.config, *CONFIGS[args.config])] if args.config
            else [(name, name, {}) for name in (args.model or ZOO)])
    compilers = args.compiler or list(COMPILERS)
    print(f"device {args.device}, torch {torch.__version__}, {args.steps} SGD steps; errors are "
          f"max |compiled - eager| / max |eager| (gradients: the worst parameter, any step, its max "
          f"floored at 1% of the step's largest gradient)")
    print(f"{'model':14} {'compiler':9} {'loss':>9} {'grad':>9} {'eval':>9} {'secs':>6}  worst gradient")
    everything = {}
    for label, name, overrides in runs:
        for compiler in compilers:
            torch._dynamo.reset()
            start = time.perf_counter()
            result = compare_training(name, COMPILERS[compiler], device=args.device, steps=args.steps,
                                      **overrides)
            secs = time.perf_counter() - start
            s = summarize(result)
            everything[f"{label}/{compiler}"] = result
            print(f"{label:14} {compiler:9} {s['loss_rel']:9.2e} {s['grad_rel']:9.2e} "
                  f"{s['eval_rel']:9.2e} {secs:6.1f}  {s['grad_worst']}", flush=True)
            for rel, step, param in worst_grads(result, args.worst):
                err, scale, rest = result["grads"][step][param]
                print(f"{'':25} step {step} {param}: {rel:.2e} (error {err:.2e}, max {scale:.2e}, "
                      f"outside its worst row {rest / scale if scale else rest:.2e})")
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
