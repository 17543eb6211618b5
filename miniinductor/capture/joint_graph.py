"""Passes over the joint forward+backward graph, run before the partitioner splits it.

Mirrors `torch/_inductor/fx_passes/joint_graph.py`, which runs a pattern matcher over the
joint graph; we keep the one pass that changes what the partitioner saves:

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

`partitioner_knows_our_ops`: the partitioner recomputes only ops on its lists of fusible and
recomputable ops, which name Inductor's `prims.prepare_softmax_online` but not our own custom
op (capture/softmax.py). Without it on the lists, the backward of a bfloat16 cross-entropy
saved the float32 log-softmax (twice the logits' bytes) instead of the logits and two numbers
per row. The lists are built by `torch._functorch.partitioners.get_default_op_list` on each
call; the context manager adds our op to what it returns while our partition runs.
"""
from __future__ import annotations

import contextlib

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
