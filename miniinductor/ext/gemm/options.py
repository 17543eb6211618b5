"""The gemm extension's options: their valid values, the matmul choices they leave, and the
info lines about what they ask for that is not built here.

The options themselves (`max_autotune`, `max_autotune_gemm_backends`, `gemm_fp32_precision`,
...), their presets and what they add to torch.compile's modes; their joint check
(config.OPTION_CHECKS) and notes (config.FEATURE_NOTES). Mirrors the GEMM part of
`torch/_inductor/config.py` (`max_autotune_gemm_backends`) and Inductor's CUTLASS lookup
(`codegen/cuda/cutlass_utils.py`, `try_import_cutlass`). Simplified: CUTLASS is accepted but
never built; its choices are dropped with one info line.
"""
from __future__ import annotations

import importlib.util
import logging
import shutil

from ...config import FEATURE_NOTES, OPTION_CHECKS, Option

log = logging.getLogger("miniinductor")
#: the float32 dots a GEMM template may use with TF32 off (Triton's `input_precision`)
GEMM_FP32_PRECISIONS = ("ieee", "tf32x3")
#: what `max_autotune_gemm_backends` may list (comma-separated)
GEMM_BACKENDS = ("ATEN", "TRITON", "CUTLASS")


def gemm_backends(config) -> tuple[str, ...]:
    """The matmul choices that exist here: CUTLASS is dropped (never built); ATen when
    nothing else is left."""
    backends = tuple(b for b in config.max_autotune_gemm_backends.split(",") if b != "CUTLASS")
    return backends or ("ATEN",)


def check_backends(config):
    """`max_autotune_gemm_backends` lists only GEMM_BACKENDS."""
    bad = [b for b in config.max_autotune_gemm_backends.split(",") if b not in GEMM_BACKENDS]
    if bad:
        raise ValueError(f"option max_autotune_gemm_backends={config.max_autotune_gemm_backends!r} lists "
                         f"{', '.join(map(repr, bad))}: valid backends are {', '.join(GEMM_BACKENDS)}, "
                         f"comma-separated (e.g. 'ATEN,TRITON' or 'TRITON')")


def cutlass_installed() -> bool:
    """The nvidia-cutlass package (its headers, `cutlass_library`) and nvcc, as Inductor looks for them."""
    return importlib.util.find_spec("cutlass_library") is not None and shutil.which("nvcc") is not None


def log_unavailable(config):
    """One info line for each GEMM feature `config` asks for that is accepted but not built."""
    if config.enable_persistent_tma_matmul and not (config.max_autotune and "TRITON" in gemm_backends(config)):
        log.info("enable_persistent_tma_matmul ignored: it adds persistent GEMM templates to max_autotune's "
                 "Triton choices (max_autotune=True, max_autotune_gemm_backends with TRITON)")
    if "CUTLASS" in config.max_autotune_gemm_backends.split(","):
        log.info("max_autotune_gemm_backends: CUTLASS choices skipped (using %s): %s",
                 ",".join(gemm_backends(config)),
                 "miniinductor does not build CUTLASS GEMMs" if cutlass_installed() else
                 "CUTLASS is not installed (pip install nvidia-cutlass, and nvcc from the CUDA toolkit)")


OPTIONS = (
    Option("max_autotune", bool, False, "Time a few block sizes per Triton kernel on first launch and keep the "
           "fastest (GPU); matmuls choose between ATen and Triton GEMM templates."),
    Option("max_autotune_gemm_backends", str, "ATEN,TRITON", "With max_autotune, Triton kernels: matmul choices, "
           "'ATEN,TRITON', 'TRITON' (every matmul from a template) or 'ATEN' (CUTLASS: skipped).",
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
