"""miniinductor: TorchInductor, phase by phase, small enough to read in an afternoon.

    torch.compile(model, backend="miniinductor")     # registered as an entry point
    miniinductor.compile(model, **options)           # the same, with options checked

Phases, in the order data flows: capture/ → lowering/ → ir/ → scheduler/ → codegen/ →
runtime/ (→ debug/). `compile_fx.py` runs them in order for one graph.
"""
from __future__ import annotations

import torch

from . import metrics  # noqa: F401
from .config import Config
from .debug.explain import explain  # noqa: F401
from .debug.logs import set_logs

set_logs()  # honour $MINIINDUCTOR_LOGS

__version__ = "0.1.0"


def backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """The torch.compile backend: Dynamo's FX graph in, a compiled callable out."""
    from .capture import compile_fx

    if mode not in (None, "default"):
        raise ValueError(f"mode {mode!r} is not supported yet; valid modes: 'default'")
    return compile_fx(gm, example_inputs, Config.from_options(options))


def compile(model, *, fullgraph=False, **options):
    """`torch.compile(model, backend=miniinductor)` with our options validated up front."""
    Config.from_options(options)  # fail fast on a bad option

    def configured_backend(gm, example_inputs):
        return backend(gm, example_inputs, options=options)
    return torch.compile(model, backend=configured_backend, dynamic=False, fullgraph=fullgraph)
