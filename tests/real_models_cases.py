"""The runner of tests/core/test_real_models.py: each real model (miniinductor/tools/real_models/)
trained compiled vs eager in a process of its own.

    python tests/real_models_cases.py OUT_DIR [--steps N] [--workers N] MODEL [MODEL ...]

imports torch, transformers, torchvision (where installed) and miniinductor once, then
forks one child per MODEL (tests/forking.py), `--workers` at a time (default 2), so no
child pays for the imports and a crash (a segfault in a generated kernel) or a hang ends
only its own child: a child that runs longer than CASE_TIMEOUT seconds is killed by
SIGALRM. A child runs `real_models.compare_training(MODEL)` with its stdout and stderr in
OUT_DIR/MODEL.log, whose last line is `RESULT {json}` (the errors, compared by the test),
or `SKIPPED reason` when the package the model needs is not installed; this process writes
each child's exit status to OUT_DIR/MODEL.exit (negative: the signal that killed it).
Start it with OMP_NUM_THREADS=1 when running two workers on two cores.
"""
from __future__ import annotations

import argparse
import signal
from pathlib import Path

import torch
from forking import child_main, fork_each

import miniinductor  # noqa: F401  (the backend, and its imports paid once)
from miniinductor.tools import real_models

CASE_TIMEOUT = 480   # seconds; the slowest model takes ~60 s alone on a loaded machine


def run_child(name: str, options: dict):
    """In a forked child: one model, output to its log; never returns."""
    signal.alarm(CASE_TIMEOUT)

    def body():
        if not real_models.available(name):
            print(f"SKIPPED {real_models.needs(name)} is not installed")
            return None
        return real_models.compare_training(name, steps=options["steps"])
    child_main(options["out_dir"] / f"{name}.log", body)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("models", nargs="+", choices=real_models.MODELS, metavar="MODEL")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    # the optional packages, imported before forking (transformers takes seconds)
    if any(real_models.needs(m) for m in args.models):
        for name in args.models:
            real_models.available(name)
        try:
            import transformers
            transformers.logging.set_verbosity_error()   # config warnings about unused defaults
        except ImportError:
            pass
    torch.manual_seed(0)
    options = {"out_dir": args.out_dir, "steps": args.steps}
    fork_each([(name, options) for name in args.models], run_child, args.out_dir, args.workers)


if __name__ == "__main__":
    main()
