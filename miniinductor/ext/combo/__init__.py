"""Extension `combo`: after fusion, independent pointwise kernels (an optimizer step's, one
per parameter) share a few combo kernels.

decompositions.py turns foreach ops into one op per list element (an entry of the core's
EXTRA_DECOMPOSITIONS), schedule.py combines the resulting kernels (`ComboGroup`), kernel.py
writes a combo's kernel for either backend (a kernel kind ahead of the core's)."""
from ...capture.decompositions import EXTRA_DECOMPOSITIONS
from ...config import Option, declare_extension
from ...passes import Pass, kernel_kind, register
from .decompositions import foreach_decompositions
from .kernel import COMBO_KERNELS
from .schedule import ComboGroup, combine_kernels

declare_extension("combo", "independent pointwise kernels share combo kernels", (
    Option("combo_kernels", bool, True, "After fusion, independent pointwise kernels (an optimizer step's, one per "
           "parameter) share a few combo kernels."),))


def _combine(scheduler, ctx):
    combine_kernels(scheduler, ctx.policy)


EXTRA_DECOMPOSITIONS.append(("combo", foreach_decompositions))
register(Pass("schedule", "combine_kernels", _combine,
              "combo", enabled=lambda ctx: ctx.config.fusion and ctx.config.combo_kernels,
              doc="independent pointwise kernels → combo kernels"), before="order")
for _backend, _kernel in COMBO_KERNELS.items():
    kernel_kind(_backend, "combo", lambda group, ctx, make=_kernel: make(group, ctx.config, ctx)
                if isinstance(group, ComboGroup) else None, "combo", first=True)
