"""Passes over the joint forward+backward graph, run before the partitioner splits it.

Mirrors `torch/_inductor/fx_passes/joint_graph.py`, which runs a pattern matcher over the
joint graph; we keep two passes that change what the partitioner saves or the backward
computes:

`remove_pointless_converts`: a float value converted to another float dtype and back,
`_to_copy(_to_copy(x, dtype=bf16), dtype=float32)` (here and there through `aten.alias`),
becomes `_to_copy(x, dtype=float32)`, as Inductor's `pointless_convert` does. It comes from
decompositions that compute in float32 and round the result to the input's dtype: a
bfloat16 `log_softmax` rounds its float32 output to bfloat16, and its backward upcasts that
again. With the round trip in the graph, the partitioner has to save the bfloat16 output (as
large as the logits) and the forward writes it; without it, the backward's float32 input is
recomputed from the logits and the row statistics, as Inductor's is, and the forward only
reads (cross-entropy over 8192 x 32000 bfloat16 logits: the forward kernel stops writing
524 MB). The backward then starts from the unrounded float32 value, which is closer to the
exact result than eager's (eager rounds to bfloat16 in between). Inductor rewrites every such
chain; we rewrite only conversions that the forward's outputs do not need, so that the
forward computes exactly what eager (and our inference graph) does, rounding included: a
user's deliberate `x.half().float()` in the forward stays.

`sum_of_one_hot`: a row sum of a one-hot row, `sum(scatter(zeros, d, index, c) * m, d)` with one
index per row along `d` (nll_loss's backward, summed again by log_softmax's backward), is
`c * m`: no pass over the row at all. Inductor has no such rewrite; its backward of a
cross-entropy over 8192 x 32000 logits runs the sum as a loop of index comparisons over every
element (ours took 74 µs of a 463 µs bfloat16 backward that way on an H100). Values are
eager's: the sum of one product and zeros is that product. (An infinite output gradient gives
NaN rows with or without the rewrite -- the decomposed one-hot product is `0 * inf` off the
target -- where eager's nll_loss backward, writing only the target's element, gives inf.)

`partitioner_knows_our_ops`: the partitioner recomputes only ops on its lists of fusible and
recomputable ops, which name Inductor's `prims.prepare_softmax_online` but not our own custom
op (capture/softmax.py). Without it on the lists, the backward of a bfloat16 cross-entropy
saved the float32 log-softmax (twice the logits' bytes) instead of the logits and two numbers
per row. The lists are built by `torch._functorch.partitioners.get_default_op_list` on each
call; the context manager adds our op to what it returns while our partition runs.
"""
from __future__ import annotations

import contextlib
import functools

import torch
import torch._functorch.partitioners as partitioners

from . import softmax  # noqa: F401  (registers torch.ops.miniinductor.prepare_softmax_online)

aten = torch.ops.aten
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _float_convert_source(node):
    """x, if `node` is `_to_copy(x, dtype=<float>)` of a float x with nothing but the dtype
    changed; else None."""
    if node.op != "call_function" or node.target is not aten._to_copy.default or set(node.kwargs) != {"dtype"}:
        return None
    source = node.args[0]
    val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if node.kwargs["dtype"] not in FLOATS or not isinstance(val, torch.Tensor) or val.dtype not in FLOATS:
        return None
    return source


def forward_nodes(graph: torch.fx.Graph, num_fwd_outputs: int) -> set:
    """The nodes the joint graph's first `num_fwd_outputs` outputs (the forward's) depend on."""
    stack = [a for a in graph.output_node().args[0][:num_fwd_outputs] if isinstance(a, torch.fx.Node)]
    seen = set()
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def remove_pointless_converts(graph: torch.fx.Graph, num_fwd_outputs: int) -> int:
    """Rewire every float -> float -> float conversion outside the forward to convert once;
    returns how many."""
    count, forward = 0, forward_nodes(graph, num_fwd_outputs)
    for node in graph.find_nodes(op="call_function", target=aten._to_copy.default):
        if node in forward or _float_convert_source(node) is None:
            continue
        inner = node.args[0]
        while inner.op == "call_function" and inner.target is aten.alias.default:
            inner = inner.args[0]
        source = _float_convert_source(inner)
        if source is not None:
            node.args = (source, *node.args[1:])
            count += 1
    if count:
        graph.eliminate_dead_code()
    return count


