"""Two passes over the ATen graph before lowering (C++ backend) for a convolution's eval
epilogue, as in a ResNet: fold a per-channel affine chain into the convolution, and pool
before a ReLU rather than after it.

`fold_conv_affine`: a per-channel affine chain after a convolution -- eval BatchNorm, as
decomposed: `(conv - mean) * invstd * gamma + beta` -- folded into the convolution's weight and
bias, computed on every call from the parameters as they are (nothing frozen):

    y = conv(x, w, b) op1 c1 op2 c2 ...     (each op an add, sub or mul by a [C, 1, 1] tensor)
      = conv(x, w * scale[:, None, None, None], b * scale + shift)
      with scale, shift the chain's product and sum, [C] each

The [C]-sized arithmetic runs in a small kernel of ours before the convolution. Mirrors
`torch/_inductor/fx_passes/efficient_conv_bn_eval.py` (the same folding, off by default there,
matched on the graph before decomposition); freezing's conv-BN folding in Inductor does it once
at compile time. Ours matches the decomposed ops, so any per-channel scale and shift folds, not
only BatchNorm's. Alone it saves arithmetic, not a pass (the chain was one pointwise kernel
with what follows it), so it is done only where a max pool reads the chain (or a ReLU of it,
for the pass below): the pooling would otherwise store its input first.

`relu_after_max_pool`: `max_pool(relu(y))` whose indices nothing reads becomes
`relu(max_pool(y))` -- the same values (relu never lowers an order; NaN stays NaN; a window of
negatives gives 0 either way) -- so the pooling reads the convolution's output directly and the
ReLU runs once per pooled value, inside the pooling kernel: a ResNet stem loses its pass over
the activations (8 x 64 x 56 x 56 floats read and written). Reading the ReLU inline in every
window position instead kept g++ from vectorising the pooling loop (13.9 against 0.48 ms).

Simplified: convolutions not transposed, float32 only (folding rounds the weight once more: a
relative 1e-7-ish change against eager, under every tolerance); the C++ backend only (on the
GPU the chain is already one pointwise epilogue kernel -- folding there is untried). A
convolution or chain value read by anything else (a training graph saving it for the backward)
is left alone, as is a pooling whose indices are read (the backward's: they differ at ties).
"""
from __future__ import annotations

import operator

import torch

from ..codegen.policy import BackendPolicy
from ..config import Config
from .matmul import left_to_aten
from .registry import aten

FOLDS = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor}


def _per_channel(arg, out: torch.Tensor) -> bool:
    """Is `arg` a tensor broadcast along every dim of `out` [N, C, *spatial] but C?"""
    val = getattr(arg, "meta", {}).get("val")
    if not (isinstance(val, torch.Tensor) and val.dtype == out.dtype and val.device == out.device):
        return False
    shape = [1] * (out.dim() - 1 - val.dim()) + list(val.shape)   # [C, 1, 1] or [1, C, 1, 1]
    return len(shape) == out.dim() - 1 and shape[0] == out.shape[1] and all(n == 1 for n in shape[1:])


def _depends_on(node: torch.fx.Node, ancestor: torch.fx.Node) -> bool:
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n is ancestor:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(n.all_input_nodes)
    return False


def _chain(conv: torch.fx.Node) -> list[tuple[str, torch.fx.Node, torch.fx.Node]]:
    """[(op, the per-channel operand, the node)] from `conv` down its single-reader chain."""
    out, steps, node = conv.meta["val"], [], conv
    while len(node.users) == 1:
        (user,) = node.users
        if user.target not in FOLDS or user.kwargs or len(user.args) != 2:
            break
        x, c = user.args
        if x is not node and user.target is not aten.sub.Tensor:   # c * x, c + x
            x, c = c, x
        if x is not node or not _per_channel(c, out) or _depends_on(c, conv):   # (a training BatchNorm's batch mean)
            break
        steps.append((str(user.target.overloadpacket).split(".")[-1], c, user))
        node = user
    return steps


def _feeds_a_pool(node: torch.fx.Node) -> bool:
    """Is `node` read by a max pool alone, directly or through a ReLU read by it alone? There
    folding saves a pass over the activations (the pooling would store its input first); where
    the chain ends in other pointwise work it is fused there already and folding saves only
    arithmetic on a memory-bound pass: no faster measured on conv_bn_relu of
    benchmarks/bench_cpu.py (a 1-2% difference seen first was the benchmark's order: identical
    graphs differed as much), so it is not done."""
    users = list(node.users)
    if len(users) == 1 and users[0].target is aten.relu.default:
        users = list(users[0].users)
    return len(users) == 1 and users[0].target is aten.max_pool2d_with_indices.default


