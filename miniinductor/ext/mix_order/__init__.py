"""Extension `mix_order`: Triton: a row and a column reduction of one input share one kernel
that reads it once.

schedule.py pairs the two groups after the core's fusion (a `MixOrderGroup`), kernel.py
writes their kernel (`MixOrderKernel`, a kernel kind ahead of the core's Triton kernel).
The policy fields it sets (`mix_order_reduction`, `mix_order_min_numel`) are also read by
the core's split reductions (lowering/reductions.py), which leave such column sums whole.
"""
from ...config import Option, declare_extension
from ...passes import POLICY_PATCHES, Pass, kernel_kind, register
from .kernel import MixOrderKernel
from .schedule import MixOrderGroup, fuse_mix_order

declare_extension("mix_order", "Triton: a row and a column reduction of one input in one kernel", (
    Option("mix_order_reduction", bool, True, "Triton: a row and a column reduction of the same input share one "
           "kernel that reads it once."),
    Option("mix_order_min_numel", int, 2**22, "... when that input has at least this many elements (below, the "
           "extra launches cost more).", minimum=0)))


def _kernel(group, ctx):
    if not isinstance(group, MixOrderGroup):
        return None
    return MixOrderKernel(group.kernel_name, group.R, group.Q, group.transposed, ctx.config)


register(Pass("schedule", "fuse_mix_order", fuse_mix_order, "mix_order",
              enabled=lambda ctx: ctx.config.fusion and ctx.policy.mix_order_reduction,
              doc="Triton: row + column reductions of one input → one kernel"), after="fuse")
kernel_kind("triton", "mix_order", _kernel, "mix_order", first=True)
POLICY_PATCHES.append(("mix_order", lambda policy, config, device: {
    "mix_order_reduction": policy.name == "triton" and config.mix_order_reduction,
    "mix_order_min_numel": config.mix_order_min_numel if policy.name == "triton" else 0}))
