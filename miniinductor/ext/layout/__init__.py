"""Extension `layout`: channels-last convolutions in inference graphs (C++ and GPU), as
Inductor's layout optimisation (channels_last.py): the pass decides, the lowering of each
convolution then takes its `EXTERN_LAYOUTS` entry. On the GPU the decision is timed
(timing.py), and a convolution's bias is peeled off into an add that fuses (bias.py)."""
from ...config import Option, declare_extension
from ...passes import EXTERN_LAYOUTS, POLICY_PATCHES, Pass, register
from .bias import peel_conv_bias
from .channels_last import channels_last_conv, decide_layout_opt

declare_extension("layout", "convolutions: channels-last in inference graphs; on the GPU, the bias as an add that fuses", (
    Option("layout_optimization", bool, True, "Inference graphs, C++ kernels or the GPU: 2-D convolutions take "
           "their input channels-last, which oneDNN and cuDNN run faster."),))


def _decide(gm, ctx):
    ctx.facts["layout_opt"] = decide_layout_opt(gm, ctx.policy, ctx.config, ctx.name)
    ctx.note("channels-last" if ctx.facts["layout_opt"] else "")


register(Pass("aten_graph", "peel_conv_bias", lambda gm, ctx: ctx.note(peel_conv_bias(gm)), "layout",
              enabled=lambda ctx: ctx.device.type == "cuda",
              doc="GPU: a convolution's bias becomes an add that fuses with its consumers"))
register(Pass("aten_graph", "decide_layout_opt", _decide, "layout",
              enabled=lambda ctx: ctx.config.layout_optimization,
              doc="inference: 2-D convolutions take their input channels-last"))
POLICY_PATCHES.append(("layout", lambda policy, config, device: {
    "channels_last_conv": policy.name == "cpp" or device.type == "cuda"}))
EXTERN_LAYOUTS.append(("layout", channels_last_conv))
