"""Finding CUTLASS and nvcc, compiling a kernel's .cu into a cached shared library, calling it.

Mirrors Inductor's `codegen/cuda/cutlass_utils.py` (`try_import_cutlass`: the headers of the
`nvidia-cutlass` package) and `codegen/cuda/cuda_env.py` / `async_compile.py`'s CUDA part
(nvcc, one library per kernel, compiled in a pool). Simplified: sm90 only (the builders'
TMA warp-specialised kernels); no split-K or stream-K; ctypes instead of a C++ wrapper.

`missing()` says what is not there (the package, nvcc, a GPU of compute capability 9.0);
`CutlassLibrary(source)` starts nvcc in the compile pool at once (libraries land in
`$MINIINDUCTOR_CACHE_DIR/cutlass/`, named by the hash of the source, the flags and nvcc's
version; written atomically) and waits for it on the first call.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from ....runtime.cpp_builder import cache_dir

#: what nvcc compiles each kernel with: Hopper's own instructions (wgmma, TMA) need sm_90a
NVCC_FLAGS = ["-std=c++17", "-O3", "--expt-relaxed-constexpr", "-DNDEBUG", "-Xcompiler=-fPIC", "-shared",
              "-gencode=arch=compute_90a,code=sm_90a", "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1"]
HOW_TO_GET = ("`pip install nvidia-cutlass` gives CUTLASS's headers; nvcc comes with NVIDIA's CUDA toolkit "
              "(on PATH, or in $CUDA_HOME/bin)")


class CutlassError(RuntimeError):
    """nvcc failed on a kernel, or a kernel refused its arguments."""


def include_dir() -> Path | None:
    """CUTLASS's headers, as the nvidia-cutlass wheel ships them (`cutlass_library/source/include`)."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(list(spec.submodule_search_locations)[0]) / "source" / "include"
    return found if (found / "cutlass" / "cutlass.h").exists() else None


def nvcc() -> str | None:
    """nvcc on PATH, else under $CUDA_HOME (or /usr/local/cuda)."""
    found = shutil.which("nvcc")
    if found:
        return found
    candidate = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    return str(candidate) if candidate.exists() else None


def missing(device: torch.device | None = None) -> str | None:
    """What CUTLASS kernels need and this machine lacks, or None."""
    lacking = [what for what, ok in (("the nvidia-cutlass package", include_dir() is not None),
                                     ("nvcc", nvcc() is not None)) if not ok]
    if lacking:
        return f"{' and '.join(lacking)} not found: {HOW_TO_GET}"
    if device is not None and (device.type != "cuda" or torch.cuda.get_device_capability(device) != (9, 0)):
        where = device.type if device.type != "cuda" else f"compute capability {torch.cuda.get_device_capability(device)}"
        return f"CUTLASS kernels are built here for compute capability 9.0 only (Hopper), not {where}"
    return None


@functools.lru_cache(maxsize=None)
def nvcc_version() -> str:
    return subprocess.run([nvcc(), "--version"], capture_output=True, text=True).stdout


@functools.lru_cache(maxsize=1)
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1))


def library_path(source: str) -> Path:
    """Where the library of `source` is cached."""
    key = hashlib.sha256("\n".join([source, *NVCC_FLAGS, nvcc_version()]).encode()).hexdigest()[:32]
    return cache_dir() / "cutlass" / f"{key}.so"


def compile_source(source: str) -> Path:
    """nvcc `source` into its cached library (nothing to do when it is there)."""
    lib = library_path(source)
    if lib.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.so"
        src.write_text(source)
        done = subprocess.run([nvcc(), *NVCC_FLAGS, f"-I{include_dir()}", str(src), "-o", str(out)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CutlassError(f"nvcc failed on a CUTLASS kernel ({src.name}):\n{done.stderr[-4000:]}")
        os.replace(src, lib.with_suffix(".cu"))
        os.replace(out, lib)
    return lib


class CutlassLibrary:
    """One kernel's library: compiling from the moment it is made, loaded on first use.
    `run(pointers, ints)` launches it on the current CUDA stream."""

    def __init__(self, source: str):
        self.future = _pool().submit(compile_source, source)
        self._fn = None

    def wait(self):
        if self._fn is None:
            lib = ctypes.CDLL(str(self.future.result()))
            self._fn, self._error = lib.mi_cutlass_run, lib.mi_cutlass_error
            self._fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
            self._error.restype = ctypes.c_char_p
        return self._fn

    @staticmethod
    def ints(values: list[int]):
        """`values` as the C array `run` takes (made once per kernel)."""
        return (ctypes.c_int64 * len(values))(*values)

    def run(self, pointers: list[int], ints, stream: int):
        """Launch on `stream` (a raw cudaStream_t); `ints` an `ints(...)` array."""
        if any(p % 16 for p in pointers):   # TMA and the epilogue's vector loads need 16-byte alignment
            raise CutlassError(f"a tensor given to a CUTLASS kernel is not 16-byte aligned (data pointers "
                               f"{[hex(p) for p in pointers]}): an input viewed at an offset? Compile with "
                               "max_autotune_gemm_backends listing ATEN or TRITON too, or pass a contiguous copy")
        fn = self.wait()
        code = fn((ctypes.c_void_p * len(pointers))(*pointers), ints, stream)
        if code:
            raise CutlassError(f"CUTLASS kernel: {self._error().decode()}")


def aligned(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, or a copy of it where its data does not start 16-byte aligned (a graph input
    viewed at an odd offset: TMA cannot read it), as Inductor's `copy_misaligned_inputs` does."""
    return tensor if tensor.data_ptr() % 16 == 0 else tensor.clone()
