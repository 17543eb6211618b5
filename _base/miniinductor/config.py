"""Compiler options: one frozen dataclass, passed explicitly to every phase.

Mirrors `torch/_inductor/config.py`, minus the module of mutable globals: a `Config` is
built once per `compile()` call and handed down. The environment is read when a `Config`
is built -- the defaults of `cxx` ($CXX) and `trace` ($MINIINDUCTOR_TRACE) -- and the
compiler reads those fields, not the variables. Process-wide settings stay outside it:
$MINIINDUCTOR_LOGS (logs.py), $MINIINDUCTOR_CACHE_DIR (runtime/cpp_builder.py) and
$TRITON_INTERPRET (Triton's own).

Where an option's value comes from, strongest first:
  1. explicit options     `torch.compile(fn, backend="miniinductor", options={"fusion": False})`,
                          `miniinductor.compile(fn, fusion=False)`
  2. top-level flags      `mode="reduce-overhead"` (see MODES), and `miniinductor.compile`'s
                          `freezing=`, `autocast_enabled=`, `autocast_dtype=` keywords
  3. a named preset       `preset="no_fusion"` (see PRESETS); in torch.compile, `options={"preset": ...}`
  4. the defaults below
So `miniinductor.compile(fn, preset="freezing", freezing=False)` does not freeze, and
`miniinductor.compile(fn, mode="reduce-overhead", cudagraphs=False)` records no CUDA graph.
(torch.compile itself refuses `mode` and `options` together.)
`Config.build(...)` applies that order and rejects unknown names, listing close matches;
every `Config` checks each value against its field's annotation, `CHOICES` and `MINIMUMS`
(`option max_fusion_size='big': expected an int >= 1`), so `miniinductor.compile` fails at
once and torch.compile at the first call, not deep inside the compiler.
Inductor's spellings in `ALIASES` (`"triton.cudagraphs"`) name the same fields, and a
GraphNet-style dict is taken whole, by either route:
    {"template": "tma", "mode": "max-autotune", "freezing": True,
     "inductor_config": {"triton.cudagraphs": False, "triton.enable_persistent_tma_matmul": True}}
`template` is a preset, `freezing` a top-level flag and `inductor_config` explicit options,
so inductor_config overrides > freezing > template.
`enable_persistent_tma_matmul` (the `tma` preset) adds persistent GEMM templates to
max_autotune's choices, with TMA loads on compute capability 9.0+ and under Triton's
interpreter, plain loads elsewhere; never an error because of the hardware. CUTLASS in
`max_autotune_gemm_backends` (the `cutlass` preset) is accepted but not built: one info line
(`log_unavailable_features`), and the ATen and Triton choices run.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import importlib.util
import inspect
import logging
import numbers
import os
import shutil
import types
import typing

import torch

#: what each torch.compile mode sets (as in `torch._inductor.list_mode_options()`)
MODES = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"max_autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}

log = logging.getLogger("miniinductor")

#: named groups of options (GraphNet's config templates among them)
PRESETS = {
    "cudagraphs": {"cudagraphs": True},
    "max_autotune": {"max_autotune": True},
    "aten": {"fallback_all": True},
    "no_fusion": {"fusion": False},
    "freezing": {"freezing": True},
    "triton": {"cpu_backend": "triton", "max_autotune_gemm_backends": "TRITON"},   # Triton kernels only
    "cpp_wrapper": {"cpp_wrapper": True},
    "cutlass": {"max_autotune": True, "max_autotune_gemm_backends": "ATEN,TRITON,CUTLASS"},
    "tma": {"max_autotune": True, "enable_persistent_tma_matmul": True},
}

#: the values `autocast_dtype` takes
AUTOCAST_DTYPES = ("bfloat16", "float16")
#: the float32 dots a GEMM template may use with TF32 off (Triton's `input_precision`)
GEMM_FP32_PRECISIONS = ("ieee", "tf32x3")
#: what `max_autotune_gemm_backends` may list (comma-separated)
GEMM_BACKENDS = ("ATEN", "TRITON", "CUTLASS")
#: Inductor's spellings of our options (`torch._inductor.config`), accepted as the same
ALIASES = {"triton.cudagraphs": "cudagraphs",
           "triton.enable_persistent_tma_matmul": "enable_persistent_tma_matmul"}
#: keys of a GraphNet-style config dict that are not option names: template → a preset,
#: inductor_config → explicit options (`mode` and `freezing` are read as usual)
GRAPHNET_KEYS = ("template", "inductor_config")
#: the values a str option may take (any other str option takes any str)
CHOICES = {"cpu_backend": ("cpp", "triton"), "gemm_fp32_precision": GEMM_FP32_PRECISIONS,
           "autocast_dtype": AUTOCAST_DTYPES}
#: the least value of each int option (every int option has one)
MINIMUMS = {"mix_order_min_numel": 0, "max_fusion_size": 1, "realize_reads_threshold": 0,
            "realize_opcount_threshold": 0, "parallel_min_numel": 0}


@dataclasses.dataclass(frozen=True)
class Config:
    cpu_backend: str = "cpp"
    "Code generator for CPU tensors: 'cpp' (C++/OpenMP) or 'triton' (run by Triton's interpreter)."
    cxx: str = dataclasses.field(default_factory=lambda: os.environ.get("CXX", "g++"))
    "C++ compiler to build CPU kernels with (default: $CXX or g++)."
    cudagraphs: bool = False
    "Record each GPU graph's kernel launches in a CUDA graph once and replay it (mode reduce-overhead)."
    max_autotune: bool = False
    "Time a few block sizes per Triton kernel on first launch and keep the fastest (GPU); matmuls choose between ATen and Triton GEMM templates."
    max_autotune_gemm_backends: str = "ATEN,TRITON"
    "With max_autotune, Triton kernels: matmul choices, 'ATEN,TRITON', 'TRITON' (every matmul from a template) or 'ATEN' (CUTLASS: skipped)."
    enable_persistent_tma_matmul: bool = False
    "With max_autotune and Triton GEMM templates: persistent templates among the choices, TMA loads on compute capability 9.0+ (and the interpreter)."
    gemm_fp32_precision: str = "ieee"
    "With max_autotune, a float32 GEMM template's dot where TF32 is off: 'ieee' (as cuBLAS) or 'tf32x3' (3 TF32 products: faster, not eager's bits)."
    coordinate_descent_tuning: bool = False
    "With max_autotune: from the fastest GEMM template config, double or halve each block size, warps and stages while that is faster (GPU)."
    trace: str | None = dataclasses.field(default_factory=lambda: os.environ.get("MINIINDUCTOR_TRACE") or None)
    "Folder to write a trace of every compiled graph into (default: $MINIINDUCTOR_TRACE)."
    fallback_all: bool = False
    "Lower nothing: every op runs as an ATen call (for debugging a wrong result)."
    fallback_ops: tuple[str, ...] = ()
    "ATen ops (as str(op), e.g. 'aten.add.Tensor') that run as ATen calls (for confirming a suspicious lowering)."
    fusion: bool = True
    "Fuse nodes into shared kernels (off: one kernel per buffer, for teaching and debugging)."
    mix_order_reduction: bool = True
    "Triton: a row and a column reduction of the same input share one kernel that reads it once."
    mix_order_min_numel: int = 2**22
    "... when that input has at least this many elements (below, the extra launches cost more)."
    combo_kernels: bool = True
    "After fusion, independent pointwise kernels (an optimizer step's, one per parameter) share a few combo kernels."
    max_fusion_size: int = 64
    "The most nodes one fused kernel may hold."
    realize_reads_threshold: int = 4
    "A value used twice is stored (not recomputed) when its body reads more buffers than this."
    realize_opcount_threshold: int = 30
    "... or when its body runs more ops than this."
    layout_optimization: bool = True
    "Inference graphs, C++ kernels or the GPU: 2-D convolutions take their input channels-last, which oneDNN and cuDNN run faster."
    winograd: bool = True
    "C++ backend, inference: 3x3 stride-1 float32 convolutions by Winograd F(2x2, 3x3) (runtime/winograd.py: 2.25x fewer multiplies)."
    onednn_linear: bool = True
    "C++ backend: float32 Linear-shaped matmuls (and a GELU after one) through oneDNN where compile-time timing finds it faster than ATen's BLAS."
    parallel_min_numel: int = 32768
    "Loops with fewer elements than this run on one thread (OpenMP start-up costs ~µs)."
    freezing: bool = False
    "Inference only: parameters and buffers become constants, and ops on them alone run once at compile time (later changes to them may not be seen)."
    autocast_enabled: bool = False
    "Compile as if run under torch.autocast on the inputs' device, with dtype autocast_dtype."
    autocast_dtype: str = "bfloat16"
    "The low-precision dtype of autocast_enabled: 'bfloat16' or 'float16'."
    cpp_wrapper: bool = False
    ("the wrapper that allocates buffers and calls the kernels is C++, compiled (CPU: with the C++ kernels; "
     "GPU: it launches the Triton kernels through the CUDA driver), for less host time per call.")

    def __post_init__(self):
        """Every field checked against its annotation (bool: True or False only; int: an int,
        not a bool or float, at least MINIMUMS[name]; str: one of CHOICES[name] where listed;
        `X | None`: None too), so a bad value fails here, naming the option, not deep inside."""
        for name, hint in _field_types().items():
            _check_option(name, getattr(self, name), hint)
        bad = [b for b in self.max_autotune_gemm_backends.split(",") if b not in GEMM_BACKENDS]
        if bad:
            raise ValueError(f"option max_autotune_gemm_backends={self.max_autotune_gemm_backends!r} lists "
                             f"{', '.join(map(repr, bad))}: valid backends are {', '.join(GEMM_BACKENDS)}, "
                             f"comma-separated (e.g. 'ATEN,TRITON' or 'TRITON')")

    @classmethod
    def field_help(cls) -> dict[str, tuple[object, str]]:
        """name → (default, one-line help), read from the attribute docstrings above."""
        tree = ast.parse(inspect.getsource(cls))
        body = tree.body[0].body
        helps = {}
        for stmt, nxt in zip(body, body[1:]):
            if isinstance(stmt, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                helps[stmt.target.id] = nxt.value.value
        defaults = cls()
        return {f.name: (getattr(defaults, f.name), helps.get(f.name, "")) for f in dataclasses.fields(cls)}

    @classmethod
    def build(cls, mode: str | None = None, options: dict | None = None, preset: str | None = None,
              flags: dict | None = None) -> "Config":
        """Preset, then the top-level flags (mode, then `flags` such as {"freezing": True};
        None values count as not given), then explicit options, each overriding the one before."""
        options = _resolve_aliases(options)
        preset = _one_value("preset", preset, options.pop("preset", None), options.pop("template", None))
        mode = _one_value("mode", mode, options.pop("mode", None))
        options.update(_resolve_aliases(options.pop("inductor_config", None)))   # GraphNet's: these win
        values: dict = {}
        if preset is not None:
            values.update(_lookup("preset", preset, PRESETS))
        values.update(_lookup("mode", mode or "default", MODES))
        values.update({k: v for k, v in (flags or {}).items() if v is not None})
        values.update(options)
        config = cls.from_options(values)
        log_unavailable_features(config)
        return config

    def gemm_backends(self) -> tuple[str, ...]:
        """The matmul choices that exist here: CUTLASS is dropped (never built); ATen when
        nothing else is left."""
        backends = tuple(b for b in self.max_autotune_gemm_backends.split(",") if b != "CUTLASS")
        return backends or ("ATEN",)

    @classmethod
    def from_options(cls, options: dict | None = None) -> "Config":
        options = _resolve_aliases(options)
        names = [f.name for f in dataclasses.fields(cls)]
        for key in options:
            if key not in names:
                close = difflib.get_close_matches(key, names + list(ALIASES), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ValueError(f"unknown miniinductor option {key!r}{hint} Valid options: {', '.join(names + list(ALIASES))}")
        if isinstance(options.get("autocast_dtype"), torch.dtype):   # torch.bfloat16 → "bfloat16"
            options["autocast_dtype"] = str(options["autocast_dtype"]).removeprefix("torch.")
        if isinstance(options.get("fallback_ops"), (list, tuple, set, str, torch._ops.OpOverload)):
            ops = options["fallback_ops"]   # hashable, like every field; ops by name, as str(op)
            ops = [ops] if isinstance(ops, (str, torch._ops.OpOverload)) else ops
            options["fallback_ops"] = tuple(str(op) if isinstance(op, torch._ops.OpOverload) else op for op in ops)
        for name in ("cxx", "trace"):   # a pathlib.Path → its str
            if isinstance(options.get(name), os.PathLike):
                options[name] = os.fspath(options[name])
        for name in MINIMUMS:   # a numpy integer → int (a bool stays, and fails the check)
            value = options.get(name)
            if isinstance(value, numbers.Integral) and not isinstance(value, (int, bool)):
                options[name] = int(value)
        if isinstance(options.get("max_autotune_gemm_backends"), str):   # " aten, triton" → "ATEN,TRITON"
            options["max_autotune_gemm_backends"] = ",".join(
                b.strip().upper() for b in options["max_autotune_gemm_backends"].split(","))
        return cls(**options)   # __post_init__ checks every value


def _resolve_aliases(options: dict | None) -> dict:
    """`options` with Inductor's spellings (ALIASES) renamed to ours."""
    options = dict(options or {})
    for alias, name in ALIASES.items():
        if alias in options:
            value = options.pop(alias)
            if name in options and options[name] != value:
                raise ValueError(f"{alias}={value!r} and {name}={options[name]!r} are the same option")
            options[name] = value
    return options


