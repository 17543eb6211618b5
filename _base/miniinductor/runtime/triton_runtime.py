"""Triton at run time: helper functions, libdevice, autotuning, launching, a module loader.

Mirrors, in small, `torch/_inductor/runtime/triton_helpers.py` (the @triton.jit helpers
kernels call, and the `libdevice` import that works across Triton versions),
`runtime/triton_heuristics.py` (timing block-size candidates, the launcher; the block-size
rules themselves are the backend policy's, codegen/policy.py), the autotuning cache
(`AutotuneCache`, for the GEMM templates' winners and their epilogue verdicts:
codegen/triton_template.py, codegen/epilogue_tuning.py)
and `codecache.py`'s PyCodeCache (write a module to disk and import it: `@triton.jit`
reads its function's source with `inspect`, which a string passed to `exec` does not have).

Interpreter mode (`TRITON_INTERPRET=1`): Triton runs a kernel as NumPy code, one program
at a time, on CPU tensors. Its libdevice functions are stubs there (they return None), so
`libdevice` resolves to `InterpreterLibdevice`, which computes the same functions with
torch on the NumPy data. The choice is made when a generated module imports `libdevice`
(after the environment variable is set), never when this module is imported.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

import torch

from .cpp_builder import cache_dir, write_source


def interpreting() -> bool:
    """True when `triton.jit` makes interpreted (NumPy) kernels: TRITON_INTERPRET=1."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _interpreted(fn) -> bool:
    """Whether a @triton.jit kernel was decorated under the interpreter (TRITON_INTERPRET is
    read then, per module: a GPU graph's kernels are compiled ones whatever it says later)."""
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(fn, InterpretedFunction)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- autotuning
def autotune(launch, candidates: list, on_gpu: bool = True, in_place: tuple = ()):
    """Time `launch(candidate)` for each candidate (a block configuration, or a `Launcher`
    bound to one); return the fastest.
    A kernel that writes over an input (`in_place`: its in_out_ptr tensors, a mutated graph
    input or an output written over a dying input) gives another result each time it runs
    (a bias added twice): those tensors are saved first and restored after the timing, as
    Inductor's autotuner restores mutated arguments. On the CPU (the interpreter) timings
    mean nothing: the first candidate is taken."""
    if not on_gpu or len(candidates) == 1:
        return candidates[0]
    saved = [t.clone() for t in in_place]
    timings = []
    for config in candidates:
        try:
            timings.append((benchmark(lambda: launch(config)), config))
        except Exception:  # e.g. too many registers for this block: not a candidate
            continue
    for tensor, value in zip(in_place, saved):
        tensor.copy_(value)
    if not timings:
        raise RuntimeError(f"max_autotune: no block configuration of {len(candidates)} could launch")
    return min(timings, key=lambda t: t[0])[1]


def benchmark(fn) -> float:
    """Milliseconds per call of `fn` on the GPU (Triton's `do_bench`: warm up, then the median).
    Compiles still running in the compile threads (`prefetch_gemm`'s) are waited for first:
    their Python front end holds the GIL, which delays the timed launches, and the GPU's
    clock counts the gaps (aten.mm 4096x768x2304 read 0.815 ms instead of 0.383 on an H200)."""
    from triton.testing import do_bench
    with _in_flight_lock:
        pending = list(_in_flight.values())
    wait_for(pending)
    return do_bench(fn, warmup=5, rep=20)


def set_tma_allocator():
    """Device-side TMA descriptors (`tl.make_tensor_descriptor`) live in a scratch buffer that
    Triton asks the program for at launch: hand it a torch allocation (as Inductor does)."""
    import triton
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))


class AutotuneCache:
    """One autotuning result kept on disk (`$MINIINDUCTOR_CACHE_DIR/autotune/`), named by
    the hash of `key` (the problem, the device and the choices), as JSON: a later compile
    of the same problem skips the timing. Inductor keeps its choices' timings in a cache
    of the same kind (`codecache.LocalCache`)."""

    def __init__(self, key: str):
        folder = cache_dir() / "autotune"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def _entry(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self):
        """The stored winner, or None."""
        return self._entry().get("winner")

    def timings(self) -> list:
        """The stored table: [ms, choice] pairs, fastest first ([] if none was stored)."""
        return self._entry().get("timings", [])

    def put(self, winner, timings=()):
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"winner": winner, "timings": list(timings)}))
        os.replace(tmp, self.path)   # atomic: a reader never sees half a file


