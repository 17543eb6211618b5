"""The Triton backend's entries in the core's tables (passes.py), made when
`miniinductor/__init__.py` imports this module: after the core's passes (compile_fx.py), so
that its own go after them in their stage (precompile_kernels after load_wrapper), and
before the extensions', whose kernel kinds go ahead of its own.
"""
from ..passes import POLICY_PATCHES, WRAPPER_IMPORTS, kernel_kind
from . import passes, softmax  # noqa: F401  (register the passes, decompositions and lowering)
from .policy import triton_policy
from .tiling import kernel_for_group

kernel_kind("triton", "triton", lambda group, ctx: kernel_for_group(group, ctx.config))
POLICY_PATCHES.append(("triton", triton_policy))
WRAPPER_IMPORTS.append("from miniinductor.triton.runtime import load_module")
