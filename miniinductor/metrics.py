"""Counters about what the compiler did, read by tests, the demo and benchmarks.

Mirrors `torch/_inductor/metrics.py`: plain module counters, reset with `reset()`.
"""
from __future__ import annotations

import collections

generated_kernel_count = 0          # C++/Triton kernels generated (extern calls excluded)
fallback_count = 0                  # ops that ran as ATen ExternKernels
fallback_ops: collections.Counter = collections.Counter()   # op name → times it fell back
output_code_paths: list[str] = []   # generated wrapper modules, one per compiled graph
graphs_compiled = 0
nodes_before_fusion = 0             # scheduler nodes (one per buffer) before fusion ...
nodes_after_fusion = 0              # ... and kernels + extern calls after it
estimated_bytes_moved = 0           # bytes the generated kernels read and write, summed
specializations = 0                 # static compiles of graphs with symbolic sizes (one per shape)


def reset():
    global generated_kernel_count, fallback_count, graphs_compiled
    global nodes_before_fusion, nodes_after_fusion, estimated_bytes_moved, specializations
    specializations = 0
    nodes_before_fusion = nodes_after_fusion = estimated_bytes_moved = 0
    generated_kernel_count = 0
    fallback_count = 0
    graphs_compiled = 0
    fallback_ops.clear()
    output_code_paths.clear()
