"""The C++ wrapper at run time: build and load its library, fill a GPU graph's launch table.

Mirrors the C++ wrapper half of `torch/_inductor/codecache.py` (`CppWrapperCodeCache`: the
wrapper built against libtorch and loaded) and, for a GPU graph, what Inductor's
`cpp_wrapper_gpu.py` loads before the first launch. A generated C++ wrapper module imports
`load_cpp_wrapper` (and, on the GPU, `bind_launch_table`) from here. The library is built by
runtime/cpp_builder.py like the kernels' own, with libtorch's C shim headers and libraries
added (`libtorch_flags`), so without the precompiled prelude. Simplified: no AOT packaging.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import sysconfig
from pathlib import Path

import torch

from ...runtime.cpp_builder import build

log = logging.getLogger("miniinductor")


@functools.lru_cache(maxsize=None)
def libtorch_flags(cuda: bool = False) -> tuple[list[str], list[str]]:
    """(flags, libraries) for a C++ wrapper: the headers of libtorch's C shim and Python's,
    and the libraries that define the shim (the ones this process already loaded; a GPU
    graph's wrapper also libtorch_cuda, where the shim's CUDA functions are)."""
    from torch.utils.cpp_extension import include_paths, library_paths
    libdir = library_paths()[0]
    cuda_libs = ["-ltorch_cuda"] if cuda and (Path(libdir) / "libtorch_cuda.so").exists() else []
    return ([f"-I{p}" for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"],
            [f"-L{libdir}", f"-Wl,-rpath,{libdir}", "-ltorch_cpu", "-lc10", *cuda_libs])


def build_cpp_wrapper(source: str, cxx: str | None = None, cuda: bool = False) -> Path:
    """Build (or fetch) a C++ wrapper's library against libtorch's C shim; return its path."""
    return build(source, cxx, libtorch_flags(cuda))


def load_cpp_wrapper(source: str, cxx: str | None = None, cuda: bool = False):
    """Build (or fetch) a C++ wrapper's library and return it. Its `call` takes a Python list
    (the input handles' capsules; a GPU graph's also the list of input tensors, which it
    empties) and returns a list (the outputs'), run holding the GIL (PyDLL), so that it may
    build Python objects and raise Python errors. A GPU graph's library also has `mi_bind`,
    which writes a compiled Triton kernel into its launch table (`bind_launch_table`)."""
    lib = ctypes.PyDLL(str(build_cpp_wrapper(source, cxx, cuda)))
    lib.call.argtypes, lib.call.restype = [ctypes.py_object] * (2 if cuda else 1), ctypes.py_object
    if cuda:
        lib.mi_bind.argtypes = [ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 5, ctypes.c_int64]
        lib.mi_bind.restype = lib.mi_init.restype = ctypes.c_int
    return lib


def bind_launch_table(lib, launches, device_index: int) -> str | None:
    """Write each Triton kernel of a GPU graph into its C++ wrapper's launch table
    (cuda.h, `mi_bind`): the CUfunction Triton loaded on the graph's GPU,
    the grid, warps and shared memory. `launches` are the kernels' `launch_<name>` functions,
    in the table's order. Returns None, or why the C++ wrapper cannot launch them (then `call`
    runs the Python wrapper; said once, here)."""
    with torch.cuda.device(device_index):
        why = None if lib.mi_init() else "the CUDA driver (libcuda.so.1) or the GPU's primary context was not found"
        for row, launch in enumerate(launches if why is None else []):
            entry = _launch_entry(launch)
            if isinstance(entry, str):
                why = entry
                break
            lib.mi_bind(row, *entry)
    if why is not None:
        log.info("cpp_wrapper: the Python wrapper launches this graph's kernels (%s)", why)
    return why


def _launch_entry(launch) -> tuple | str:
    """`mi_bind`'s arguments after the row for one kernel's launcher, or why there are none."""
    name = launch.__name__
    launcher = launch.__globals__.get(f"_launcher_{name.removeprefix('launch_')}")
    if launcher is None:   # an empty grid: nothing to launch
        return (None, 0, 0, 0, 0, 0, 0)
    if launcher.ints or launcher.grid3 is None:
        return f"{name} takes sizes at run time"
    try:
        if launcher.compiled is None:
            launcher.precompile()
    except Exception as exc:  # noqa: BLE001 -- the Python wrapper's launch raises it again
        return f"{name} did not compile ahead of its launch: {exc}"
    if launcher.compiled is None:
        return f"{name} was not compiled ahead of its launch"
    md = launcher.compiled.metadata
    needs = {"clusters": getattr(md, "num_ctas", 1) != 1, "PDL": getattr(md, "launch_pdl", False),
             "a cooperative grid": getattr(md, "launch_cooperative_grid", False),
             "profiler scratch memory": getattr(md, "profile_scratch_size", 0) > 0}
    if any(needs.values()):
        return f"{name} needs {next(k for k, v in needs.items() if v)}"
    # (the CUfunction was loaded by precompile: `compiled.run`)
    return (launcher.compiled.function, *launcher.grid3, md.num_warps, md.shared, getattr(md, "global_scratch_size", 0))
