"""CUTLASS GEMMs as max_autotune choices (`max_autotune_gemm_backends` with CUTLASS), their
pointwise epilogues fused as epilogue visitor trees. Part of the gemm extension; imported by
it, never by the core. Needs the `nvidia-cutlass` package (CUTLASS's headers), `nvcc` and a
GPU of compute capability 9.0 (build.py, `missing`); where one is lacking, one info line
says what and how to get it, and the other backends are used.

  emit.py      a kernel's CUDA C++ source: tile, cluster, schedule (`CutlassConfig`)
  epilogue.py  the fused pointwise nodes as an EVT (`Epilogue`, an ops handler)
  build.py     finding CUTLASS and nvcc; compiling into cached libraries; the C call
  kernel.py    `CutlassTemplateKernel`: the kernel of a fused group, its launcher module
  choices.py   which matmuls get CUTLASS choices, and timing them (autotune.py asks)

Mirrors `torch/_inductor/codegen/cuda/` (`gemm_template.py`, `cutlass_utils.py`,
`cutlass_python_evt.py`, `cuda_kernel.py`) in small. Leaves out: sm80 kernels (the
CUTLASS 2.x API; an sm80 GPU gets no CUTLASS choice), split-K and stream-K, prologue
fusion, and FP8.
"""
from ..scheduling import EPILOGUE_CHECKS
from .build import CutlassError, missing
from .choices import bare_library, configs_for, time_cutlass
from .epilogue import EpilogueProblem, epilogue_problem
from .kernel import CutlassTemplateKernel, kernel_for_cutlass_group

EPILOGUE_CHECKS.append(epilogue_problem)

__all__ = ["CutlassError", "bare_library", "CutlassTemplateKernel", "EpilogueProblem", "configs_for", "kernel_for_cutlass_group",
           "missing", "time_cutlass"]
