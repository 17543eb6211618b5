"""Compiler options: one frozen `Config`, passed explicitly to every phase.

Mirrors `torch/_inductor/config.py`, minus the module of mutable globals: a `Config` is
built once per `compile()` call and handed down. Each option is an `Option` of `OPTIONS`:
the core's below, each extension's declared by it (`declare_extension`). `Config.build` takes
explicit options over top-level flags (`mode`, `freezing=`, `autocast_enabled=`...)
over a named preset (`PRESETS`) over the defaults, accepts Inductor's spellings (`ALIASES`)
and GraphNet-style dicts, and rejects unknown names and bad values at once. Where a value comes from, with
examples: docs/design_notes.md.
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import numbers
import os

import torch

log = logging.getLogger("miniinductor")

#: what each torch.compile mode sets (as in `torch._inductor.list_mode_options()`): the
#: extensions add their options to them (cudagraphs to reduce-overhead, ...)
MODES = {"default": {}, "reduce-overhead": {}, "max-autotune": {}, "max-autotune-no-cudagraphs": {}}
#: named groups of options (GraphNet's config templates among them); extensions add theirs
PRESETS = {
    "aten": {"fallback_all": True},
    "no_fusion": {"fusion": False},
    "triton": {"cpu_backend": "triton"},   # Triton kernels only (gemm: its templates too)
    "core": {"extensions": ()},            # the core path alone: every extension off
}
#: Inductor's spellings of our options (`torch._inductor.config`), accepted as the same
ALIASES: dict[str, str] = {}
#: keys of a GraphNet-style config dict that are not option names: template → a preset,
#: inductor_config → explicit options (`mode` and `freezing` are read as usual)
GRAPHNET_KEYS = ("template", "inductor_config")
#: always on: the core path and the backends (the C++ one is core; Triton is its peer)
BUILT_IN = ("core", "triton")
_KINDS = {bool: "True or False", int: "an int", str: "a str", tuple: "a tuple of str"}


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: its kind (bool, int, str or tuple of str), default (a function of nothing
    where the environment decides it), one line of help, and what values it takes."""
    name: str
    kind: type
    default: object
    help: str
    extension: str = "core"
    choices: tuple | None = None      # a str option's values
    minimum: int | None = None        # an int option's least value
    optional: bool = False            # None is a value too
    convert: object = None            # convert(value) -> the value stored, for other spellings

    def default_value(self):
        return self.default() if callable(self.default) else self.default

    def normalize(self, value):
        """A value as the option stores it: a numpy int → int, a path → str, a list → tuple."""
        if self.convert is not None:
            value = self.convert(value)
        if self.kind is int and isinstance(value, numbers.Integral) and not isinstance(value, (int, bool)):
            return int(value)
        if self.kind is str and isinstance(value, os.PathLike):
            return os.fspath(value)
        return tuple(value) if self.kind is tuple and isinstance(value, (list, set)) else value

    def check(self, value):
        """ValueError naming the option unless `value` is one it takes."""
        if value is None and self.optional:
            return
        ok = isinstance(value, self.kind) and not (self.kind is int and isinstance(value, bool))
        if ok and self.kind is int:
            ok = value >= self.minimum
        if ok and self.choices is not None:
            ok = all(v in self.choices for v in (value if self.kind is tuple else (value,)))
        if ok and self.kind is tuple:
            ok = all(isinstance(v, str) for v in value)
        if not ok:
            raise ValueError(f"option {self.name}={value!r}: expected {self.describe()}")

    def describe(self) -> str:
        """What the option takes, in words: "an int >= 1", "one of 'cpp', 'triton'"."""
        if self.kind is int:
            words = f"an int >= {self.minimum}"
        elif self.choices is not None:
            words = ("a tuple of " if self.kind is tuple else "") + f"one of {', '.join(map(repr, self.choices))}"
        else:
            words = _KINDS[self.kind]
        return words + (" or None" if self.optional else "")


