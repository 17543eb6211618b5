"""Extension `cpp_wrapper`: the wrapper that allocates buffers and calls the kernels in C++
(codegen.py writes it, with the headers prelude.h and, on the GPU, cuda.h; runtime.py builds
and loads it)."""
import logging

from ...config import Option, declare_extension
from ...passes import Pass, register
from .codegen import CppWrapperCodeGen, CppWrapperUnsupported

log = logging.getLogger("miniinductor")
declare_extension("cpp_wrapper", "the wrapper in C++, compiled, for less host time per call", (
    Option("cpp_wrapper", bool, False, "the wrapper that allocates buffers and calls the kernels is C++, compiled "
           "(CPU: with the C++ kernels; GPU: it launches the Triton kernels through the CUDA driver), for less "
           "host time per call."),), presets={"cpp_wrapper": {"cpp_wrapper": True}})


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
              enabled=lambda ctx: ctx.config.cpp_wrapper, doc="call(args) in C++ (ext/cpp_wrapper/codegen.py)"),
         before="generate_wrapper")