def _is_zeros(node) -> bool:
    return isinstance(node, torch.fx.Node) and (
        node.target in (aten.zeros_like.default, aten.zeros.default)
        or (node.target in (aten.full_like.default, aten.full.default) and node.args[1] == 0))


def _one_hot_product(node, dim: int):
    """(c, m, the dtype converted to or None) if `node` is `[_to_copy](scatter(zeros, dim, index,
    c) * m)` with `index` one element wide along `dim` and `m` the same along it; else None."""
    convert = None
    if _float_convert_source(node) is not None:
        convert, node = node.kwargs["dtype"], node.args[0]
    if not (isinstance(node, torch.fx.Node) and node.target is aten.mul.Tensor and not node.kwargs):
        return None
    for hot, m in (node.args, node.args[::-1]):
        if not (isinstance(hot, torch.fx.Node) and hot.target is aten.scatter.value and _is_zeros(hot.args[0])
                and isinstance(m, torch.fx.Node) and isinstance(hot.args[3], (int, float))):
            continue
        out, index, m_val = (n.meta.get("val") for n in (hot, hot.args[2], m))
        if not all(isinstance(v, torch.Tensor) for v in (out, index, m_val)) or m_val.dtype != out.dtype:
            continue
        m_shape = [1] * (out.dim() - m_val.dim()) + list(m_val.shape)
        if hot.args[1] % out.dim() == dim and index.shape[dim] == 1 and m_shape[dim] == 1:
            c = torch.tensor(hot.args[3], dtype=out.dtype).item()    # as the scatter stored it
            return c, m, convert
    return None


def sum_of_one_hot(graph: torch.fx.Graph) -> int:
    """Rewrite each row sum of a one-hot product (`_one_hot_product`) as the product itself;
    returns how many."""
    count = 0
    for node in list(graph.find_nodes(op="call_function", target=aten.sum.dim_IntList)):
        val = node.meta.get("val")
        dims = node.args[1] if len(node.args) > 1 else None
        if node.kwargs or not isinstance(val, torch.Tensor) or not dims or len(dims) != 1:
            continue
        rank = node.args[0].meta["val"].dim()
        if rank == 0:   # a 0-d sum (logsumexp of a scalar): no row to sum
            continue
        found = _one_hot_product(node.args[0], dims[0] % rank)
        if found is None:
            continue
        c, m, convert = found
        dim, keepdim = dims[0] % rank, len(node.args) > 2 and node.args[2]
        kept = [1 if k == dim else n for k, n in enumerate(node.args[0].meta["val"].shape)]
        with graph.inserting_before(node):
            call = functools.partial(_call, graph)   # (each with its fake value, for the partitioner)
            total = call(aten.mul.Tensor, m, c)
            if convert is not None:
                total = call(aten._to_copy.default, total, dtype=convert)
            total = call(aten.expand.default, total, kept)
            if not keepdim:
                total = call(aten.squeeze.dim, total, dim)
        node.replace_all_uses_with(total)
        graph.erase_node(node)
        count += 1
    if count:
        graph.eliminate_dead_code()
    return count


def _call(graph: torch.fx.Graph, target, *args, **kwargs) -> torch.fx.Node:
    """A new node `target(*args, **kwargs)` with its fake value in `meta["val"]`, as traced nodes have."""
    node = graph.call_function(target, args, kwargs)
    vals = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    with torch._guards.detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)]) or contextlib.nullcontext():
        node.meta["val"] = target(*vals, **kwargs)
    return node


@contextlib.contextmanager
def partitioner_knows_our_ops():
    """Our custom ops on the partitioner's fusible and recomputable lists, as Inductor's are."""
    default_op_list = getattr(partitioners, "get_default_op_list", None)
    if default_op_list is None:   # another torch: the lists are elsewhere; only recomputation is lost
        yield
        return

    def with_ours():
        ops = default_op_list()
        for name in ("recomputable_ops", "fusible_ops"):
            getattr(ops, name).add(torch.ops.miniinductor.prepare_softmax_online)
        return ops
    partitioners.get_default_op_list = with_ours
    try:
        yield
    finally:
        partitioners.get_default_op_list = default_op_list