#: every option by name: the core's first, then each extension's as it is declared
OPTIONS: dict[str, Option] = {}
#: extension name → (one-line description, its options' names)
EXTENSIONS: dict[str, tuple[str, tuple[str, ...]]] = {}
#: an extension's checks of its options' values together, `check(config)` raising ValueError
OPTION_CHECKS: list = []
#: [(extension, note(config))]: info lines about what `config` asks of an extension in use
#: that is accepted but not built (log_unavailable_features)
FEATURE_NOTES: list = []


def declare(*options: Option):
    for option in options:
        assert option.name not in OPTIONS, f"option {option.name} declared twice"
        OPTIONS[option.name] = option


def declare_extension(name: str, doc: str, options: tuple[Option, ...] = (), presets: dict | None = None,
                      modes: dict | None = None, aliases: dict | None = None):
    """Make `name` a valid entry of `Config.extensions`, with the options only it reads, its
    presets, what it adds to torch.compile's modes and Inductor's names of its options."""
    declare(*(dataclasses.replace(o, extension=name) for o in options))
    EXTENSIONS[name] = (doc, tuple(o.name for o in options))
    for preset, values in (presets or {}).items():
        PRESETS.setdefault(preset, {}).update(values)
    for mode, values in (modes or {}).items():
        MODES[mode].update(values)
    ALIASES.update(aliases or {})


def _op_names(ops):
    """fallback_ops as given (an op, its name, or several) → a tuple of names, as str(op)."""
    if isinstance(ops, (str, torch._ops.OpOverload)):
        ops = [ops]
    if isinstance(ops, (list, tuple, set)):
        return tuple(str(op) if isinstance(op, torch._ops.OpOverload) else op for op in ops)
    return ops


def _dtype_name(dtype):
    """autocast_dtype given as torch.bfloat16 → "bfloat16"."""
    return str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else dtype


declare(
    Option("cpu_backend", str, "cpp", "Code generator for CPU tensors: 'cpp' (C++/OpenMP) or 'triton' (run by "
           "Triton's interpreter).", choices=("cpp", "triton")),
    Option("cxx", str, lambda: os.environ.get("CXX", "g++"), "C++ compiler to build CPU kernels with (default: $CXX "
           "or g++)."),
    Option("trace", str, lambda: os.environ.get("MINIINDUCTOR_TRACE") or None, "Folder to write a trace of every "
           "compiled graph into (default: $MINIINDUCTOR_TRACE).", optional=True),
    Option("pass_snapshots", bool, False, "Print each stage's object before and after every pass (the report's "
           "pass viewer; slows compiling)."),
    Option("fallback_all", bool, False, "Lower nothing: every op runs as an ATen call (for debugging a wrong "
           "result)."),
    Option("fallback_ops", tuple, (), "ATen ops (as str(op), e.g. 'aten.add.Tensor') that run as ATen calls (for "
           "confirming a suspicious lowering).", convert=_op_names),
    Option("fusion", bool, True, "Fuse nodes into shared kernels (off: one kernel per buffer, for teaching and "
           "debugging)."),
    Option("max_fusion_size", int, 64, "The most nodes one fused kernel may hold.", minimum=1),
    Option("realize_reads_threshold", int, 4, "A value used twice is stored (not recomputed) when its body reads "
           "more buffers than this.", minimum=0),
    Option("realize_opcount_threshold", int, 30, "... or when its body runs more ops than this.", minimum=0),
    Option("parallel_min_numel", int, 32768, "Loops with fewer elements than this run on one thread (an OpenMP "
           "region costs more than they take).", minimum=0),
    Option("autocast_enabled", bool, False, "Compile as if run under torch.autocast on the inputs' device, with "
           "dtype autocast_dtype."),
    Option("autocast_dtype", str, "bfloat16", "The low-precision dtype of autocast_enabled: 'bfloat16' or "
           "'float16'.", choices=("bfloat16", "float16"), convert=_dtype_name),
    Option("extensions", tuple, None, "The extensions (miniinductor/ext/) that run: None, every one; () the core "
           "path alone (python -m miniinductor passes lists them).", optional=True),
)


