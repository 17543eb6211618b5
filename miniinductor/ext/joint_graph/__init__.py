"""Extension `joint_graph`: rewrites of the joint forward+backward graph before the
partitioner splits it (rewrites.py): float → float → float conversions made one, and row
sums of one-hot products replaced by the product."""
from ...config import declare_extension
from ...passes import Pass, register
from .rewrites import remove_pointless_converts, sum_of_one_hot

declare_extension("joint_graph", "joint-graph rewrites: pointless dtype converts, sums of one-hot products")


def _recompiled(gm, count: int, ctx) -> None:
    if count:
        gm.recompile()
    ctx.note(count)


register(Pass("joint_graph", "remove_pointless_converts",
              lambda gm, ctx: _recompiled(gm, remove_pointless_converts(gm.graph, ctx.facts["num_fwd_outputs"]), ctx),
              "joint_graph", doc="a float → float → float conversion outside the forward → one conversion"))
register(Pass("joint_graph", "sum_of_one_hot", lambda gm, ctx: _recompiled(gm, sum_of_one_hot(gm.graph), ctx),
              "joint_graph", doc="a row sum of a one-hot product (nll_loss's backward) → the product"))
