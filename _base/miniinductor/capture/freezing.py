"""Freezing (the `freezing` option): for inference, parameters and buffers become constants
of the ATen graph, and every op that depends on constants alone runs once, at compile time.

Mirrors `torch/_inductor/freezing.py` (`freeze`, `replace_params_with_constants`) and the
folding of `torch/_inductor/constant_folding.py`. A linear layer's `t(weight)`, a
`weight * scale` or autocast's cast of a weight to bfloat16 then becomes a stored constant
instead of work done on every call. As in Inductor, a parameter changed after compiling
may not be seen: what was folded from it keeps its old value, and a parameter replaced by
a new tensor is not noticed (there is no guard on it).

Simplified:
  * Which inputs are parameters: Inductor has Dynamo install them as graph attributes (it
    reads Inductor's global `freezing` flag while tracing) and takes them from
    `TracingContext.params_flat`. A backend cannot change how Dynamo traced, and with
    `inline_inbuilt_nn_modules` parameters arrive as ordinary graph inputs, so we recognise
    them there: an `nn.Parameter`, or a placeholder whose Dynamo source is a module's
    `_buffers` dict. Parameters the Dynamo graph holds itself (older Dynamo, or
    `inline_inbuilt_nn_modules=False`) come first in AOTAutograd's inputs and are frozen too.
  * Inputs the graph mutates (BatchNorm's running statistics in training mode) or returns
    an alias of stay inputs, as in Inductor. When AOTAutograd's inputs do not line up one
    to one with those (duplicated or aliased inputs) nothing is frozen, and the log says so.
  * Folding runs each foldable node with ATen on the real tensors. Of Inductor's extra
    passes only binary folding (`fx_passes/binary_folding.py`) is here: a convolution
    followed by an add, sub, mul or div by a per-channel constant takes it into its weight
    and bias, so an eval BatchNorm (decomposed into exactly those, its statistics folded)
    disappears into the convolution before it. None of the others (conv weight layouts,
    weight packing, other pattern rewrites).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import operator

import torch
import torch._guards
from torch._subclasses.fake_tensor import unset_fake_temporarily

log = logging.getLogger("miniinductor")
aten = torch.ops.aten


def is_param_or_buffer(node: torch.fx.Node, value) -> bool:
    """Is this input of Dynamo's graph a module's parameter or buffer?"""
    if isinstance(value, torch.nn.Parameter):
        return True
    source = getattr(node.meta.get("grapharg"), "source", None) or getattr(node, "_dynamo_source", None)
    name = getattr(source, "name", "")
    name = name() if callable(name) else name   # a method in older torch, a property in newer
    return isinstance(value, torch.Tensor) and "._buffers[" in str(name)


def frozen_candidates(dynamo_gm, dynamo_inputs) -> list:
    """AOTAutograd's inputs in its order (the module's own parameters and buffers, then
    Dynamo's inputs), each the real tensor to bake in, or None if it stays an input."""
    own = [t for named in (dynamo_gm.named_parameters, dynamo_gm.named_buffers)
           for _, t in named(remove_duplicate=False)]
    placeholders = [n for n in dynamo_gm.graph.nodes if n.op == "placeholder"]
    return own + [x if is_param_or_buffer(n, x) else None for n, x in zip(placeholders, dynamo_inputs)]


