"""Benchmarking GEMM templates with their epilogues (max_autotune on a GPU): which tile
config runs the fused kernel fastest, and whether fusing pays at all.

Mirrors `Scheduler.speedup_by_fusion` (its `MultiTemplateBuffer` branch: every template
choice timed with the epilogue) and `benchmark_fused_nodes` in
`torch/_inductor/scheduler.py`. The autotuner (autotune.py, `select_gemm`) times the
bare templates, the product stored as it is; an epilogue changes the kernel. On an H100 the
exact GELU (erf) on the 128x128 float32 tile the bare table preferred (8 warps) took several
times as long as the bare template. So once the scheduler's groups are final, for each group
holding a template and an epilogue this pass

  1. generates the group's fused kernel once per template config (`fused_variants`): the
     configs of the bare table, fastest first, at most EPILOGUE_CHOICES of them, and only
     those whose bare time is under the unfused pair's (a fused kernel does the bare one's
     work and more);
  2. times each on random inputs (NaN in what it computes), and the unfused pair: the bare
     winner (its time from the bare table) then the epilogue as a kernel of its own;
  3. keeps the faster way: the template takes the best fused config, or, where even that is
     slower than the pair, the group is split in two (scheduling.py, `unfuse_template`: a
     fusion decision whose reason gives the times, in the report like any other).

The table is logged under `autotune` (`MINIINDUCTOR_LOGS=autotune`), and the verdict kept
in the on-disk autotune cache, keyed by the kernels' sources and the GPU's name.

Under Triton's interpreter nothing is timed (`timer_for` gives no timer) and the pass does
nothing: the template keeps the bare table's first config. `fused_variants` and
`kernel_arguments` are what a test runs there, every config of a fused kernel against eager.

Simplified: Inductor decides while fusing, pair by pair; we decide once per finished group.
A matmul whose bare ATen call won stays ATen (Inductor keeps every choice in a
`MultiTemplateBuffer` until fusion, so a fused template may still beat ATen + the epilogue).
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import time

import torch

from ...logs import get_logger
from ...scheduler import FusedGroup
from ...triton.runtime import AutotuneCache, benchmark, kernel_launchers, load_module, precompile_all
from ...virtualized import V
from .scheduling import is_template, unfuse_template
from .template import config_text

log = get_logger("autotune")
#: the most template configs timed with a group's epilogue: the fastest of the bare table
EPILOGUE_CHOICES = 6
#: the same for CUTLASS kernels, fewer: each fused variant is an nvcc build of its own
CUTLASS_EPILOGUE_CHOICES = 3


def timer_for(device: torch.device):
    """`timer(fn)` → ms per call of `fn` on `device`, or None where times mean nothing
    (the CPU: Triton's interpreter)."""
    return benchmark if device.type == "cuda" else None


@contextlib.contextmanager
def template_config(template, config: dict):
    """Inside the block the TemplateBuffer generates with `config` (its precision kept)."""
    saved = template.config
    template.config = {**config, "precision": saved["precision"]}
    try:
        yield
    finally:
        template.config = saved


def fused_variants(group, make_kernel, configs) -> list[tuple[dict, object]]:
    """[(config, GeneratedKernel)]: the group's fused kernel, `make_kernel(group)`, generated
    once per template config."""
    template = next(n for n in group.nodes if is_template(n)).node
    found = []
    for config in configs:
        with template_config(template, config):
            found.append((config, make_kernel(group)))
    return found


def kernel_arguments(kernel, given=None) -> list[torch.Tensor]:
    """A tensor per argument of `kernel`, laid out as its buffer: `given[name]` where given,
    else NaN in what the kernel computes (an element it forgets shows), random normal values
    in floating-point inputs, zeros in others (safe as indices)."""
    found = []
    for name in kernel.args:
        if given and name in given:
            found.append(given[name])
            continue
        layout = V.graph.get_buffer(name).layout
        storage = torch.zeros(layout.storage_numel(), device=layout.device, dtype=layout.dtype)
        if layout.dtype.is_floating_point:
            storage = storage.fill_(math.nan) if name in kernel.buffers else storage.normal_()
        found.append(storage.as_strided(layout.size, layout.stride, layout.offset))
    return found


def load_kernel(kernel, device: torch.device):
    """The module of a Triton GeneratedKernel, loaded as the wrapper loads it."""
    return load_module(kernel.source, interpret=device.type == "cpu")


def benchmark_epilogue_fusion(scheduler, make_kernel) -> int:
    """The pass (see the module docstring). `make_kernel(group, index, removed=None)` →
    the group's GeneratedKernel, numbered `index` (as generate_kernels will number it),
    `removed` its buffers kept in registers (default: as the schedule says). Returns how
    many groups it split."""
    timer = timer_for(V.graph.current_device())
    if timer is None:
        return 0
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    split, index = 0, 0
    for group in list(scheduler.schedule):
        if not isinstance(group, FusedGroup):
            continue
        if len(group.nodes) > 1 and any(map(is_template, group.nodes)):
            with unset_fake_temporarily():
                verdict = tune_group(group, make_kernel, index, timer)
            if verdict is not None:
                unfuse_template(scheduler, group, verdict)
                split += 1
                index += 1
        index += 1
    return split


def tune_group(group, make_kernel, index: int, timer) -> str | None:
    """Time one group's fused variants and its unfused pair; set the template's config to the
    fused winner and return None, or return why the group is better split."""
    template = next(n for n in group.nodes if is_template(n)).node
    device = template.get_device()
    winner = {k: v for k, v in template.config.items() if k != "precision"}
    table = sorted(template.timings, key=lambda t: t[0] or 0)   # (untimed: None, in order)
    # configs of the winner's kind only (a Triton template's epilogue may have no CUTLASS form)
    backend = lambda c: c.get("backend", "triton")  # noqa: E731
    configs = [c for _, c in table if c != "ATEN" and backend(c) == backend(winner)] or [winner]
    bare_ms = min((ms for ms, _ in table if ms is not None), default=None)
    choices = EPILOGUE_CHOICES if backend(winner) == "triton" else CUTLASS_EPILOGUE_CHOICES
    variants = fused_variants(group, functools.partial(make_kernel, index=index), configs[:choices])
    if any(kernel.size_args for _, kernel in variants):
        return None   # (symbolic sizes in the epilogue: the first config, fused, as before)
    alone = make_kernel(FusedGroup([n for n in group.nodes if is_template(n)]), index, removed=set())
    epilogue_nodes = [n for n in group.nodes if not is_template(n)]
    epilogue = make_kernel(FusedGroup(epilogue_nodes, group.R, []), index + 1,
                           removed=variants[0][1].removed & {n.get_name() for n in epilogue_nodes})
    sources = [k.source.replace(k.name, "KERNEL") for k in [alone, epilogue] + [k for _, k in variants]]
    cache = AutotuneCache(json.dumps(["epilogue", str(device), torch.cuda.get_device_name(device)
                                      if device.type == "cuda" else "", sources]))
    result = cache.get()
    if result is None:
        result = time_choices(variants, alone, epilogue, bare_ms, table, timer, device)
        cache.put(result)
    if result["fused"] is not None:
        template.config = {**result["fused"], "precision": template.config["precision"]}
        return None
    return (f"benchmarked: the fused kernel takes {result['fused_ms']:.4g} ms at best, the template alone "
            f"{result['template_ms']:.4g} ms + its epilogue as a kernel {result['epilogue_ms']:.4g} ms")


def time_choices(variants, alone, epilogue, bare_ms, table, timer, device) -> dict:
    """{"fused": the fastest fused config, or None where the unfused pair is faster; the times}."""
    start = time.perf_counter()
    kernels = [alone, epilogue] + [k for _, k in variants]
    modules = {k.name + k.source: load_kernel(k, device) for k in kernels}
    precompile_all([launcher for k in kernels for launcher in kernel_launchers(vars(modules[k.name + k.source]), k.name)],
                   device)

    def time_kernel(kernel) -> float:
        launch, args = getattr(modules[kernel.name + kernel.source], f"launch_{kernel.name}"), kernel_arguments(kernel)
        try:
            launch(*args)   # compiled, and its block sizes tuned (a pointwise kernel's, under max_autotune)
            return timer(lambda: launch(*args))
        except Exception as exc:  # noqa: BLE001 -- e.g. out of shared memory: not a choice
            log.debug("timing %s failed: %s", kernel.name, exc)
            return math.inf
    template_ms = bare_ms if bare_ms is not None else time_kernel(alone)
    epilogue_ms = time_kernel(epilogue)
    unfused = template_ms + epilogue_ms
    bare = {json.dumps(c, sort_keys=True): ms for ms, c in table if c != "ATEN"}
    rows = []   # (ms, config), in the bare table's order
    for config, kernel in variants:
        if (bare.get(json.dumps(config, sort_keys=True)) or 0) >= unfused:
            break   # (fastest first: no later config can win either)
        rows.append((time_kernel(kernel), config))
    best_ms, best = min(rows, key=lambda r: r[0], default=(math.inf, None))
    fused = best_ms < unfused
    top = min(best_ms, unfused)
    skipped = [f"  ({len(variants) - len(rows)} more configs not tried: bare, they already take longer than the "
               "unfused pair)"] if len(rows) < len(variants) else []
    log.info("AUTOTUNE %s (%s): the template with its epilogue\n%s\n  %s\nAUTOTUNE %s; benchmarking took %.2f s",
             variants[0][1].name.rsplit("_", 1)[0], variants[0][1].computes(),
             "\n".join([f"  fused {config_text(c):64s} {ms:.4f} ms {100 * top / ms:5.1f}%"
                        for ms, c in sorted(rows, key=lambda r: r[0])] + skipped),
             f"unfused: template alone {template_ms:.4f} ms + epilogue kernel {epilogue_ms:.4f} ms = {unfused:.4f} ms "
             f"{100 * top / unfused:5.1f}%",
             f"fused, with {config_text(best)}" if fused else "not fused: the template and its epilogue run apart",
             time.perf_counter() - start)
    return {"fused": best if fused else None, "fused_ms": best_ms, "template_ms": template_ms,
            "epilogue_ms": epilogue_ms}
