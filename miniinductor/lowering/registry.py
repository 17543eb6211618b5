"""The lowering table: ATen op → Python function that builds loop IR.

Mirrors the `lowerings` dict and `register_lowering` in `torch/_inductor/lowering.py`.
A lowering receives IR nodes for tensor arguments and plain Python values for the rest,
and returns an IR node (or a tuple of them). Ops missing from the table (or whose
lowering raises NotImplementedError, or whose extension is off) run as an `ExternKernel`
(`GraphLowering.fallback` in graph.py).
"""
from __future__ import annotations

import torch

lowerings: dict = {}
#: op → the extension (miniinductor/ext/) that registered its lowering; the core's are absent
owners: dict = {}


def register_lowering(*aten_ops, extension: str = "core"):
    """Register `fn` for each op: an OpOverloadPacket covers all of its overloads."""
    def decorator(fn):
        for op in aten_ops:
            lowerings[op] = fn
            if extension != "core":
                owners[op] = extension
        return fn
    return decorator


def find_lowering(target, config=None):
    """The lowering for an FX node's target: the exact overload first, then its packet;
    None where it is an extension's that `config` leaves off."""
    key = target if target in lowerings else getattr(target, "overloadpacket", None)
    if config is not None and not config.uses(owners.get(key, "core")):
        return None
    return lowerings.get(key)


aten = torch.ops.aten
prims = torch.ops.prims
