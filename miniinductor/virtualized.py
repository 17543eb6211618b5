"""The `V` object: which ops handler and graph are "current".

Mirrors `torch/_inductor/virtualized.py`. A loop body is a closure `inner_fn(index)`
that calls `ops.add(...)`, `ops.load(...)`; `ops` forwards each call to whatever handler
is installed, so the same closure can be printed, analysed, interpreted or compiled.
Simplified: two slots (`ops`, `graph`) in a `threading.local`, installed only through the
context managers below, so a handler can never leak past the `with` block.
"""
from __future__ import annotations

import contextlib
import threading

_state = threading.local()


def _get(name):
    value = getattr(_state, name, None)
    if value is None:
        raise RuntimeError(f"no {name} handler installed: wrap the call in `with V.set_{name}_handler(...)`")
    return value


@contextlib.contextmanager
def _install(name, value):
    prior = getattr(_state, name, None)
    setattr(_state, name, value)
    try:
        yield value
    finally:
        setattr(_state, name, prior)


class _OpsProxy:
    """`ops.add(a, b)` → `current_handler.add(a, b)`."""

    def __getattr__(self, name):
        return getattr(_get("ops"), name)


class _V:
    """`V.ops`, `V.graph` plus the context managers that install them."""

    @property
    def ops(self):
        return _get("ops")

    @property
    def graph(self):
        return _get("graph")

    def set_ops_handler(self, handler):
        return _install("ops", handler)

    def set_graph_handler(self, graph):
        return _install("graph", graph)

    def has_graph(self):
        return getattr(_state, "graph", None) is not None


V = _V()
ops = _OpsProxy()
