"""Log switches in the spirit of TORCH_LOGS: `MINIINDUCTOR_LOGS=fusion,output_code`.

Mirrors `torch/_logging` in small: low-level, imported by every phase (so it sits beside
metrics.py, not in debug/); no artifact logs, no per-module levels.

Each name is a child logger of `miniinductor` (`miniinductor.fusion`, ...). Naming it in
the variable (or calling `set_logs("fusion")`) gives it a stderr handler at INFO level.
"""
from __future__ import annotations

import logging
import os

LOG_NAMES = {
    "fusion": "every fusion decision with its reason and score",
    "schedule": "the kernels of each graph in order, with the buffers each computes",
    "ir_post_fusion": "the loop IR of each buffer",
    "memory": "each graph's memory plan: lifetimes, reuse, planned peak vs eager",
    "output_code": "the path and text of each generated wrapper",
    "fallback": "each op that fell back to ATen, and why",
    "dynamic": "each static specialisation of a graph with symbolic sizes, with its shapes",
    "autotune": "max_autotune's matmul choices: each shape's table of timings and the winner (CPU: ATen or oneDNN)",
}


def plural(count: int, noun: str) -> str:
    """'1 kernel', '3 kernels': counts in messages and reports."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"miniinductor.{name}")


def set_logs(spec: str | None = None):
    """Enable the comma-separated log names (default: from $MINIINDUCTOR_LOGS)."""
    spec = os.environ.get("MINIINDUCTOR_LOGS", "") if spec is None else spec
    for name in filter(None, (s.strip() for s in spec.split(","))):
        if name not in LOG_NAMES:
            valid = ", ".join(sorted(LOG_NAMES))
            raise ValueError(f"unknown MINIINDUCTOR_LOGS name {name!r}; valid names: {valid}")
        logger = get_logger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter(f"[miniinductor.{name}] %(message)s"))
            logger.addHandler(handler)
