"""Build C++ kernels into a shared library, cache it on disk, load it with ctypes.

Mirrors `torch/_inductor/codecache.py` (CppCodeCache). The cache key hashes the source,
the flags and the compiler's version, so a changed compiler never reuses a stale build.
Builds land in `$MINIINDUCTOR_CACHE_DIR` (default `~/.cache/miniinductor`), each written
to a temporary name and moved into place with `os.replace`, which is atomic: two processes
building the same kernel both succeed and neither can see a half-written file.

The prelude (cpp_prelude.h: <cmath>, <algorithm>, <immintrin.h>...) is precompiled once
per flags and compiler (`prelude_header`, a GCC `.gch` beside the header, as Inductor's
precompiled `cpp_prefix.h`): parsing it took 0.75 of the 0.85 s a small graph's build took,
and a cold test run builds hundreds. A compiler that cannot use the `.gch` reads the header's
text instead: the same code, only slower. Simplified: no parallel build pool; one library per
graph, so a graph costs one compiler run however many kernels it has. A C++ wrapper (cpp_wrapper) is
built the same way, with libtorch's C shim headers and libraries added (`load_cpp_wrapper`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

PRELUDE = (Path(__file__).parent.parent / "codegen" / "cpp_prelude.h").read_text()
FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
         "-shared", "-fPIC", "-std=c++17", "-w"]


@functools.lru_cache(maxsize=None)
def vector_width_flags() -> list[str]:
    """The vector width g++ may use: 512 bits where ATen's own CPU kernels run their AVX-512
    versions (`torch.backends.cpu.get_cpu_capability()`, as Inductor's `pick_vec_isa`), else
    256. g++ itself prefers 256-bit vectors even where -march=native has AVX-512; on a Xeon
    with two 512-bit FMA units that left our softmax at 0.7x eager's AVX-512 kernel. The
    prelude's explicit vectors (`mi_vec`) take the same width: MI_VEC_LANES floats."""
    return [f"-mprefer-vector-width={vector_lanes() * 32}", f"-DMI_VEC_LANES={vector_lanes()}"]


@functools.lru_cache(maxsize=None)
def vector_lanes() -> int:
    """floats in a vector of the width above: 16 (AVX-512) or 8"""
    import torch
    return 16 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 8


@functools.lru_cache(maxsize=None)
def vector_math_flags() -> tuple[list[str], list[str]]:
    """(defines, libraries): glibc's vector math library (libmvec), when present, lets
    loops that call exp/tanh/erf vectorize."""
    return (["-DMI_USE_MVEC"], ["-lmvec"]) if ctypes.util.find_library("mvec") else ([], [])


class CppCompileError(RuntimeError):
    pass


def cache_dir() -> Path:
    root = os.environ.get("MINIINDUCTOR_CACHE_DIR") or Path.home() / ".cache" / "miniinductor"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_source(source: str, suffix: str) -> Path:
    """Write `source` into the cache folder, named by its hash, atomically (a temporary
    name, then os.replace); return the path. Used for generated Python modules."""
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    folder = cache_dir() / key[:2]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}_{suffix}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    return path


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    if shutil.which(cxx) is None:
        raise CppCompileError(
            f"no C++ compiler {cxx!r} found. Install one (Debian/Ubuntu: `apt-get install g++`; "
            "Fedora: `dnf install gcc-c++`; macOS: `xcode-select --install`) or point $CXX at it.")
    return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout


def _explain_failure(stderr: str) -> str:
    if "omp.h" in stderr or "fopenmp" in stderr or "-lgomp" in stderr or "gomp" in stderr:
        return ("OpenMP is missing: install it (Debian/Ubuntu: `apt-get install libgomp1` with g++; "
                "macOS: `brew install libomp`) or use a compiler with OpenMP support.\n")
    return ""


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


def prelude_header(cxx: str, flags: list[str]) -> Path:
    """cpp_prelude.h in the cache, precompiled beside it for `flags` (built once, atomically:
    the header first, then its `.gch`); the caller compiles with `-include` this path."""
    return _prelude_header(cxx, tuple(flags), cache_dir())


