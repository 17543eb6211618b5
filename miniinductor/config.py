"""Compiler options: one frozen dataclass, passed explicitly to every phase.

Mirrors `torch/_inductor/config.py`, minus the module of mutable globals: a `Config` is
built once per `compile()` call (from keyword options) and handed down; nothing reads
global state. `Config.from_options({...})` rejects unknown names and lists close matches.
"""
from __future__ import annotations

import dataclasses
import difflib
import os


@dataclasses.dataclass(frozen=True)
class Config:
    cpu_backend: str = "cpp"
    "Code generator for CPU tensors: 'cpp' (C++/OpenMP) or 'triton' (run by Triton's interpreter)."
    cxx: str = dataclasses.field(default_factory=lambda: os.environ.get("CXX", "g++"))
    "C++ compiler to build CPU kernels with (default: $CXX or g++)."
    trace: str | None = None
    "Folder to write a trace of every compiled graph into (also: $MINIINDUCTOR_TRACE)."
    fallback_all: bool = False
    "Lower nothing: every op runs as an ATen call (for debugging a wrong result)."
    fusion: bool = True
    "Fuse nodes into shared kernels (off: one kernel per buffer, for teaching and debugging)."
    max_fusion_size: int = 64
    "The most nodes one fused kernel may hold."
    realize_reads_threshold: int = 4
    "A value used twice is stored (not recomputed) when its body reads more buffers than this."
    realize_opcount_threshold: int = 30
    "... or when its body runs more ops than this."
    parallel_min_numel: int = 32768
    "Loops with fewer elements than this run on one thread (OpenMP start-up costs ~µs)."

    @classmethod
    def from_options(cls, options: dict | None = None) -> "Config":
        options = dict(options or {})
        names = [f.name for f in dataclasses.fields(cls)]
        for key in options:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ValueError(f"unknown miniinductor option {key!r}{hint} Valid options: {', '.join(names)}")
        config = cls(**options)
        if config.cpu_backend not in ("cpp", "triton"):
            raise ValueError(f"cpu_backend must be one of 'cpp', 'triton'; got {config.cpu_backend!r}")
        return config
