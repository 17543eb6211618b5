"""What generated Triton modules import at run time: libdevice, launch helpers, a loader.

Mirrors bits of `torch/_inductor/runtime/triton_helpers.py` (the `libdevice` import that
works across Triton versions) and `torch/_inductor/codecache.py` (PyCodeCache: write the
module to disk and import it, because `@triton.jit` reads its function's source with
`inspect`, which a string passed to `exec` does not have).

Interpreter mode (`TRITON_INTERPRET=1`): Triton runs a kernel as NumPy code, one program
at a time, on CPU tensors. Its libdevice functions are stubs there (they return None), so
`libdevice` resolves to `InterpreterLibdevice`, which computes the same functions with
torch on the NumPy data. The choice is made when a generated module imports `libdevice`
(after the environment variable is set), never when this module is imported.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

import torch


def interpreting() -> bool:
    """True when `triton.jit` makes interpreted (NumPy) kernels: TRITON_INTERPRET=1."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _libdevice_module():
    try:
        from triton.language.extra import libdevice
    except ImportError:  # Triton 2.x
        from triton.language.math import libdevice  # type: ignore
    return libdevice


class InterpreterLibdevice:
    """`libdevice.tanh(x)` etc. for the Triton interpreter, computed with torch.

    An interpreted Triton tensor holds a NumPy array in `x.handle.data`; each function
    converts it to torch, applies the torch function of the same meaning, and wraps the
    result back in a Triton tensor of the argument's type."""

    _TORCH = {
        "expm1": torch.expm1, "log10": torch.log10, "log1p": torch.log1p, "tan": torch.tan,
        "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
        "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh,
        "atanh": torch.atanh, "erfc": torch.erfc, "lgamma": torch.lgamma, "trunc": torch.trunc,
        "nearbyint": torch.round, "rint": torch.round, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
        "exp": torch.exp, "log": torch.log, "erf": torch.erf, "floor": torch.floor,
        "ceil": torch.ceil, "isnan": torch.isnan, "isinf": torch.isinf,
        "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
        "pow": torch.pow, "fmod": torch.fmod, "signbit": torch.signbit,
    }

    def __getattr__(self, name):
        fn = self._TORCH.get(name)
        if fn is None:
            raise AttributeError(f"libdevice.{name} has no interpreter implementation")

        def apply(*args):
            import numpy as np
            import triton.language as tl
            from triton.runtime.interpreter import TensorHandle

            first = next(a for a in args if isinstance(a, tl.tensor))
            values = [torch.from_numpy(np.asarray(a.handle.data)) if isinstance(a, tl.tensor)
                      else torch.tensor(a, dtype=torch.float64) for a in args]
            out = fn(*values)
            np_dtype = np.asarray(first.handle.data).dtype
            data = out.numpy().astype(np.bool_ if out.dtype == torch.bool else np_dtype)
            scalar = tl.int1 if out.dtype == torch.bool else first.dtype
            shape = np.broadcast_shapes(*[np.shape(a.handle.data) for a in args if isinstance(a, tl.tensor)])
            data = np.broadcast_to(data, shape).copy()
            ty = tl.block_type(scalar, list(first.shape)) if first.shape else scalar
            return tl.tensor(TensorHandle(data, scalar), ty)
        return apply


def __getattr__(name):
    """`from miniinductor.runtime.triton_runtime import libdevice` picks the real
    libdevice, or the torch-backed one under the interpreter, at import time."""
    if name == "libdevice":
        return InterpreterLibdevice() if interpreting() else _libdevice_module()
    raise AttributeError(name)


def cache_dir():
    from .cpp_builder import cache_dir as _cache_dir
    return _cache_dir()


_loaded: dict[str, object] = {}


def load_module(source: str, prefix: str = "triton"):
    """Write `source` to the cache folder (named by its hash) and import it from there.

    `@triton.jit` needs the file: it parses each kernel's source with `inspect`. Modules
    are cached per (source, interpreter mode), since `triton.jit` decides at decoration
    time whether a kernel is compiled or interpreted."""
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    mode_key = f"{key}:{int(interpreting())}"
    if mode_key in _loaded:
        return _loaded[mode_key]
    folder = cache_dir() / key[:2]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}_{prefix}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    module_name = f"miniinductor_{prefix}_{key}_{int(interpreting())}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # triton's JIT looks functions' globals up by module
    spec.loader.exec_module(module)
    _loaded[mode_key] = module
    return module
