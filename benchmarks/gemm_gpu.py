"""GEMM templates on the GPU: eager vs miniinductor max-autotune vs Inductor max-autotune.

    python benchmarks/gemm_gpu.py [--mode max-autotune-no-cudagraphs] [--out gemm.json]
    python benchmarks/gemm_gpu.py --smoke        # CPU, tiny sizes, Triton's interpreter
    python benchmarks/gemm_gpu.py --only MLP --tma   # the MLPs, with persistent/TMA templates too
    MINIINDUCTOR_LOGS=autotune python benchmarks/gemm_gpu.py --only MLP --profile
                                                     # + GPU ms of each kernel, and the autotune tables
    python benchmarks/gemm_gpu.py --only MLP --options '{"coordinate_descent_tuning": true}'
    python benchmarks/gemm_gpu.py --only fwd+bwd --backends ours    # one backend a run (a long cold compile)
    python benchmarks/gemm_gpu.py --only MLP --triton-fp32 tf32x3   # TRITON-only float32 dots as three TF32 products
    python benchmarks/gemm_gpu.py --only MLP --tf32 --backends ours --profile \
        --options '{"max_autotune_gemm_backends": "CUTLASS"}'    # CUTLASS kernels only (nvcc, nvidia-cutlass)
    python benchmarks/gemm_gpu.py --only fwd+bwd --tf32 --backends ours,inductor --profile
                                                     # the training step with TF32 matmuls, both compilers' kernels

Workloads: an MLP on a 4096x1024 batch (Linear 1024->4096, GELU, Linear 4096->1024) in
float32 and bfloat16, a GPT-2 block forward (B=8, T=512, d=768) and a GPT-2 block training
step (forward, then the backward of the output's sum; B=8, T=256). For each: GPU ms per
call (median of `triton.testing.do_bench`) for eager (cuBLAS), ours and Inductor in the
same `--mode`, and each compiler's first call in seconds (compile and autotuning
included, cold caches: fresh cache folders per process). Then ours with
`max_autotune_gemm_backends="TRITON"`: every matmul from a template (the table says how
many ATen matmuls are left: 0 expected) against eager's cuBLAS.

`--profile` adds, per workload, each kernel's GPU time per call (torch.profiler) for eager
and for ours in both settings: the template kernels with their fused epilogues (or, where the
epilogue benchmark split them, the bare templates and the epilogue kernels) beside cuBLAS's.
The autotuner's tables are printed with MINIINDUCTOR_LOGS=autotune. `--smoke` runs the
same code on the CPU at tiny sizes (cpu_backend="triton" under TRITON_INTERPRET=1,
wall-clock timing, no Inductor) to check that the script works, not to measure anything.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MINIINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mi_cache_"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind_cache_"))
if "--smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
from torch import nn  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.compile_fx import collect_compiled  # noqa: E402
from miniinductor.tools.models import GPT2Block  # noqa: E402

ATEN_MATMULS = ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten._addmm_activation.")


def mlp(width: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))


def forward(fn, x):
    with torch.no_grad():
        return fn(x)


def train_step(fn, x):
    out = fn(x)
    out.sum().backward()
    return out


def workloads(smoke: bool) -> dict:
    """{name: (module, input, step)}, on the GPU (or tiny, on the CPU, with --smoke); `step(fn, x)`
    runs one call (forward under no_grad, or a training step) and returns the output."""
    torch.manual_seed(0)
    device = "cpu" if smoke else "cuda"
    batch, width, hidden = (40, 24, 48) if smoke else (4096, 1024, 4096)
    found = {}
    for dtype in (torch.float32, torch.bfloat16):
        name = f"MLP {batch}x{width} {str(dtype).removeprefix('torch.')}"
        found[name] = (mlp(width, hidden).to(device, dtype).eval(), torch.randn(batch, width, device=device, dtype=dtype),
                       forward)
    b, t, d, heads = (1, 8, 16, 2) if smoke else (8, 512, 768, 12)
    found[f"GPT-2 block fwd B{b} T{t} d{d}"] = (GPT2Block(d, heads).to(device).eval(), torch.randn(b, t, d, device=device),
                                               forward)
    t = t // 2
    found[f"GPT-2 block fwd+bwd B{b} T{t} d{d}"] = (GPT2Block(d, heads).to(device), torch.randn(b, t, d, device=device),
                                                   train_step)
    return found


def time_ms(fn, x, smoke: bool, step=forward) -> float:
    if smoke:
        start = time.perf_counter()   # one interpreted call: the smoke run only checks that it runs
        step(fn, x)
        return (time.perf_counter() - start) * 1e3
    from triton.testing import do_bench
    return do_bench(lambda: step(fn, x), warmup=25, rep=200)


def kernel_times(fn, x, smoke: bool, step=forward, calls: int = 10) -> dict:
    """{kernel: ms per call of fn(x)} from torch.profiler, slowest first: the GPU's kernels
    (a Triton kernel under its name, cuBLAS's under theirs); with --smoke the CPU's ops
    (interpreted kernels show as the torch ops they run), to check that the code runs."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    step(fn, x)
    with profile(activities=[ProfilerActivity.CPU if smoke else ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step(fn, x)
        if not smoke:
            torch.cuda.synchronize()
    times = {e.key: (e.self_cpu_time_total if smoke else e.self_device_time_total) / calls / 1e3
             for e in prof.key_averages() if smoke or e.device_type == DeviceType.CUDA}
    return dict(sorted(((k, ms) for k, ms in times.items() if ms > 0), key=lambda kv: -kv[1])[:12])


def short_name(kernel: str) -> str:
    """A profile's kernel name, shortened; a CUTLASS kernel's (a mangled name of thousands of
    characters) to the epilogue functors it names (`mi_epilogue_add_erf_mul_0`: a fused GELU)."""
    if "cutlass" not in kernel or "GemmUniversal" not in kernel:
        return kernel[:100]
    # a mangled identifier is its length, then its characters
    functors = sorted({m.group(2)[:int(m.group(1))] for m in re.finditer(r"(\d+)(mi_epilogue\w+)", kernel)})
    return f"CUTLASS GemmUniversal, epilogue {' '.join(functors) or '(the product alone)'}"


def kernel_kinds(graphs) -> dict:
    """How many matmuls the compiled graphs left to ATen, and how many kernels are Triton
    templates and CUTLASS GEMMs."""
    sources = [g.wrapper_source for g in graphs]
    return {"aten_matmuls": sum(s.count(op) for s in sources for op in ATEN_MATMULS),
            "triton_templates": sum(name.startswith("triton_tem") for g in graphs for name in g.kernels),
            "cutlass_gemms": sum(name.startswith("cutlass") for g in graphs for name in g.kernels)}


def print_kernel_times(row: dict):
    for label in ("eager", "ours", "inductor", "triton_only", "tma"):
        if f"{label}_profile" in row:
            print(f"  {row['workload']}, {label}: ms per call of each kernel")
            print("\n".join(f"    {ms:9.4f}  {short_name(name)}" for name, ms in row[f"{label}_profile"].items()),
                  flush=True)


def first_call(make, x, smoke: bool, reference=None, step=forward):
    """(the compiled function, seconds its first call took, the graphs we compiled). With
    `reference` (eager's output), the first call's output must match it: relative error
    (max |out - ref| / max |ref|) under 2e-2 (bfloat16 rounds to 8 bits; float32 in IEEE
    or TF32 sums in other orders) -- a wrong kernel is an error of order 1."""
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        fn = make()
        if not smoke:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = step(fn, x)
        if not smoke:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    if reference is not None:
        err = ((out.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
        assert err < 2e-2, f"compiled output differs from eager: relative error {err:.2e}"
    return fn, seconds, graphs


def run(smoke: bool, mode: str, only: str = "", tma: bool = False, profile: bool = False,
        options: dict | None = None, backends=("ours", "inductor", "triton_only"), triton_fp32: str = "ieee") -> list[dict]:
    ours_options = {**({"cpu_backend": "triton"} if smoke else {}), **(options or {})}
    rows = []
    for name, (module, x, step) in workloads(smoke).items():
        if only and only.lower() not in name.lower():
            continue
        row = {"workload": name, "eager_ms": time_ms(module, x, smoke, step)}
        if profile:
            row["eager_profile"] = kernel_times(module, x, smoke, step)
        reference = step(module, x).detach()
        if "ours" in backends:
            ours, row["ours_compile_s"], graphs = first_call(lambda: miniinductor.compile(module, mode=mode, **ours_options),
                                                        x, smoke, reference, step)
            row["ours_ms"] = time_ms(ours, x, smoke, step)
            row["ours_kernels"] = kernel_kinds(graphs)
            if profile:
                row["ours_profile"] = kernel_times(ours, x, smoke, step)
        if not smoke and "inductor" in backends:
            inductor, row["inductor_compile_s"], _ = first_call(lambda: torch.compile(module, mode=mode), x, smoke,
                                                                step=step)
            row["inductor_ms"] = time_ms(inductor, x, smoke, step)
            if profile:
                row["inductor_profile"] = kernel_times(inductor, x, smoke, step)
        if "triton_only" in backends:
            triton_only, _, graphs = first_call(lambda: miniinductor.compile(
                module, mode=mode, max_autotune_gemm_backends="TRITON", gemm_fp32_precision=triton_fp32, **ours_options),
                x, smoke, reference, step)
            row["triton_only_ms"] = time_ms(triton_only, x, smoke, step)
            if profile:
                row["triton_only_profile"] = kernel_times(triton_only, x, smoke, step)
            row["aten_matmuls_left"] = sum(g.wrapper_source.count(op) for g in graphs for op in ATEN_MATMULS)
        if tma:   # every matmul from a template, persistent ones (TMA on 9.0+) among the choices
            tma_fn, _, graphs = first_call(lambda: miniinductor.compile(
                module, mode=mode, max_autotune_gemm_backends="TRITON", enable_persistent_tma_matmul=True,
                **ours_options), x, smoke, reference, step)
            row["tma_ms"] = time_ms(tma_fn, x, smoke, step)
            if profile:
                row["tma_profile"] = kernel_times(tma_fn, x, smoke, step)
            sources = "".join(k.source for g in graphs for k in g.kernels.values())
            row["tma_kernels"] = sources.count("tl.make_tensor_descriptor") // 2
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_profile")}), flush=True)
        print_kernel_times(row)
    return rows


def markdown(rows: list[dict], device: str, mode: str) -> str:
    lines = [f"GEMM templates, {device}, mode {mode!r}; ms per call (speed-up over eager); compile: first call, s", "",
             "| workload | eager | ours | Inductor | ours/Inductor | compile ours | compile Inductor "
             "| TRITON only | cuBLAS/TRITON | ATen matmuls left | TRITON + persistent/TMA | TMA kernels |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        eager, ours, ind, only = r["eager_ms"], r.get("ours_ms"), r.get("inductor_ms"), r.get("triton_only_ms")
        timed = lambda ms: f"{ms:.3f} ({eager / ms:.2f}x)" if ms else "-"  # noqa: E731
        versus = f"{ind / ours:.2f}x" if ind and ours else "-"
        seconds = lambda key: f"{r[key]:.1f}" if key in r else "-"  # noqa: E731
        lines.append(f"| {r['workload']} | {eager:.3f} | {timed(ours)} | {timed(ind)} | {versus} "
                     f"| {seconds('ours_compile_s')} | {seconds('inductor_compile_s')} "
                     f"| {f'{only:.3f}' if only else '-'} | {f'{eager / only:.2f}x' if only else '-'} "
                     f"| {r.get('aten_matmuls_left', '-')} "
                     + (f"| {r['tma_ms']:.3f} ({eager / r['tma_ms']:.2f}x) | {r['tma_kernels']} |" if "tma_ms" in r
                        else "| - | - |"))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes, Triton's interpreter: does it run?")
    parser.add_argument("--mode", default="max-autotune-no-cudagraphs",
                        help="torch.compile mode for both compilers (default: max-autotune-no-cudagraphs)")
    parser.add_argument("--out", help="also write the rows as JSON here")
    parser.add_argument("--only", default="", help="only the workloads whose name contains this (e.g. MLP)")
    parser.add_argument("--tma", action="store_true",
                        help="also ours with TRITON only + enable_persistent_tma_matmul (persistent/TMA templates)")
    parser.add_argument("--backends", default="ours,inductor,triton_only",
                        help="which to compile and time, comma-separated (ours, inductor, triton_only): a workload "
                             "whose cold compiles do not all fit in one run is run once per backend")
    parser.add_argument("--profile", action="store_true",
                        help="also each kernel's GPU time per call (torch.profiler): fused vs bare templates")
    parser.add_argument("--options", default="{}",
                        help='extra miniinductor options for each of our compiles, as JSON, e.g. '
                             '\'{"coordinate_descent_tuning": true}\'')
    parser.add_argument("--triton-fp32", choices=("ieee", "tf32x3"), default="ieee",
                        help="the float32 dot of the TRITON-only compiles (gemm_fp32_precision; TF32 off): 'tf32x3' is "
                             "three TF32 products, faster than cuBLAS's float32 (benchmarks/fp32_dot_gpu.py)")
    parser.add_argument("--tf32", action="store_true",
                        help="float32 matmuls in TF32 (torch.backends.cuda.matmul.allow_tf32) for all; default IEEE")
    args = parser.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        parser.error("needs a GPU (or --smoke)")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32   # the same float32 precision for eager, Inductor and ours
    backends = args.backends.split(",")
    if unknown := set(backends) - {"ours", "inductor", "triton_only"}:
        parser.error(f"unknown --backends {', '.join(sorted(unknown))}: choose among ours, inductor, triton_only")
    rows = run(args.smoke, args.mode, args.only, args.tma, args.profile, json.loads(args.options), backends,
               args.triton_fp32)
    device = "CPU (smoke, interpreted)" if args.smoke else torch.cuda.get_device_name()
    print(markdown(rows, device, args.mode))
    if args.out:
        Path(args.out).write_text(json.dumps({"device": device, "mode": args.mode, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
