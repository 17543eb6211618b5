"""Extension `cpp_wrapper`: the wrapper that allocates buffers and calls the kernels in C++."""
import logging

from ...codegen.cpp_wrapper import CppWrapperCodeGen, CppWrapperUnsupported
from ...config import declare_extension
from ...passes import Pass, register

log = logging.getLogger("miniinductor")
declare_extension("cpp_wrapper", "the wrapper in C++, compiled, for less host time per call", ("cpp_wrapper",))


def generate_cpp_wrapper(kernels, ctx):
    """The C++ wrapper where it can do the graph, else (saying why in one line) nothing:
    generate_wrapper then writes the Python one."""
    wrapper = CppWrapperCodeGen(ctx.graph, ctx.scheduler, kernels, ctx.policy.name, ctx.config)
    try:
        plan = wrapper.memory_plan()
        ctx.source = wrapper.generate(plan)
        ctx.wrapper, ctx.plan = wrapper, plan
    except CppWrapperUnsupported as exc:
        log.info("cpp_wrapper: %s gets the Python wrapper (not in the C++ one: %s)", ctx.name, exc)


register(Pass("wrapper", "generate_cpp_wrapper", generate_cpp_wrapper, "cpp_wrapper",
              enabled=lambda ctx: ctx.config.cpp_wrapper, doc="call(args) in C++ (codegen/cpp_wrapper.py)"),
         before="generate_wrapper")
