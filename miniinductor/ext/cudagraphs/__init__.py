"""Extension `cudagraphs`: a GPU graph's launches recorded once in a CUDA graph, then replayed
(mode="reduce-overhead"; record.py)."""
import logging

from ...config import Option, declare_extension
from ...passes import Pass, register
from .record import cudagraphify

log = logging.getLogger("miniinductor")
declare_extension("cudagraphs", "GPU graphs recorded once as CUDA graphs and replayed", (
    Option("cudagraphs", bool, False, "Record each GPU graph's kernel launches in a CUDA graph once and replay it "
           "(mode reduce-overhead)."),), presets={"cudagraphs": {"cudagraphs": True}},
    modes={"reduce-overhead": {"cudagraphs": True}, "max-autotune": {"cudagraphs": True}},
    aliases={"triton.cudagraphs": "cudagraphs"})


def cudagraphs(call, ctx):
    graph = ctx.graph
    cpu_inputs = [n for n, b in graph.graph_inputs.items() if b.get_device().type == "cpu"
                  and n in graph.graph_input_names]
    if graph.current_device().type != "cuda":
        log.info("cudagraphs: %s runs on the CPU, so there is nothing to record", ctx.name)
    elif cpu_inputs:
        # a replay reads nothing from (and writes nothing into) CPU memory: Adam's step counts
        # would stop advancing (Inductor skips such graphs too)
        log.info("cudagraphs: %s is not recorded: it takes CPU tensors (%s)", ctx.name, ", ".join(cpu_inputs))
    else:
        targets = set(graph.mutations.values())
        return cudagraphify(call, [k for k, n in enumerate(graph.graph_input_names) if n in targets])
    return None


register(Pass("runtime", "cudagraphs", cudagraphs, "cudagraphs", enabled=lambda ctx: ctx.config.cudagraphs,
              doc="record the GPU graph's launches once, replay them"), before="runtime_call")
