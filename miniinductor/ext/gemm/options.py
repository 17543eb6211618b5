"""The gemm extension's options: their valid values, the matmul choices they leave, and the
info lines about what they ask for that is not built here.

The options themselves (`max_autotune`, `max_autotune_gemm_backends`, `gemm_fp32_precision`,
...), their presets and what they add to torch.compile's modes; their joint check
(config.OPTION_CHECKS) and notes (config.FEATURE_NOTES). Mirrors the GEMM part of
`torch/_inductor/config.py` (`max_autotune_gemm_backends`) and Inductor's CUTLASS lookup
(`codegen/cuda/cutlass_utils.py`, `try_import_cutlass`). CUTLASS's choices need its package
and nvcc (cutlass/build.py, `missing`): where they are lacking, one info line says what and
how to get it and the other backends are used; CUTLASS alone is then an error saying so.
"""
from __future__ import annotations

import logging

from ...config import FEATURE_NOTES, OPTION_CHECKS, Option

log = logging.getLogger("miniinductor")
#: the float32 dots a GEMM template may use with TF32 off (Triton's `input_precision`)
GEMM_FP32_PRECISIONS = ("ieee", "tf32x3")
#: what `max_autotune_gemm_backends` may list (comma-separated)
GEMM_BACKENDS = ("ATEN", "TRITON", "CUTLASS")


def gemm_backends(config) -> tuple[str, ...]:
    """The matmul backends asked for, CUTLASS dropped where its package or nvcc is missing
    (`log_unavailable` said so). Raises where CUTLASS alone was asked for and cannot be built."""
    from .cutlass.build import missing
    backends = tuple(config.max_autotune_gemm_backends.split(","))
    if "CUTLASS" in backends and (lacking := missing()):
        backends = tuple(b for b in backends if b != "CUTLASS")
        if not backends:
            raise RuntimeError(f"max_autotune_gemm_backends='CUTLASS': no CUTLASS kernel can be built here: {lacking}. "
                               "Install what is missing, or list other backends too (e.g. 'ATEN,TRITON,CUTLASS').")
    return backends


def check_backends(config):
    """`max_autotune_gemm_backends` lists only GEMM_BACKENDS."""
    bad = [b for b in config.max_autotune_gemm_backends.split(",") if b not in GEMM_BACKENDS]
    if bad:
        raise ValueError(f"option max_autotune_gemm_backends={config.max_autotune_gemm_backends!r} lists "
                         f"{', '.join(map(repr, bad))}: valid backends are {', '.join(GEMM_BACKENDS)}, "
                         f"comma-separated (e.g. 'ATEN,TRITON' or 'TRITON')")


def log_unavailable(config):
    """One info line for each GEMM feature `config` asks for that is accepted but not built."""
    if config.enable_persistent_tma_matmul and not (config.max_autotune and "TRITON" in gemm_backends(config)):
        log.info("enable_persistent_tma_matmul ignored: it adds persistent GEMM templates to max_autotune's "
                 "Triton choices (max_autotune=True, max_autotune_gemm_backends with TRITON)")
    from .cutlass.build import missing
    asked = config.max_autotune_gemm_backends.split(",")
    if "CUTLASS" in asked and (lacking := missing()):
        if asked != ["CUTLASS"]:
            log.info("max_autotune_gemm_backends: no CUTLASS choices (using %s): %s",
                     ",".join(b for b in asked if b != "CUTLASS"), lacking)
        elif config.max_autotune:
            gemm_backends(config)   # CUTLASS alone: its error, as every matmul's lowering would raise it


OPTIONS = (
    Option("max_autotune", bool, False, "Time a few block sizes per Triton kernel on first launch and keep the "
           "fastest (GPU); matmuls choose between ATen and Triton GEMM templates."),
    Option("max_autotune_gemm_backends", str, "ATEN,TRITON", "With max_autotune, Triton kernels: matmul choices, "
           "'ATEN,TRITON', 'TRITON' (every matmul from a template), 'ATEN', with 'CUTLASS' (nvcc and nvidia-cutlass: "
           "CUTLASS kernels on an sm90 GPU).",
           convert=lambda v: ",".join(b.strip().upper() for b in v.split(",")) if isinstance(v, str) else v),
    Option("enable_persistent_tma_matmul", bool, False, "With max_autotune and Triton GEMM templates: persistent "
           "templates among the choices, TMA loads on compute capability 9.0+ (and the interpreter)."),
    Option("gemm_fp32_precision", str, "ieee", "With max_autotune, a float32 GEMM template's dot where TF32 is off: "
           "'ieee' (as cuBLAS) or 'tf32x3' (3 TF32 products: faster, not eager's bits).",
           choices=GEMM_FP32_PRECISIONS),
    Option("coordinate_descent_tuning", bool, False, "With max_autotune: from the fastest GEMM template config, "
           "double or halve each block size, warps and stages while that is faster (GPU)."),
)
PRESETS = {"max_autotune": {"max_autotune": True},
           "cutlass": {"max_autotune": True, "max_autotune_gemm_backends": "ATEN,TRITON,CUTLASS"},
           "tma": {"max_autotune": True, "enable_persistent_tma_matmul": True},
           "triton": {"max_autotune_gemm_backends": "TRITON"}}   # the triton preset: templates only
MODES = {"max-autotune": {"max_autotune": True}, "max-autotune-no-cudagraphs": {"max_autotune": True}}
ALIASES = {"triton.enable_persistent_tma_matmul": "enable_persistent_tma_matmul"}
OPTION_CHECKS.append(check_backends)
FEATURE_NOTES.append(("gemm", log_unavailable))
