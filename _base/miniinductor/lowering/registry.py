"""The lowering table: ATen op → Python function that builds loop IR.

Mirrors the `lowerings` dict and `register_lowering` in `torch/_inductor/lowering.py`.
A lowering receives IR nodes for tensor arguments and plain Python values for the rest,
and returns an IR node (or a tuple of them). Ops missing from the table (or whose
lowering raises NotImplementedError) run as an `ExternKernel` (`GraphLowering.fallback`
in graph.py).
"""
from __future__ import annotations

import torch

lowerings: dict = {}


def register_lowering(*aten_ops):
    """Register `fn` for each op: an OpOverloadPacket covers all of its overloads."""
    def decorator(fn):
        for op in aten_ops:
            lowerings[op] = fn
        return fn
    return decorator


def find_lowering(target):
    """The lowering for an FX node's target: the exact overload first, then its packet."""
    if target in lowerings:
        return lowerings[target]
    packet = getattr(target, "overloadpacket", None)
    return lowerings.get(packet)


aten = torch.ops.aten
prims = torch.ops.prims
