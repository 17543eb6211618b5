"""miniinductor: TorchInductor, phase by phase, small enough to read in an afternoon.

    torch.compile(model, backend="miniinductor")     # registered as an entry point
    miniinductor.compile(model, **options)           # the same, with options checked

Phases, in the order data flows: capture/ → lowering/ → ir/ → scheduler/ → codegen/ →
runtime/ (→ tools/debug/); the Triton backend is triton/, the extensions ext/. `compile_fx.py` runs them in order for one graph; `backend` and
`compile` live there too and are re-exported here.
"""
from __future__ import annotations

from . import compile_fx as _compile_fx
from .triton import backend as _triton  # noqa: F401  (registers the Triton backend, before the extensions: the core never imports it)

# isort: split
from . import (
    ext,  # noqa: F401  (registers every extension: the core never imports them)
    metrics,  # noqa: F401
)
from .compile_fx import backend, compile  # noqa: F401  (the two entry points)
from .config import Config, list_mode_options, list_options  # noqa: F401
from .logs import set_logs
from .tools.debug.accuracy import debug_accuracy  # noqa: F401
from .tools.debug.compare import compare  # noqa: F401
from .tools.debug.explain import explain  # noqa: F401
from .tools.debug.structured_trace import log_structured_trace  # noqa: F401  (registers itself: TORCH_TRACE, for tlparse)
from .tools.debug.trace import trace_compiled_graph

set_logs()  # honour $MINIINDUCTOR_LOGS
__version__ = "0.1.0"


def _write_trace(compiled, config: Config):
    """The `trace` option (or $MINIINDUCTOR_TRACE): a trace folder for every compiled graph."""
    if config.trace:
        trace_compiled_graph(compiled, config.trace, fx_graph_module=compiled.fx_graph_module)


_compile_fx.after_compile.append(_write_trace)
