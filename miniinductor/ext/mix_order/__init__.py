"""Extension `mix_order`: Triton: a row and a column reduction of one input share one kernel
that reads it once."""
from ...config import declare_extension
from ...passes import POLICY_PATCHES, Pass, register

declare_extension("mix_order", "Triton: a row and a column reduction of one input in one kernel",
                  ("mix_order_reduction", "mix_order_min_numel"))


def _fuse_mix_order(scheduler, ctx):
    scheduler.fuse_mix_order(ctx.policy)


register(Pass("schedule", "fuse_mix_order", _fuse_mix_order, "mix_order",
              enabled=lambda ctx: ctx.config.fusion and ctx.policy.mix_order_reduction,
              doc="Triton: row + column reductions of one input → one kernel"), after="fuse")
POLICY_PATCHES.append(("mix_order", lambda policy, config, device: {
    "mix_order_reduction": policy.name == "triton" and config.mix_order_reduction,
    "mix_order_min_numel": config.mix_order_min_numel if policy.name == "triton" else 0}))
