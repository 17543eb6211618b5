"""CUTLASS kernels as autotuning choices: which matmuls can have them, and their timing.

Mirrors Inductor's `codegen/cuda/gemm_template.py` (`add_cutlass_gemm_choices`, its
`filter_op`) in small. The autotuner (autotune.py, `select_gemm`) asks `cutlass_configs`
for the configurations to time beside ATen and the Triton template, and `time_cutlass`
times each bare kernel (D = A @ B) on the same operands. The bare libraries start compiling
together (nvcc in the compile pool) before the first is timed.
"""
from __future__ import annotations

import functools
import logging
import math

import torch

from .build import CutlassLibrary, missing
from .emit import CutlassConfig, cutlass_configs, gemm_source
from .epilogue import bare_epilogue
from .kernel import layouts_of, static_ints

log = logging.getLogger("miniinductor")


@functools.lru_cache(maxsize=None)
def say_once(text: str):
    log.info(text)


def cutlass_problem(g, precision: str) -> str | None:
    """Why no CUTLASS kernel here computes `g` (a template.Gemm), or None."""
    if g.dtype == torch.float32 and precision != "tf32":
        return ("a float32 matmul with TF32 off (CUTLASS's sm90 float32 kernels multiply in TF32: "
                "torch.backends.cuda.matmul.allow_tf32 = True allows them)")
    a_tag, b_tag = layouts_of(g)
    if a_tag is None or b_tag is None:
        return "an operand with no unit stride"
    if g.dtype == torch.float32 and (a_tag, b_tag) != ("RowMajor", "ColumnMajor"):
        return "a TF32 matmul whose operands are not both K-major (A row-major, B column-major)"
    size = torch.empty((), dtype=g.dtype).element_size()
    values = [*g.a_stride, *g.b_stride, g.a_offset, g.b_offset, g.N]
    if any(v * size % 16 for v in values if v not in (0, 1)) or g.N * size % 16 or g.K * size % 16:
        return "a stride, offset, N or K that is not a multiple of 16 bytes (TMA's alignment)"
    if max(g.B * g.M * g.N, g.M * g.K * g.B, g.K * g.N * g.B) >= 2**31:
        return "a tensor of 2**31 elements or more"
    return None


def why_not(g, precision: str, device: torch.device) -> str | None:
    """Why no CUTLASS kernel computes `g` on `device`, or None."""
    return missing(device) or cutlass_problem(g, precision)


def configs_for(g, backends: tuple, precision: str, device: torch.device) -> list[dict]:
    """The CUTLASS configs the autotuner times for `g` ([] unless CUTLASS is a backend
    and can compute it; why not is said once, at info level)."""
    if "CUTLASS" not in backends:
        return []
    problem = why_not(g, precision, device)
    if problem:
        say_once(f"max_autotune_gemm_backends: no CUTLASS choice for {g}: {problem}")
        return []
    return [c.as_dict() for c in cutlass_configs(g.dtype)]


def bare_library(g, config: dict) -> CutlassLibrary:
    """The library of the kernel alone (D = A @ B) for `config`: it starts compiling now."""
    a_tag, b_tag = layouts_of(g)
    return CutlassLibrary(gemm_source(g.dtype, a_tag, b_tag, CutlassConfig.of(config),
                                      bare_epilogue("product", g.dtype, g.M, g.N)))


def time_cutlass(g, configs: list[dict], libraries, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
                 benchmark) -> dict:
    """{name: (ms, config)} of each CUTLASS config on these operands, `libraries` their
    `bare_library`s (ms inf where its build or launch failed; why, at debug level)."""
    ints = CutlassLibrary.ints(static_ints(g))
    pointers, stream = [a.data_ptr(), b.data_ptr(), out.data_ptr()], torch.cuda.current_stream(out.device).cuda_stream
    timings = {}
    for config, library in zip(configs, libraries):
        name = f"cutlass_{g.op} {CutlassConfig.of(config).name()}"
        try:
            library.run(pointers, ints, stream)
            timings[name] = (benchmark(lambda library=library: library.run(pointers, ints, stream)), config)
        except Exception as exc:  # noqa: BLE001 -- a config CUTLASS cannot build or run: not a choice
            log.warning("CUTLASS config %s is not a choice: %s", name, str(exc)[:600])
            timings[name] = (math.inf, config)
    return timings
