"""Extension `layout`: channels-last convolutions in inference graphs (C++ and GPU), as
Inductor's layout optimisation."""
from ...config import declare_extension
from ...lowering.layout import decide_layout_opt
from ...passes import POLICY_PATCHES, Pass, register

declare_extension("layout", "inference graphs' 2-D convolutions channels-last", ("layout_optimization",))


def _decide(gm, ctx):
    ctx.facts["layout_opt"] = decide_layout_opt(gm, ctx.policy, ctx.config, ctx.name)
    ctx.note("channels-last" if ctx.facts["layout_opt"] else "")


register(Pass("aten_graph", "decide_layout_opt", _decide, "layout",
              enabled=lambda ctx: ctx.config.layout_optimization,
              doc="inference: 2-D convolutions take their input channels-last"))
POLICY_PATCHES.append(("layout", lambda policy, config, device: {
    "channels_last_conv": policy.name == "cpp" or device.type == "cuda"}))
