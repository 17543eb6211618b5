"""Extension `combo`: after fusion, independent pointwise kernels (an optimizer step's, one
per parameter) share a few combo kernels."""
from ...codegen.combo import COMBO_KERNELS
from ...config import declare_extension
from ...passes import Pass, kernel_kind, register
from ...scheduler.combo import ComboGroup, combine_kernels

declare_extension("combo", "independent pointwise kernels share combo kernels", ("combo_kernels",))



def _combine(scheduler, ctx):
    combine_kernels(scheduler, ctx.policy)


register(Pass("schedule", "combine_kernels", _combine,
              "combo", enabled=lambda ctx: ctx.config.fusion and ctx.config.combo_kernels,
              doc="independent pointwise kernels → combo kernels"), before="order")
for _backend, _kernel in COMBO_KERNELS.items():
    kernel_kind(_backend, "combo", lambda group, ctx, make=_kernel: make(group, ctx.config, ctx)
                if isinstance(group, ComboGroup) else None, "combo", first=True)