@functools.lru_cache(maxsize=None)
def _prelude_header(cxx: str, flags: tuple[str, ...], cache: Path) -> Path:
    """prelude_header, tried once per process: a compiler that fails to precompile (no
    OpenMP, say) is not asked again for every graph."""
    key = hashlib.sha256("\0".join([PRELUDE, " ".join(flags), compiler_version(cxx)]).encode()).hexdigest()[:32]
    folder = cache / f"prelude-{key}"
    header, pch = folder / "mi_prelude.h", folder / "mi_prelude.h.gch"
    if pch.exists():
        return header
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        text, out = Path(tmp) / "mi_prelude.h", Path(tmp) / "mi_prelude.h.gch"
        text.write_text(PRELUDE)
        if not header.exists():
            os.replace(text, header)
        result = subprocess.run([cxx, *[f for f in flags if f != "-shared"], "-x", "c++-header", str(header),
                                 "-o", str(out)], capture_output=True, text=True)
        if result.returncode == 0:   # (else the header's text serves, and the build reports any error)
            os.replace(out, pch)
    return header


def build(source: str, cxx: str | None = None, libtorch: bool = False, cuda: bool = False) -> Path:
    """Compile `source` (prelude prepended) to a shared library; return its path.
    libtorch=True: against libtorch's C shim (a C++ wrapper; cuda=True: a GPU graph's)."""
    cxx = cxx or os.environ.get("CXX", "g++")
    full = PRELUDE + "\n" + source
    defines, libs = vector_math_flags()
    flags = FLAGS + vector_width_flags() + defines
    if libtorch:
        flags, libs = flags + libtorch_flags(cuda)[0], libs + libtorch_flags(cuda)[1]
    key = hashlib.sha256("\0".join([full, " ".join(flags + libs), compiler_version(cxx)]).encode()).hexdigest()[:32]
    folder = cache_dir() / key[:2]
    folder.mkdir(parents=True, exist_ok=True)
    lib = folder / f"{key}.so"
    if lib.exists():
        return lib
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src = Path(tmp) / "kernels.cpp"
        src.write_text(full)
        out = Path(tmp) / "kernels.so"
        if libtorch:   # (libtorch's headers too: no precompiled prelude)
            command = [cxx, *flags, str(src)]
        else:
            body = Path(tmp) / "body.cpp"
            body.write_text(source)
            command = [cxx, *flags, "-include", str(prelude_header(cxx, flags)), str(body)]
        result = subprocess.run([*command, "-o", str(out), *libs], capture_output=True, text=True)
        if result.returncode != 0:
            raise CppCompileError(f"{_explain_failure(result.stderr)}C++ build failed ({cxx}):\n"
                                  f"{result.stderr[-4000:]}")
        os.replace(src, folder / f"{key}.cpp")
        os.replace(out, lib)
    return lib


def load_kernels(source: str, names: list[str] | dict[str, int], cxx: str | None = None) -> dict:
    """Build (or fetch from the cache) and return {name: ctypes function}. Given {name: (number
    of pointer arguments, number of int64 size arguments after them)}, each function declares
    them `c_void_p` and `c_int64`: it then takes plain ints (`t.data_ptr()`, `s0`), which ctypes
    converts faster than `c_void_p(t.data_ptr())` objects. (Undeclared, a Python int would be
    passed as a 32-bit C int.)"""
    if not names:
        return {}
    lib = ctypes.CDLL(str(build(source, cxx)))
    kernels = {}
    for name in names:
        fn = getattr(lib, name)
        fn.restype = None
        if isinstance(names, dict):
            pointers, sizes = names[name]
            fn.argtypes = [ctypes.c_void_p] * pointers + [ctypes.c_int64] * sizes
        kernels[name] = fn
    return kernels


def load_cpp_wrapper(source: str, cxx: str | None = None, cuda: bool = False):
    """Build (or fetch) a C++ wrapper's library and return it. Its `call` takes a Python list
    (the input handles' capsules; a GPU graph's also the list of input tensors, which it
    empties) and returns a list (the outputs'), run holding the GIL (PyDLL), so that it may
    build Python objects and raise Python errors. A GPU graph's library also has `mi_bind`,
    which writes a compiled Triton kernel into its launch table (runtime/triton_runtime.py,
    `bind_launch_table`)."""
    lib = ctypes.PyDLL(str(build(source, cxx, libtorch=True, cuda=cuda)))
    lib.call.argtypes, lib.call.restype = [ctypes.py_object] * (2 if cuda else 1), ctypes.py_object
    if cuda:
        lib.mi_bind.argtypes = [ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 5, ctypes.c_int64]
        lib.mi_bind.restype = lib.mi_init.restype = ctypes.c_int
    return lib
