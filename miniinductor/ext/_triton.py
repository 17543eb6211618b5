"""The Triton backend's passes (it is a backend, not an extension: always on where its
kernels are written). They move with the backend into miniinductor/triton/."""
import logging

from ..lowering.reductions import split_reductions
from ..passes import Pass, register
from ..runtime.triton_runtime import kernel_launchers, precompile_all
from ..virtualized import V

log = logging.getLogger("miniinductor")


def _split_reductions(graph, ctx):
    with V.set_graph_handler(graph):
        split_reductions(graph)


def precompile_kernels(module, ctx):
    """Compile a GPU graph's Triton kernels together, in threads, instead of one by one as
    the first call reaches each (runtime/triton_runtime.py, `precompile_all`)."""
    kernels = ctx.kernels
    launchers = [launcher for name in kernels for launcher in kernel_launchers(getattr(module, name).__globals__, name)]
    seconds = precompile_all(launchers, ctx.device)
    log.info("compiled %d Triton kernels (%d variants) in %.2f s", len(kernels), len(launchers), seconds)


register(Pass("loop_ir", "split_reductions", _split_reductions, "triton",
              enabled=lambda ctx: ctx.policy.split_reductions,
              doc="long rows or columns reduced in two kernels (lowering/reductions.py)"))
register(Pass("load", "precompile_kernels", precompile_kernels, "triton",
              enabled=lambda ctx: ctx.device.type == "cuda",
              doc="a GPU graph's Triton kernels compiled together, in threads"))