class Config:
    """Every option's value, frozen: `config.fusion`, `config.max_autotune` (an extension's),
    compared and hashed by value. `Config(**options)` checks each value; `replace` makes a
    changed copy."""
    __slots__ = ("_values",)

    def __init__(self, **options):
        unknown = [name for name in options if name not in OPTIONS]
        if unknown:
            raise TypeError(f"Config got unknown options {', '.join(unknown)}")
        values = {name: o.normalize(options[name]) if name in options else o.default_value()
                  for name, o in OPTIONS.items()}
        object.__setattr__(self, "_values", values)
        for name, value in values.items():
            OPTIONS[name].check(value)
        for check in OPTION_CHECKS:
            check(self)
        bad = [e for e in self.extensions or () if e not in EXTENSIONS]
        if bad:
            raise ValueError(f"option extensions lists {', '.join(map(repr, bad))}: valid extensions are "
                             f"{', '.join(EXTENSIONS) or '(none registered)'}")

    def __getattr__(self, name):
        try:
            return object.__getattribute__(self, "_values")[name]
        except KeyError:
            raise AttributeError(f"Config has no option {name!r}") from None

    def __setattr__(self, name, value):
        raise dataclasses.FrozenInstanceError(f"cannot assign to option {name!r}: use config.replace({name}=...)")

    def __eq__(self, other):
        return isinstance(other, Config) and self._values == other._values

    def __hash__(self):
        return hash(tuple(self._values.items()))

    def __repr__(self):
        return f"Config({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def __reduce__(self):
        return _rebuild, (self._values,)

    def replace(self, **changes) -> "Config":
        return Config(**{**self._values, **changes})

    def as_dict(self) -> dict:
        return dict(self._values)

    def uses(self, extension: str) -> bool:
        """Whether passes and tables of `extension` take part ("core" and "triton" always do)."""
        return extension in BUILT_IN or self.extensions is None or extension in self.extensions

    @classmethod
    def field_help(cls) -> dict[str, tuple[object, str]]:
        """name → (default, one-line help)."""
        return {name: (o.default_value(), o.help) for name, o in OPTIONS.items()}

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

    @classmethod
    def from_options(cls, options: dict | None = None) -> "Config":
        options = _resolve_aliases(options)
        names = list(OPTIONS)
        for key in options:
            if key not in names:
                close = difflib.get_close_matches(key, names + list(ALIASES), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ValueError(f"unknown miniinductor option {key!r}{hint} Valid options: {', '.join(names + list(ALIASES))}")
        return cls(**options)   # each value converted and checked


def _rebuild(values: dict) -> Config:
    return Config(**values)


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


def log_unavailable_features(config: Config):
    """One info line for each Inductor feature `config` asks for that is accepted but not built,
    and for each option set away from its default whose extension is off."""
    for name, (_, options) in EXTENSIONS.items():
        changed = [o for o in options if getattr(config, o) != OPTIONS[o].default_value()]
        if changed and not config.uses(name):
            log.info("option %s ignored: extension %s is off (extensions=%s)", ", ".join(changed), name,
                     list(config.extensions))
    for extension, note in FEATURE_NOTES:
        if config.uses(extension):
            note(config)


def _lookup(kind, name, table):
    if name not in table:
        close = difflib.get_close_matches(name, table, n=2)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        raise ValueError(f"unknown {kind} {name!r}{hint}; valid: {', '.join(table)}")
    return table[name]


def list_mode_options(mode: str | None = None) -> dict:
    """What each mode sets (or one mode's settings), like torch._inductor.list_mode_options."""
    return {k: dict(v) for k, v in MODES.items()} if mode is None else dict(_lookup("mode", mode, MODES))


def list_options() -> str:
    """Every option with its default and one-line help, as a printable table."""
    rows = [f"{name:26s} {default!r:12s} {text}" for name, (default, text) in Config.field_help().items()]
    rows += [f"{alias:26s} {'':12s} Inductor's name for {name}" for alias, name in ALIASES.items()]
    rows += [f"{key:26s} {'':12s} GraphNet config dict: {text}" for key, text in
             zip(GRAPHNET_KEYS, ("a preset's name", "{Inductor option name: value}, over every other setting"))]
    return "\n".join([f"{'option':26s} {'default':12s} help"] + rows)