# --------------------------------------------------------------------------- launching
class Launcher:
    """`fn[grid](*tensors, **meta)` for one call site, without Triton's JIT dispatch on
    every call. `JITFunction.run` binds the arguments, checks each pointer's alignment,
    builds a cache key and looks the kernel up: ~10 µs a launch, as much as a small kernel
    runs. The first call goes through it; later calls hand the same tensors straight to the
    compiled kernel's C launcher -- as long as every pointer is still 16-byte aligned the
    way it was (the compiled code may assume it) and the device is the same. Mirrors the
    launchers `CachingAutotuner` (`torch/_inductor/runtime/triton_heuristics.py`) builds.
    Under the interpreter, or when Triton's launch hooks are set, every call uses the JIT.

    A kernel generic in its sizes takes `ints` int arguments after its pointers (size
    symbols, xnumel...; its @triton.jit does not specialise on their values) and gets its
    `grid` at each call (`grid=None` here). Triton types an int i32 or, from 2**31, i64:
    the fast path is taken only for ints of the width it was bound with."""

    def __init__(self, fn, grid: tuple | None, dtypes: tuple = (), ints: int = 0, **meta):
        self.fn, self.dtypes, self.ints, self.meta = fn, tuple(dtypes), ints, meta
        self.grid = tuple(grid) if grid is not None else None
        self.grid3 = self._grid3(grid) if grid is not None else None
        self.constexprs = tuple(meta[name] for name in fn.arg_names if name in meta)
        self.kernel, self.aligned, self.device = None, None, None
        self.compiled = None   # what precompile compiled (for aligned pointers)

    @staticmethod
    def _grid3(grid) -> tuple:
        return tuple(grid) + (1,) * (3 - len(grid))

    def _signature(self, args) -> tuple:
        """What the compiled kernel assumed of the arguments: aligned pointers, i32 ints."""
        if not self.ints:
            return tuple(a.data_ptr() % 16 == 0 for a in args)
        pointers, ints = args[:-self.ints], args[-self.ints:]
        return (*(a.data_ptr() % 16 == 0 for a in pointers), all(-2**31 <= n < 2**31 for n in ints))

    def __call__(self, *args, grid=None):
        kernel = self.kernel
        if kernel is not None and args[0].get_device() == self.device and self._signature(args) == self.aligned:
            grid3 = self.grid3 if grid is None else self._grid3(grid)
            kernel.run(*grid3, torch._C._cuda_getCurrentRawStream(self.device), kernel.function,
                       kernel.packed_metadata, None, None, None, *args, *self.constexprs)
            return
        compiled = self.fn[self.grid if grid is None else grid](*args, **self.meta)
        if self.kernel is None and self._can_bind(compiled, args):
            self.kernel, self.device = compiled, args[0].get_device()
            self.aligned = self._signature(args)

    def precompile(self):
        """Compile ahead of the first launch, from the pointers' dtypes alone (Triton's
        `warmup`, which assumes 16-byte aligned pointers, as freshly allocated ones are;
        ints are taken i32), and load it: `compiled.run` loads the binary onto the current
        GPU and gets the launcher -- Triton up to 3.6 builds a C launcher per kernel
        signature there with the C compiler (a third of a second each, cold), which the
        first launch would otherwise do, one kernel after another."""
        if not _interpreted(self.fn) and self.dtypes:
            compiled = self.fn.warmup(*self.dtypes, *[2] * self.ints, grid=self.grid or (1,), **self.meta)
            getattr(compiled, "run", None)
            self.compiled = compiled

    @staticmethod
    def _can_bind(compiled, args) -> bool:
        if not args or not args[0].is_cuda or not hasattr(compiled, "packed_metadata"):
            return False
        try:
            from triton import knobs
            hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
        except (ImportError, AttributeError):
            return False
        unhooked = all(h is None or not getattr(h, "calls", True) for h in hooks)   # None, or an empty HookChain
        return unhooked and hasattr(torch._C, "_cuda_getCurrentRawStream")


def bind_launch_table(lib, launches, device_index: int) -> str | None:
    """Write each Triton kernel of a GPU graph into its C++ wrapper's launch table
    (codegen/cpp_wrapper_cuda.h, `mi_bind`): the CUfunction Triton loaded on the graph's GPU,
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
        logging.getLogger("miniinductor").info("cpp_wrapper: the Python wrapper launches this graph's kernels (%s)", why)
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


def kernel_launchers(namespace: dict, name: str) -> list:
    """The `Launcher`s of kernel `name` in its module's namespace: `_launcher_<name>`, or
    max_autotune's candidates `_launchers_<name>` ([] for an empty grid)."""
    one = namespace.get(f"_launcher_{name}")
    return [one] if one is not None else list(namespace.get(f"_launchers_{name}", []))


#: the compile threads (one a core, from 4 up to 16; started on first use), and the compiles in
#: flight in them: (kernel, its constexprs and launch options, dtypes, GPU) → Future
_compile_pool: ThreadPoolExecutor | None = None
_in_flight: dict[tuple, Future] = {}
_in_flight_lock = threading.Lock()


