"""Counters about what the compiler did, read by tests, the demo and benchmarks.

Mirrors `torch/_inductor/metrics.py`: plain module counters, reset with `reset()`.
These are observations, not configuration (configuration lives in `config.Config`).
"""
from __future__ import annotations

import collections

generated_kernel_count = 0          # C++/Triton kernels generated (extern calls excluded)
fallback_count = 0                  # ops that ran as ATen ExternKernels
fallback_ops: collections.Counter = collections.Counter()   # op name → times it fell back
output_code_paths: list[str] = []   # generated wrapper modules, one per compiled graph
graphs_compiled = 0


def reset():
    global generated_kernel_count, fallback_count, graphs_compiled
    generated_kernel_count = 0
    fallback_count = 0
    graphs_compiled = 0
    fallback_ops.clear()
    output_code_paths.clear()
