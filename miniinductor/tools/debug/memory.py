"""The eager estimate a memory plan is compared with: the peak bytes of the ATen graph run op by op.

Debug tools only (the report, the trace, explain, tutorial 08): computed when they ask
(`eager_peak(compiled)`, from the ATen graph the compile kept in its `Context`), not by the
compiler. Inductor has no counterpart: its `estimate_peak_memory` (torch/_inductor/memory.py)
estimates its own schedule's peak, as codegen/memory_planning.py's plan does ours.
"""
from __future__ import annotations

import math

import torch

from ...codegen.memory_planning import _hint, freeable_inputs


def eager_peak(compiled) -> int:
    """The eager estimate of one CompiledGraph, from the ATen graph it was compiled from."""
    return eager_peak_bytes(compiled.context.gm)


def eager_peak_bytes(gm: torch.fx.GraphModule) -> int:
    """Peak bytes of intermediates (and of the freeable inputs' storages, `freeable_inputs`) if the ATen
    graph ran op by op, each op allocating its outputs and each tensor freed after its last
    user (a view keeps its base alive). Composite ops that eager runs as one kernel appear
    here decomposed, so this slightly overstates eager; it is the baseline our plan must not
    exceed."""
    nodes = list(gm.graph.nodes)
    root, size, end = {}, {}, {}
    freeable, first_of = freeable_inputs(gm), {}   # a storage → the first input that views it
    for k, node in enumerate(nodes):
        if node.op == "placeholder" and node.name in freeable:   # its storage, counted once
            storage, nb = freeable[node.name]
            root[node] = first_of.setdefault(storage, node)
            if root[node] is node:
                size[node], end[node] = nb, k
            continue
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        tensors = [v for v in (val if isinstance(val, (list, tuple)) else [val]) if isinstance(v, torch.Tensor)]
        base = node.all_input_nodes[0] if getattr(node.target, "is_view", False) and node.all_input_nodes else None
        root[node] = root.get(base, None) if base is not None else node
        if root[node] is node:
            size[node] = sum(math.prod(map(_hint, t.shape)) * t.dtype.itemsize for t in tensors)
            end[node] = k
    for k, node in enumerate(nodes):
        for inp in node.all_input_nodes:
            r = root.get(inp)
            if r is not None:
                end[r] = len(nodes) if node.op == "output" else max(end.get(r, k), k)
    ending = {}   # step → the roots whose last user it is
    for r in size:
        ending.setdefault(end[r], []).append(r)
    live = peak = 0
    for k, node in enumerate(nodes):
        live += size.get(node, 0)
        peak = max(peak, live)
        live -= sum(size[r] for r in ending.get(k, ()))
    return peak
