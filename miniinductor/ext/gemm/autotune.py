"""The GEMM autotuner: which tile config of the template (template.py) computes a matmul,
or ATen.

Mirrors `torch/_inductor/kernel/mm.py` (`mm_configs`), `select_algorithm.py`
(`autotune_select_algorithm` and the "AUTOTUNE mm(...)" table) and
`runtime/coordinate_descent_tuner.py` in small. `select_gemm` (called by lowering.py,
`gemm_template`): on the GPU, ATen and each template config are timed on random operands of
the real shapes and strides, optionally followed by a coordinate descent from the fastest
config; the table is logged under `autotune` and the winner kept on disk
(triton/runtime.py, `AutotuneCache`). Under the interpreter nothing is timed: the
first template config is taken. These are the bare templates; once fused, a template is
timed again with its epilogue, per config, and kept apart from it where that is faster
(epilogue_tuning.py). `prefetch_gemm` starts a matmul's compiles ahead of lowering.

Leaves out: Inductor's `MultiTemplateBuffer` (every choice kept until fusion; here the bare
winner is fixed at lowering) and split-K configs.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import time

import torch

from ...codegen.common import IndentedBuffer
from ...ir.nodes import Layout
from ...logs import get_logger
from ...triton.overrides import TRITON_TYPE
from ...triton.runtime import (
    AutotuneCache,
    Launcher,
    benchmark,
    cdiv,
    load_module,
    next_power_of_2,
    precompile_all,
    set_tma_allocator,
)
from .cutlass import bare_library, configs_for, time_cutlass
from .template import Gemm, config_text, gemm_source, grid, launch_meta

log = get_logger("autotune")
#: the tile configurations tried (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), first
#: the one taken untimed; a subset of Inductor's mm_configs
GEMM_CONFIGS = [(64, 64, 32, 4, 4), (128, 128, 32, 4, 3), (128, 128, 64, 8, 3), (64, 128, 32, 4, 4),
                (128, 64, 32, 4, 4), (128, 256, 64, 8, 3), (32, 32, 32, 2, 2)]
GROUP_M = 8
#: the largest BLOCK_M * BLOCK_N tried for an IEEE float32 dot: on an H100 the 128x256 tile
#: came last of the choices in every float32 GEMM of the GPT-2 block, far behind the winner,
#: and was the slowest to compile (docs/benchmarks_gpu.md, 2026-11-26 later)
FMA_MAX_TILE = 128 * 128


def gemm_configs(g: Gemm, persistent: str | None = None, programs: int = 0, fma: bool = False) -> list[dict]:
    """GEMM_CONFIGS with blocks shrunk to the problem (at least 16: tl.dot's minimum),
    deduplicated. `persistent` ("tma" or "plain"): the persistent form of each, `programs`
    programs looping over the tiles (one per SM on a GPU). `fma` (an IEEE float32 dot, which
    runs on the FMA units, not tensor cores): without tiles over FMA_MAX_TILE elements."""
    found = []
    for bm, bn, bk, warps, stages in GEMM_CONFIGS:
        if fma and bm * bn > FMA_MAX_TILE:
            continue
        config = {"BLOCK_M": min(bm, max(16, next_power_of_2(g.M))), "BLOCK_N": min(bn, max(16, next_power_of_2(g.N))),
                  "BLOCK_K": min(bk, max(16, next_power_of_2(g.K))), "GROUP_M": GROUP_M,
                  "num_warps": warps, "num_stages": stages}
        if persistent:
            tiles = cdiv(g.M, config["BLOCK_M"]) * cdiv(g.N, config["BLOCK_N"])
            config |= {"persistent": persistent, "programs": min(programs, tiles)}
        if config not in found:
            found.append(config)
    return found


def bare_template_module(g: Gemm, config: dict, precision: str, interpret: bool):
    """The template alone (its tile stored as is): what the autotuner times."""
    code = IndentedBuffer()
    code.writelines(["import triton", "import triton.language as tl", "", "",
                     "@triton.jit", "def gemm(in_ptr0, in_ptr1, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):"])
    with code.indent():
        code.writelines(gemm_source(g, config, precision, interpret, "in_ptr0", "in_ptr1"))
        code.writeline(("    " if config.get("persistent") else "")
                       + f"tl.store(out_ptr0 + ({g.N} * xindex + rindex), acc.to({TRITON_TYPE[g.dtype]}), xmask & rmask)")
    return load_module(code.getvalue() + "\n", "gemm")


def _operand_tensor(layout: Layout) -> torch.Tensor:
    storage = torch.randn(layout.storage_numel(), device=layout.device, dtype=torch.float32).to(layout.dtype)
    return storage.as_strided(layout.size, layout.stride, layout.offset)


@dataclasses.dataclass
class GemmSelection:
    """The autotuner's answer: the winning template config (None: ATen) and the table it came
    from, `[ms, choice]` pairs fastest first (a choice is a config or "ATEN"; ms None where
    nothing was timed: every config, in order). The epilogue benchmark starts from the table
    (epilogue_tuning.py)."""
    config: dict | None
    timings: list


def template_configs(g: Gemm, backends: tuple, precision: str, device: torch.device,
                     persistent: str | None = None) -> list[dict]:
    """The template configs the autotuner times for `g` ([] unless TRITON is a backend)."""
    if "TRITON" not in backends:
        return []
    programs = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    fma = g.dtype == torch.float32 and precision == "ieee"
    return (gemm_configs(g, persistent, programs, fma) if persistent else []) + gemm_configs(g, fma=fma)


def bare_launchers(g: Gemm, configs, precision: str) -> list[Launcher]:
    """A `Launcher` of the bare template per config (what `precompile_all` compiles)."""
    return [Launcher(bare_template_module(g, c, precision, False).gemm, grid(g, c), (g.dtype,) * 3, **launch_meta(c))
            for c in configs]


def prefetch_gemm(g: Gemm, backends: tuple, precision: str, device: torch.device):
    """Start compiling `g`'s template configs in the compile threads and return at once:
    lowering then goes on, and `select_gemm`, when it reaches this matmul, waits for these
    compiles instead of starting its own. Inductor gets the same overlap by compiling every
    matmul's choices before any is timed (`MultiTemplateBuffer`)."""
    precompile_all(bare_launchers(g, template_configs(g, backends, precision, device), precision), device, wait=False)


def select_gemm(g: Gemm, layouts, backends: tuple, precision: str, device: torch.device,
                descend: bool = False, persistent: str | None = None) -> GemmSelection:
    """The autotuner: the winning template config (None: ATen) and its table. Choices: ATen (when
    in `backends`) and `gemm_configs(g)` (when TRITON is), and before those, with
    `persistent` ("tma" or "plain"), the persistent form of each. On the GPU each is timed on
    random operands of the real shapes and strides, then (`descend`: the option
    coordinate_descent_tuning) `coordinate_descent` walks from the fastest template config;
    the table is logged (`autotune`) and the winner kept in the on-disk cache under
    (problem, device, precision, backends, descent). Under the interpreter nothing is timed:
    the first template config is taken."""
    configs = template_configs(g, backends, precision, device, persistent)
    cutlass = configs_for(g, backends, precision, device)   # [] unless asked for and buildable here
    if not configs and not cutlass:
        return GemmSelection(None, [])
    if persistent == "tma" and device.type == "cuda":
        set_tma_allocator()
    if device.type != "cuda":
        log.info("AUTOTUNE %s on the CPU (Triton's interpreter): timings mean nothing there, so nothing is "
                 "timed%s; took the first template config (%s)", g, " (nor coordinate descent)" * descend,
                 config_text(configs[0]))
        return GemmSelection(configs[0], [[None, c] for c in configs])
    cache = AutotuneCache(json.dumps([str(g), g.a_stride, g.b_stride, g.a_offset, g.b_offset,
                                      torch.cuda.get_device_name(device), precision, backends, configs, cutlass,
                                      descend]))
    if (winner := cache.get()) is not None:
        return GemmSelection(None if winner == "ATEN" else winner, cache.timings())
    start = time.perf_counter()
    timings, compile_s = _time_choices(g, layouts, configs, backends, precision, device, descend, cutlass)
    ranked = sorted((ms, name, choice) for name, (ms, choice) in timings.items() if ms < math.inf)
    if not ranked:
        raise RuntimeError(f"max_autotune: no choice for {g} could run (backends {','.join(backends)})")
    best = ranked[0][0]
    log.info("AUTOTUNE %s\n%s\nAUTOTUNE compiling and benchmarking took %.2f s (compiling %.2f s)", g,
             "\n".join(f"  {name:70s} {ms:.4f} ms {100 * best / ms:5.1f}%" for ms, name, _ in ranked),
             time.perf_counter() - start, compile_s)
    table = [[ms, choice] for ms, _, choice in ranked]
    cache.put(ranked[0][2], table)
    return GemmSelection(None if ranked[0][2] == "ATEN" else ranked[0][2], table)


def _time_choices(g: Gemm, layouts, configs, backends: tuple, precision: str, device: torch.device,
                  descend: bool, cutlass=()) -> tuple[dict, float]:
    """`select_gemm`'s timing on the GPU: ({name: (ms, config or "ATEN")}, ms inf where a config
    could not run; the seconds the configs' compiles took). Random operands of the real shapes
    and strides; every config compiled first, then timed; ATen before and after them; the
    `cutlass` configs (cutlass/choices.py) after the templates."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    timings = {}   # name → (ms, config or "ATEN")
    libraries = [bare_library(g, c) for c in cutlass]   # nvcc starts now, beside the Triton compiles
    with unset_fake_temporarily():
        a, b = (_operand_tensor(layout) for layout in layouts)
        out = torch.empty((g.B, g.M, g.N) if g.op == "bmm" else (g.M, g.N), device=device, dtype=g.dtype)

        def time_config(config) -> float:
            name = f"triton_{g.op} {config_text(config)}"
            if name not in timings:
                try:
                    kernel = bare_template_module(g, config, precision, False).gemm
                    timings[name] = (benchmark(lambda: kernel[grid(g, config)](a, b, out, **launch_meta(config))),
                                     config)
                except Exception as exc:  # noqa: BLE001 -- e.g. out of shared memory: not a choice
                    logging.getLogger("miniinductor").debug("GEMM config %s failed: %s", config, exc)
                    timings[name] = (math.inf, config)
            return timings[name][0]
        # every config compiled at once, in threads (ptxas and LLVM run outside the GIL), before any is timed
        compile_s = precompile_all(bare_launchers(g, configs, precision), device)
        aten = torch.bmm if g.op == "bmm" else torch.mm
        run_aten = lambda: aten(a, b, out=out)  # noqa: E731
        aten_ms = benchmark(run_aten) if "ATEN" in backends else None
        first = min(configs, key=time_config) if configs else None
        if descend and first is not None and time_config(first) < math.inf:
            coordinate_descent(time_config, first, g)
        if cutlass:
            start = time.perf_counter()
            timings |= time_cutlass(g, list(cutlass), libraries, a, b, out, benchmark)
            compile_s += time.perf_counter() - start
        # ATen timed again after the configs, the better of the two kept: timed once, first, right
        # after the configs' compiles, bfloat16 4096x4096x1024 read slower on an H100 than on
        # its own (and again when timed last), and the template won where cuBLAS is faster
        if aten_ms is not None:
            timings[f"aten.{g.op}"] = (min(aten_ms, benchmark(run_aten)), "ATEN")
    return timings, compile_s


#: what coordinate descent varies, and within which bounds
COORDINATES = {"BLOCK_M": (16, 256), "BLOCK_N": (16, 256), "BLOCK_K": (16, 128), "num_warps": (1, 16),
               "num_stages": (1, 6)}


def coordinate_descent(time_config, config: dict, g: Gemm, threshold: float = 0.01) -> dict:
    """Inductor's coordinate descent (`runtime/coordinate_descent_tuner.py`), on a template's
    tile: from `config`, try each coordinate doubled and halved (blocks no larger than the
    problem needs); move to the first neighbour faster by more than `threshold`, and repeat
    until no neighbour is. `time_config(config)` → ms (inf where it cannot run)."""
    caps = {"BLOCK_M": max(16, next_power_of_2(g.M)), "BLOCK_N": max(16, next_power_of_2(g.N)),
            "BLOCK_K": max(16, next_power_of_2(g.K))}
    best, best_ms = config, time_config(config)
    moved = True
    while moved:
        moved = False
        for field, (low, high) in COORDINATES.items():
            for value in (best[field] * 2, best[field] // 2):
                if not low <= value <= min(high, caps.get(field, high)):
                    continue
                candidate = dict(best, **{field: value})
                ms = time_config(candidate)
                if ms < best_ms * (1 - threshold):
                    best, best_ms, moved = candidate, ms, True
    return best
