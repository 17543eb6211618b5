"""Dynamic shapes by specialisation: one static compile per concrete shape -- the fallback.

Phase 1 (capture), for graphs Dynamo hands over with symbolic sizes that cannot be
compiled generic in their sizes (`SymbolicUnsupported`). `Specializer` keys each call on
what static code bakes in (scalar inputs' values; tensors' sizes, strides, dtype, device,
requires_grad; grad mode) and, on a miss, runs the ordinary pipeline on Dynamo's graph
with the call's real tensors; `PerShape` does the same for one ATen graph. Inductor has no
such fallback: it compiles every graph generic in its sizes. Every new shape costs a full
compile (`metrics.specializations`; a warning after `WARN_AFTER`): docs/design_notes.md.
"""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .. import metrics
from ..logs import get_logger

log = get_logger("dynamic")   # miniinductor.dynamic: MINIINDUCTOR_LOGS=dynamic shows each compile

WARN_AFTER = 8  # specialisations of one graph before we warn that shapes keep changing

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def has_symbolic_inputs(example_inputs) -> bool:
    """Does Dynamo's graph take SymInts, or tensors with symbolic sizes, strides or offset?"""
    def symbolic(x):
        if isinstance(x, torch.Tensor):
            strided = (*x.stride(), x.storage_offset()) if x.layout == torch.strided else ()
            return any(isinstance(s, _SYMBOLIC) for s in (*x.shape, *strided))
        return isinstance(x, _SYMBOLIC)
    return any(symbolic(x) for x in example_inputs)


def specialization_key(args) -> tuple:
    """Everything a static compile of these arguments bakes in (storage offsets are not:
    the wrapper addresses tensors through their data pointers)."""
    key = [torch.is_grad_enabled()]
    for x in args:
        if isinstance(x, torch.Tensor):
            strides = x.stride() if x.layout == torch.strided else x.layout
            key.append((tuple(x.shape), strides, x.dtype, x.device, x.requires_grad))
        else:
            key.append((type(x), x))
    return tuple(key)


def describe(args) -> str:
    """`float32[8, 16], 3`: the sizes and scalars of one call, for the log."""
    def one(x):
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
        return repr(x)
    return ", ".join(map(one, args))


def _compile_id() -> str:
    """Dynamo's `frame/recompile` id of the graph being compiled ("0/1"), if it has one."""
    try:
        return str(torch._guards.CompileContext.current_compile_id() or "?")
    except (AttributeError, RuntimeError):  # not every torch version has it
        return "?"


class Specializer:
    """The backend's callable for a graph with symbolic inputs: a cache of static compiles.
    `compile_static(gm, concrete_args)`: the ordinary capture pipeline, a callable of `*args`."""

    def __init__(self, gm: torch.fx.GraphModule, compile_static):
        self.gm = gm
        self.compile_static = compile_static
        self.cache: dict[tuple, object] = {}
        self.graph_id = _compile_id()
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # a Python float under dynamic=True arrives as a 0-d tensor the graph only `.item()`s
        self.wrapped_scalars = {i for i, n in enumerate(placeholders) if n.users and all(map(_is_item, n.users))}

    def __call__(self, *args):
        args = [x.item() if i in self.wrapped_scalars else x for i, x in enumerate(args)]
        key = specialization_key(args)
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self.cache[key] = self._specialize(args)
        return compiled(*args)

    def _specialize(self, args):
        count = len(self.cache) + 1
        log.info("graph %s: compiling specialisation %d for (%s)", self.graph_id, count, describe(args))
        if count == WARN_AFTER + 1:
            log.warning("graph %s has more than %d shape specialisations; each new shape costs a "
                        "full compile (miniinductor specialises dynamic shapes)", self.graph_id, WARN_AFTER)
        tensors = [x for x in args if isinstance(x, torch.Tensor)]
        compiled = self.compile_static(bake_scalars(self.gm, args), tensors)
        metrics.specializations += 1
        return lambda *args: compiled(*[x for x in args if isinstance(x, torch.Tensor)])


class PerShape:
    """A boxed callable for an ATen graph with symbolic sizes that could not be compiled
    generic in them (a backward graph, compiled lazily once its forward already runs): on
    each new shape, `make_fx` re-traces it on the call's real inputs (sizes become ints) and
    `compile_static(static_gm, args)` compiles that; cached by `specialization_key`."""
    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, compile_static):
        self.gm, self.compile_static = gm, compile_static
        self.cache: dict[tuple, object] = {}
        self.graph_id = _compile_id()

    def __call__(self, args):
        key = specialization_key(args)
        compiled = self.cache.get(key)
        if compiled is None:
            log.info("graph %s: compiling specialisation %d for (%s)", self.graph_id, len(self.cache) + 1,
                     describe(args))
            static_gm = make_fx(self.gm, tracing_mode="fake")(*args)
            compiled = self.cache[key] = self.compile_static(static_gm, list(args))
            metrics.specializations += 1
        return compiled(list(args))


def bake_scalars(gm: torch.fx.GraphModule, args) -> torch.fx.GraphModule:
    """A copy of Dynamo's graph with this call's values in place of its scalar inputs (SymInt
    sizes, ints like `n`, wrapped floats' `.item()`): only tensors remain inputs, as in a
    static graph. It shares `gm`'s attributes (parameters are not copied)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        raise RuntimeError(f"Dynamo's graph has {len(placeholders)} inputs but was called with {len(args)}")
    values = {}
    for node, x in zip(placeholders, args):
        if not isinstance(x, torch.Tensor):
            values[node] = x
            values.update({user: x for user in node.users if _is_item(user)})
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, values))
    tensors = [x for x in args if isinstance(x, torch.Tensor)]
    for node, x in zip([n for n in graph.nodes if n.op == "placeholder"], tensors):
        if x.layout != torch.strided:
            continue
        # concrete example layouts (meta tensors: no data kept alive) for the trace folder
        node.meta["example_value"] = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        node.meta.pop("val", None)
    return torch.fx.GraphModule(gm, graph)


def _is_item(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "item") or \
        node.target in (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default)