def _one_value(name, *values):
    """The one value given for `name` by its several spellings (None: not given)."""
    given = {v for v in values if v is not None}
    if len(given) > 1:
        raise ValueError(f"{name} is given twice, as {' and '.join(map(repr, sorted(given)))}")
    return given.pop() if given else None


def cutlass_installed() -> bool:
    """The nvidia-cutlass package (its headers, `cutlass_library`) and nvcc, as Inductor looks for them."""
    return importlib.util.find_spec("cutlass_library") is not None and shutil.which("nvcc") is not None


def log_unavailable_features(config: Config):
    """One info line for each Inductor feature `config` asks for that is accepted but not built."""
    if config.enable_persistent_tma_matmul and not (config.max_autotune and "TRITON" in config.gemm_backends()):
        log.info("enable_persistent_tma_matmul ignored: it adds persistent GEMM templates to max_autotune's "
                 "Triton choices (max_autotune=True, max_autotune_gemm_backends with TRITON)")
    if "CUTLASS" in config.max_autotune_gemm_backends.split(","):
        log.info("max_autotune_gemm_backends: CUTLASS choices skipped (using %s): %s",
                 ",".join(config.gemm_backends()),
                 "miniinductor does not build CUTLASS GEMMs" if cutlass_installed() else
                 "CUTLASS is not installed (pip install nvidia-cutlass, and nvcc from the CUDA toolkit)")