def fold_conv_affine(gm: torch.fx.GraphModule, policy: BackendPolicy, config: Config) -> int:
    """Fold, in place, each per-channel affine chain after a convolution into its weight and
    bias. Returns how many convolutions took one."""
    if policy.name != "cpp" or config.fallback_all:
        return 0
    from torch._guards import detect_fake_mode
    folded = 0
    for conv in list(gm.graph.nodes):
        if conv.target is not aten.convolution.default or conv.args[6] or left_to_aten(conv, config) \
                or not isinstance(conv.meta.get("val"), torch.Tensor) or conv.meta["val"].dtype != torch.float32:
            continue
        steps = _chain(conv)
        if not steps or not _feeds_a_pool(steps[-1][2]):
            continue
        fake_mode = detect_fake_mode([conv.meta["val"]])
        channels, weight_rank = conv.meta["val"].shape[1], conv.args[1].meta["val"].dim()
        last = steps[-1][2]   # (new nodes go before it: the chain's operands may come after the conv)

        def call(target, *args):
            """A new node before `last`, its meta["val"] computed on the fake values."""
            with gm.graph.inserting_before(last):
                node = gm.graph.call_function(target, args)
            with fake_mode:
                node.meta["val"] = target(*[a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args])
            return node
        scale = shift = None
        for op, c, _ in steps:
            c = call(aten.view.default, c, [channels])                                       # [C]
            if op == "mul":
                scale = c if scale is None else call(aten.mul.Tensor, scale, c)
                shift = None if shift is None else call(aten.mul.Tensor, shift, c)
            elif op == "add":
                shift = c if shift is None else call(aten.add.Tensor, shift, c)
            else:
                shift = call(aten.neg.default, c) if shift is None else call(aten.sub.Tensor, shift, c)
        x, w, b, *rest = conv.args
        if scale is not None:
            w = call(aten.mul.Tensor, w, call(aten.view.default, scale, [channels] + [1] * (weight_rank - 1)))
            b = None if b is None else call(aten.mul.Tensor, b, scale)
        if shift is not None:
            b = shift if b is None else call(aten.add.Tensor, b, shift)
        with gm.graph.inserting_before(last):
            new = gm.graph.call_function(aten.convolution.default, (x, w, b, *rest))
        new.meta = dict(last.meta)
        last.replace_all_uses_with(new)
        for _, _, node in reversed(steps):
            gm.graph.erase_node(node)
        gm.graph.erase_node(conv)
        folded += 1
    if folded:
        gm.recompile()
    return folded


def relu_after_max_pool(gm: torch.fx.GraphModule, policy: BackendPolicy, config: Config) -> int:
    """Rewrite, in place, each `max_pool2d_with_indices(relu(y))` whose indices are unread (and
    whose relu nothing else reads) into `relu(max_pool2d_with_indices(y)[0])`. Returns how many."""
    if policy.name != "cpp" or config.fallback_all:
        return 0
    found = []
    for pool in gm.graph.nodes:
        if pool.target is not aten.max_pool2d_with_indices.default or left_to_aten(pool, config):
            continue
        relu = pool.args[0]
        if not (isinstance(relu, torch.fx.Node) and relu.target is aten.relu.default and len(relu.users) == 1
                and pool.users and all(u.target is operator.getitem and u.args[1] == 0 for u in pool.users)
                and isinstance(relu.meta.get("val"), torch.Tensor) and relu.meta["val"].is_floating_point()):
            continue
        found.append((relu, pool))
    for relu, pool in found:
        with gm.graph.inserting_before(pool):
            new_pool = gm.graph.call_function(aten.max_pool2d_with_indices.default, (relu.args[0], *pool.args[1:]),
                                              dict(pool.kwargs))
            value = gm.graph.call_function(operator.getitem, (new_pool, 0))
            out = gm.graph.call_function(aten.relu.default, (value,))
        new_pool.meta = dict(pool.meta)
        some = next(iter(pool.users))
        value.meta, out.meta = dict(some.meta), dict(some.meta)
        for user in list(pool.users):
            user.replace_all_uses_with(out)
            gm.graph.erase_node(user)
        gm.graph.erase_node(pool)
        gm.graph.erase_node(relu)
    if found:
        gm.recompile()
    return len(found)
