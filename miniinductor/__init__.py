"""miniinductor: TorchInductor, phase by phase, small enough to read in an afternoon.

    torch.compile(model, backend="miniinductor")     # registered as an entry point
    miniinductor.compile(model, **options)           # the same, with options checked

Phases, in the order data flows: capture/ → lowering/ → ir/ → scheduler/ → codegen/ →
runtime/ (→ debug/). `compile_fx.py` runs them in order for one graph.
"""
from __future__ import annotations

import torch

from . import metrics  # noqa: F401
from .config import Config, list_mode_options, list_options  # noqa: F401
from .debug.compare import compare  # noqa: F401
from .debug.explain import explain  # noqa: F401
from .debug.accuracy import debug_accuracy  # noqa: F401
from .debug.logs import set_logs

set_logs()  # honour $MINIINDUCTOR_LOGS

__version__ = "0.1.0"


def backend(gm: torch.fx.GraphModule, example_inputs, mode=None, options=None):
    """The torch.compile backend: Dynamo's FX graph in, a compiled callable out.
    `torch.compile(m, backend="miniinductor", mode=..., options={...})` lands here;
    `options` may hold `preset` (see config.PRESETS) besides our option names."""
    options = dict(options or {})
    preset = options.pop("preset", None)
    return _compile_with(gm, example_inputs, Config.build(mode, options, preset))


def _compile_with(gm, example_inputs, config):
    from .capture import compile_fx
    return compile_fx(gm, example_inputs, config)


def compile(model, *, mode=None, preset=None, fullgraph=False, dynamic=False,
            freezing=None, autocast_enabled=None, autocast_dtype=None, **options):
    """`torch.compile(model, backend=miniinductor)` with our options validated up front.

    `freezing`, `autocast_enabled` and `autocast_dtype` are top-level flags like `mode`.
    Precedence: explicit `**options` over the flags over `preset` (see config.py).
    `dynamic` goes to torch.compile. False (the default): Dynamo recompiles a static graph
    per shape. True, or None after a second shape: Dynamo hands over symbolic sizes and we
    compile one static specialisation per concrete shape (capture/specialize.py)."""
    flags = {"freezing": freezing, "autocast_enabled": autocast_enabled, "autocast_dtype": autocast_dtype}
    config = Config.build(mode, options, preset, flags)   # fail fast on a bad mode, preset or option

    def configured_backend(gm, example_inputs):
        return _compile_with(gm, example_inputs, config)
    return torch.compile(model, backend=configured_backend, dynamic=dynamic, fullgraph=fullgraph)