def freeze(gm: torch.fx.GraphModule, example_inputs, candidates) -> list[int]:
    """Bake the candidates into `gm` as constants and fold; the indices of the inputs still
    passed at run time are returned (all of them when freezing is not safe here)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    every = list(range(len(placeholders)))
    metadata = getattr(torch._guards.TracingContext.try_get(), "fw_metadata", None)
    lined_up = len(placeholders) == len(candidates) == len(example_inputs) and all(
        c is None or (c.shape == x.shape and c.dtype == x.dtype) for c, x in zip(candidates, example_inputs))
    if metadata is None or not lined_up or len(metadata.input_info) != len(candidates):
        log.warning("freezing: AOTAutograd's inputs do not line up with Dynamo's; nothing is frozen")
        return every
    keep = {i for i, info in enumerate(metadata.input_info) if info.mutates_data or info.mutates_metadata}
    keep |= {out.base_idx for out in metadata.output_info if getattr(out, "base_idx", None) is not None}
    frozen = [i for i, value in enumerate(candidates) if value is not None and i not in keep]
    for i in frozen:
        _replace_with_constant(gm, placeholders[i], candidates[i].detach(), "_frozen_param")
    folded = constant_fold(gm)
    convs = fold_conv_binary(gm)
    log.info("freezing: %d inputs became constants, %d values were folded, %d pointwise ops went into "
             "convolutions' weights", len(frozen), folded, convs)
    return [i for i in every if i not in frozen]


def constant_fold(gm: torch.fx.GraphModule) -> int:
    """Run every node whose inputs are all constants once; each result that a remaining
    node reads becomes a constant. Returns how many constants were made."""
    values = {n: functools.reduce(getattr, n.target.split("."), gm) for n in gm.graph.nodes if n.op == "get_attr"}
    devices = {v.device.type for v in values.values() if isinstance(v, torch.Tensor)}
    with contextlib.ExitStack() as stack:   # fold as traced: autocast already put its casts in the graph
        for device_type in devices:
            stack.enter_context(torch.autocast(device_type, enabled=False))
        stack.enter_context(torch.no_grad())
        for node in gm.graph.nodes:
            if _foldable(node, values):
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
                value, meta = node.target(*args, **kwargs), node.meta.get("val")
                if not isinstance(meta, torch.Tensor) or (value.shape, value.dtype) == (meta.shape, meta.dtype):
                    values[node] = value   # (a result unlike the traced one is left to run per call)
    made = 0
    for node, value in values.items():
        if node.op == "call_function" and isinstance(value, torch.Tensor) and any(u not in values for u in node.users):
            _replace_with_constant(gm, node, value, "_folded")
            made += 1
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return made


def _foldable(node, values) -> bool:
    inputs = node.all_input_nodes
    if node.op != "call_function" or not inputs or not all(n in values for n in inputs):
        return False
    if any(user.op == "output" for user in node.users):
        return False   # outputs stay computed per call: the caller gets a fresh tensor, not our constant
    if isinstance(node.target, torch._ops.OpOverload):
        return not node.target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in node.target.tags
    return node.target is operator.getitem


#: conv(x, W, b) <op> c, for c a constant per output channel: the new weight and bias
#: (`c` shaped [C_out, 1, ...] for W, [C_out] for b). Only conv <op> c, or c + conv, c * conv.
_BINARY_FOLDS = {
    aten.mul.Tensor: lambda w, b, cw, cb: (w * cw, b * cb),
    aten.div.Tensor: lambda w, b, cw, cb: (w / cw, b / cb),
    aten.add.Tensor: lambda w, b, cw, cb: (w, b + cb),
    aten.sub.Tensor: lambda w, b, cw, cb: (w, b - cb),
}


def fold_conv_binary(gm: torch.fx.GraphModule) -> int:
    """Inductor's binary folding: `convolution(x, W, b) <op> c` with `c` a constant that is
    one value per output channel (or one value) becomes `convolution(x, W', b')`, W' and b'
    computed here. Eval BatchNorm's (x - mean) * invstd * weight + bias folds away so.
    Returns how many ops were folded."""
    values = {n: functools.reduce(getattr, n.target.split("."), gm) for n in gm.graph.nodes if n.op == "get_attr"}
    folded = 0
    for node in list(gm.graph.nodes):
        if node.target not in _BINARY_FOLDS or node.kwargs or len(node.args) != 2:
            continue
        conv, const = node.args
        if node.target in (aten.add.Tensor, aten.mul.Tensor) and conv in values:
            conv, const = const, conv   # c + conv, c * conv
        if not (isinstance(conv, torch.fx.Node) and conv.target is aten.convolution.default
                and len(conv.users) == 1 and not conv.args[6] and const in values
                and conv.args[1] in values and conv.args[2] in (None, *values)):
            continue   # (args[6]: a transposed convolution keeps its output channels in W's dim 1)
        weight, c, out = values[conv.args[1]], values[const], node.meta.get("val")
        bias = values[conv.args[2]] if conv.args[2] is not None else weight.new_zeros(weight.shape[0])
        channel = weight.dim() - 2   # the output's channel dim, counted from the right
        per_channel = (isinstance(c, torch.Tensor) and c.dim() <= weight.dim() and c.numel() in (1, weight.shape[0])
                       and all(n == 1 for k, n in enumerate(reversed(c.shape)) if k != channel))
        if not per_channel or not c.dtype == weight.dtype == bias.dtype == getattr(out, "dtype", None):
            continue
        c = c.reshape(-1).expand(weight.shape[0]).to(weight.device)
        with torch.no_grad():
            new = _BINARY_FOLDS[node.target](weight, bias, c.reshape(-1, *[1] * (weight.dim() - 1)), c)
        args = list(conv.args)
        for k, value in zip((1, 2), new):
            mine = isinstance(args[k], torch.fx.Node) and args[k].target.startswith("_conv_folded")
            if mine and len(args[k].users) == 1:
                gm.register_buffer(args[k].target, value)   # folded before: only this conv reads it
            else:
                args[k] = _constant(gm, conv, value, "_conv_folded")
            values[args[k]] = value
        conv.args = tuple(args)
        node.replace_all_uses_with(conv)
        gm.graph.erase_node(node)
        folded += 1
    gm.graph.eliminate_dead_code()
    used = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for name in [name for name, _ in gm.named_buffers() if name not in used and "." not in name]:
        delattr(gm, name)   # weights and statistics folded away
    gm.recompile()
    return folded


def _constant(gm, before, value, prefix) -> torch.fx.Node:
    """A new constant of `gm` holding `value`, read by a get_attr node placed before `before`."""
    k = 0
    while hasattr(gm, f"{prefix}{k}"):
        k += 1
    gm.register_buffer(f"{prefix}{k}", value)
    with gm.graph.inserting_before(before):
        return gm.graph.get_attr(f"{prefix}{k}")


def _replace_with_constant(gm, node, value, prefix):
    const = _constant(gm, node, value, prefix)
    const.meta.update(node.meta)
    node.replace_all_uses_with(const)
    if node.op == "placeholder":   # dead call_function nodes go in eliminate_dead_code
        gm.graph.erase_node(node)


def compile_frozen(gm, example_inputs, *, inner, candidates):
    """AOTAutograd's inference compiler with freezing: freeze, compile what is left with
    `inner`, and drop the frozen inputs from each call's (boxed) argument list."""
    with unset_fake_temporarily():   # AOTAutograd calls us inside its fake mode; we need real tensors
        kept = freeze(gm, example_inputs, candidates)
    compiled = inner(gm, [example_inputs[i] for i in kept])
    if len(kept) == len(example_inputs):
        return compiled

    def call(args):
        kept_args = [args[i] for i in kept]
        args.clear()   # the boxed convention: the list is ours to empty
        return compiled(kept_args)
    call._boxed_call = True
    return call