_TYPE_WORDS = {bool: "True or False", int: "an int", str: "a str", tuple: "a tuple", type(None): "None"}


@functools.cache
def _field_types() -> dict:
    """Config's field name → its annotation, evaluated (`str | None`, `tuple[str, ...]`)."""
    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config)}


def _alternatives(hint) -> tuple:
    """`X | Y` → (X, Y); anything else → (hint,)."""
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


def _allows(name, value, hint) -> bool:
    """Whether `value` is one that option `name`, annotated `hint`, takes."""
    for kind in _alternatives(hint):
        base, args = typing.get_origin(kind) or kind, typing.get_args(kind)
        if base is type(None):
            ok = value is None
        elif base is bool:
            ok = isinstance(value, bool)
        elif base is int:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= MINIMUMS.get(name, value)
        elif base is str:
            ok = isinstance(value, str) and value in CHOICES.get(name, (value,))
        elif base is tuple:
            item = args[0] if len(args) == 2 and args[1] is Ellipsis else None
            ok = isinstance(value, tuple) and (item is None or all(_allows(name, v, item) for v in value))
        else:
            raise TypeError(f"Config.{name}: no check for its annotation {kind!r}")
        if ok:
            return True
    return False


def _describe(name, hint) -> str:
    """What option `name`, annotated `hint`, takes, in words: "an int >= 1", "one of 'cpp', 'triton'"."""
    words = []
    for kind in _alternatives(hint):
        base, args = typing.get_origin(kind) or kind, typing.get_args(kind)
        if base is int and name in MINIMUMS:
            words.append(f"an int >= {MINIMUMS[name]}")
        elif base is str and name in CHOICES:
            words.append(f"one of {', '.join(map(repr, CHOICES[name]))}")
        elif base is tuple and len(args) == 2 and args[1] is Ellipsis:
            words.append(f"a tuple of {args[0].__name__}")
        else:
            words.append(_TYPE_WORDS[base])
    return " or ".join(words)


def _check_option(name, value, hint):
    if not _allows(name, value, hint):
        raise ValueError(f"option {name}={value!r}: expected {_describe(name, hint)}")


def _lookup(kind, name, table):
    if name not in table:
        close = difflib.get_close_matches(name, table, n=2)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        raise ValueError(f"unknown {kind} {name!r}{hint}; valid: {', '.join(table)}")
    return table[name]


def list_mode_options(mode: str | None = None) -> dict:
    """What each mode sets (or one mode's settings), like torch._inductor.list_mode_options."""
    return dict(MODES) if mode is None else dict(_lookup("mode", mode, MODES))


def list_options() -> str:
    """Every option with its default and one-line help, as a printable table."""
    rows = [f"{name:26s} {default!r:12s} {text}" for name, (default, text) in Config.field_help().items()]
    rows += [f"{alias:26s} {'':12s} Inductor's name for {name}" for alias, name in ALIASES.items()]
    rows += [f"{key:26s} {'':12s} GraphNet config dict: {text}" for key, text in
             zip(GRAPHNET_KEYS, ("a preset's name", "{Inductor option name: value}, over every other setting"))]
    return "\n".join([f"{'option':26s} {'default':12s} help"] + rows)