def precompile_all(launchers, device: torch.device | None = None, wait: bool = True) -> float:
    """Compile every kernel of a graph at once, in threads, before its first call (Triton
    spends much of a compile in LLVM and in `ptxas` and `cc`, subprocesses, where other
    threads run; Triton's front end, Python, holds the GIL). Inductor compiles in a pool of
    worker processes; threads are the small version. Each thread makes `device` (the
    graph's GPU) current, since Triton files a compiled kernel, and loads it, under the
    current device -- a new thread's is GPU 0. A kernel that fails here is compiled again,
    the usual way, at its first launch. A kernel already being compiled (the same JIT
    function and meta, e.g. started by `wait=False`) is waited for, not compiled twice.
    `wait=False` starts the compiles and returns at once (`prefetch_gemm`).
    Returns the seconds it took."""
    global _compile_pool
    index = device.index if device is not None and device.type == "cuda" else None

    def one(launcher):
        try:
            if index is not None:
                torch.cuda.set_device(index)   # (this thread's current device only)
            launcher.precompile()
        except Exception as exc:  # noqa: BLE001 -- the first launch will compile it (and raise)
            logging.getLogger("miniinductor").debug("precompiling %s failed: %s", launcher.fn, exc)
    start = time.perf_counter()
    futures, shared = [], []
    with _in_flight_lock:
        if _compile_pool is None:
            _compile_pool = ThreadPoolExecutor(min(max(os.cpu_count() or 8, 4), 16), thread_name_prefix="miniinductor-compile")
        for launcher in launchers:
            key = (launcher.fn, repr(sorted(launcher.meta.items())), launcher.dtypes, launcher.ints, index)
            if key in _in_flight:
                futures.append(_in_flight[key])
                shared.append(launcher)
                continue
            future = _in_flight[key] = _compile_pool.submit(one, launcher)
            # (no lock in the callback: it runs at once, in this thread, if the compile is done already)
            future.add_done_callback(lambda _, key=key: _in_flight.pop(key, None))
            futures.append(future)
    if wait:
        wait_for(futures)
        list(map(one, shared))   # compiled by another launcher: found in Triton's cache now
    return time.perf_counter() - start


# --------------------------------------------------------------------------- helpers
#: small @triton.jit functions a kernel may call; each generated module includes the ones
#: its kernel uses (so the module is self-contained and readable on its own). Kernels call
#: no @triton.jit function of triton.language itself (tl.sum, tl.zeros...): under the
#: interpreter those only work when TRITON_INTERPRET was set before triton was imported.
HELPERS = {
    "_bf16_rtne": '''
@triton.jit
def _bf16_rtne(x):
    # float32 -> bfloat16 rounded to nearest even, as the GPU's conversion and eager's do:
    # Triton's interpreter truncates (kernels on the CPU only; NaN kept as it is)
    u = x.to(tl.uint32, bitcast=True)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, u.to(tl.float32, bitcast=True)).to(tl.bfloat16)
''',
    "_sum_combine": '''
@triton.jit
def _sum_combine(a, b):
    return a + b
''',
    "_max_combine": '''
@triton.jit
def _max_combine(a, b):
    # NaN-propagating maximum, as torch.maximum / amax
    return tl.where((a != a) | (a > b), a, b)
''',
    "_min_combine": '''
@triton.jit
def _min_combine(a, b):
    return tl.where((a != a) | (a < b), a, b)
''',
    "_prod_combine": '''
@triton.jit
def _prod_combine(a, b):
    return a * b
''',
    "_online_softmax_combine": '''
@triton.jit
def _online_softmax_combine(m, s, x):
    # one more value x into each lane's running max m and sum s of exp(. - m): the sum so far
    # is rescaled to the new max (NaN propagates; a max of -inf is shifted by 0, not by itself)
    m_new = tl.where((m != m) | (m > x), m, x)
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    return m_new, s * libdevice.exp(m - shift) + libdevice.exp(x - shift)
''',
    "_online_softmax_reduce": '''
@triton.jit
def _online_softmax_reduce(m, s):
    # the lanes of each row → the row's max and sum of exp(x - max), as [XBLOCK, 1] blocks
    row_max = tl.reduce(m, 1, _max_combine)[:, None]
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    return row_max, tl.reduce(s * libdevice.exp(m - shift), 1, _sum_combine)[:, None]
''',
    "_argmax_combine": '''
@triton.jit
def _argmax_combine(a, a_index, b, b_index):
    # (value, index) pairs: the larger value wins, NaN beats everything, ties go to the
    # smaller index (torch.argmax returns the first occurrence)
    a_nan = a != a
    b_nan = b != b
    better = (a > b) | (a_nan & (b == b))
    same = (a == b) | (a_nan & b_nan)
    take_a = better | (same & (a_index < b_index))
    return tl.where(take_a, a, b), tl.where(take_a, a_index, b_index)
''',
    "_argmin_combine": '''
@triton.jit
def _argmin_combine(a, a_index, b, b_index):
    a_nan = a != a
    b_nan = b != b
    better = (a < b) | (a_nan & (b == b))
    same = (a == b) | (a_nan & b_nan)
    take_a = better | (same & (a_index < b_index))
    return tl.where(take_a, a, b), tl.where(take_a, a_index, b_index)
''',
    "_floordiv_int": '''
@triton.jit
def _floordiv_int(a, b):
    # Python floor division; Triton's // truncates toward zero like C
    quot = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), quot - 1, quot)
''',
    "_floordiv_float": '''
@triton.jit
def _floordiv_float(a, b):
    # torch's div_floor for floating point (ATen/native/BinaryOps.h); % is fmod here
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floordiv = tl.floor(div)
    floordiv = tl.where(div - floordiv > 0.5, floordiv + 1.0, floordiv)
    result = tl.where(div != 0, floordiv, (a / b) * 0.0)
    return tl.where(b == 0, a / b, result)
''',
    "_python_mod": '''
@triton.jit
def _python_mod(a, b):
    # the sign of the result follows the divisor (torch.remainder)
    rem = a % b
    return tl.where((rem != 0) & ((rem < 0) != (b < 0)), rem + b, rem)
''',
    "_pow_int": '''
@triton.jit
def _pow_int(base, exp):
    # integer power by squaring, exact like eager
    result = base * 0 + exp * 0 + 1
    b = base + exp * 0
    e = exp + base * 0
    for _ in tl.static_range(63):
        result = tl.where((e & 1) != 0, result * b, result)
        b = b * b
        e = e >> 1
    if exp.dtype.is_int_signed():  # (unsigned: no negative exponents, and -1 is no value)
        negative = tl.where(base == 1, 1, tl.where(base == -1, tl.where((exp & 1) != 0, -1, 1), 0))
        result = tl.where(exp < 0, negative, result)
    return result
''',
}


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
        fn = self._TORCH.get(name) or getattr(torch.special, name, None) or getattr(torch, name, None)
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


