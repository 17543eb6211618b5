"""Run the accuracy debugger on a zoo model at a given training step.

    python benchmarks/zoo_accuracy.py --config t5-large-ish --step 2     # the T5 gradient gap
    python benchmarks/zoo_accuracy.py --model gpt2 --step 0 --device cuda

Trains the compiled model for `--step` SGD steps (lr 0.05, momentum 0.9, the inputs of
zoo.compare_training), then calls `miniinductor.debug_accuracy` on the next step's loss
and gradients and prints its report. On the CPU, t5-large-ish at step 2 names the ReLU
mask (`le`) of one feed-forward layer: one of 524,288 elements flips, on a pre-activation
within rounding of 0, and the float64 level calls it accuracy (there the compiled mask
agrees with float64 and eager's is the one that flipped).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.zoo import CONFIGS, ZOO, WithLoss  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(ZOO), default="gpt2")
    parser.add_argument("--config", choices=sorted(CONFIGS), help="a named size (overrides --model)")
    parser.add_argument("--step", type=int, default=0, help="compiled training steps before the check")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    name, overrides = CONFIGS[args.config] if args.config else (args.model, {})
    entry = ZOO[name]
    cfg = {**entry.config, **overrides}
    torch.manual_seed(0)
    model = entry.make_model(cfg).to(args.device)
    compiled = miniinductor.compile(WithLoss(model, entry.loss_fn))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)

    def batch():
        inputs, target = entry.make_inputs(cfg, gen)
        return [a.to(args.device) for a in inputs], target.to(args.device)
    for _ in range(args.step):
        inputs, target = batch()
        compiled(target, *inputs).backward()
        opt.step()
        opt.zero_grad()
    inputs, target = batch()
    start = time.time()
    report = miniinductor.debug_accuracy(WithLoss(model, entry.loss_fn), target, *inputs, backward=True)
    print(report)
    print(f"debug_accuracy took {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