_interpreter_patched = False


def patch_interpreter_comparisons():
    """Work around a Triton interpreter bug (seen in 3.x): a comparison's result holds
    NumPy bools but is labelled with its operands' type (int64, float32...). Harmless
    for a block, but a 0-d one (a condition on constants or on a scalar load: `tmp1 >=
    tmp2` with `tmp1 = tl.full([], 1, tl.int64)`) is *splatted* into a block by the
    label's type, so `xmask & tmp3` turns into int64/int32 data and `tl.load(..., mask)`
    fails with "mask has unsupported dtype". Compiled kernels are unaffected. Relabel the
    results tl.int1, as the compiler types them; idempotent."""
    global _interpreter_patched
    if _interpreter_patched:
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    def relabelled(create):
        def compare(self, lhs, rhs):
            out = create(self, lhs, rhs)
            if out.dtype != tl.int1 and np.asarray(out.data).dtype == np.bool_:
                out = TensorHandle(out.data, tl.int1)
            return out
        return compare

    for name in dir(InterpreterBuilder):
        if name.startswith(("create_icmp", "create_fcmp")):
            setattr(InterpreterBuilder, name, relabelled(getattr(InterpreterBuilder, name)))
    _interpreter_patched = True


_loaded: dict[str, object] = {}


def load_module(source: str, prefix: str = "triton", interpret: bool | None = None):
    """Write `source` to the cache folder (named by its hash) and import it from there.

    `@triton.jit` needs the file: it parses each kernel's source with `inspect`. Modules
    are cached per (source, interpreter mode), since `triton.jit` decides at decoration
    time whether a kernel is compiled or interpreted."""
    if interpret is not None:  # CPU tensors: decorate the kernels in interpreter mode
        saved = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        try:
            return load_module(source, prefix)
        finally:
            if saved is None:
                del os.environ["TRITON_INTERPRET"]
            else:
                os.environ["TRITON_INTERPRET"] = saved
    if interpreting():
        patch_interpreter_comparisons()
    key = hashlib.sha256(source.encode()).hexdigest()[:32]
    mode_key = f"{key}:{int(interpreting())}"
    if mode_key in _loaded:
        return _loaded[mode_key]
    path = write_source(source, prefix)
    module_name = f"miniinductor_{prefix}_{key}_{int(interpreting())}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # triton's JIT looks functions' globals up by module
    spec.loader.exec_module(module)
    _loaded[mode_key] = module
    return module
