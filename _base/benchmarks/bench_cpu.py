"""CPU benchmark: eager vs miniinductor vs Inductor, in one run, on this machine.

    python benchmarks/bench_cpu.py            # full run, writes docs/benchmarks.md
    python benchmarks/bench_cpu.py --quick    # fewer iterations (a smoke run)
    python benchmarks/bench_cpu.py --malloc mimalloc   # all three under mimalloc (pip install cmeel-mimalloc)

Cases (all fp32, inference under ``torch.no_grad()``):
  pointwise  gelu(x*a+1)*sigmoid(x)-tanh(a) on 4M elements (memory bound)
  layernorm  F.layer_norm on [4096, 1024] with weight and bias
  softmax    torch.softmax on [4096, 1024], dim=-1
  gpt2_block miniinductor.models.GPT2Block(d_model=256, n_head=8) on [4, 128, 256]
  mlp_gelu   Linear(512, 2048) -> GELU -> Linear(2048, 512) on [256, 512]
  colsum_rowmax  (x.sum(0), x.amax(1)) on [2048, 2048]
  cross_entropy  F.cross_entropy on [512, 8000] logits
  mlp_batch1 six Linear(256, 256) + ReLU layers on [1, 256] (per-call overhead)
  conv_bn_relu   Conv2d(64, 64, 3) -> BatchNorm2d (eval) -> ReLU on [8, 64, 32, 32]
  resnet_stem    ResNet's stem in eval: Conv2d(3, 64, 7, stride 2) -> BatchNorm2d -> ReLU ->
                 MaxPool2d(3, stride 2, padding 1) on [8, 3, 112, 112]

Each case is compiled once per backend, warmed up, then timed: every repeat runs
the callable enough times to fill a target time (200 ms; 20 ms with --quick) and
records the mean per call; the table shows the median over repeats. Ratios are
eager/mini and inductor/mini, so a value > 1 means miniinductor is faster. The
pointwise chain's bandwidth (the bytes it must move: read x and a, write the result)
is set against the copy bandwidth of a 64 MB tensor (``clone()``, and ``copy_()``
into a preallocated buffer). First-compile time of the GPT-2 block is measured
in a fresh subprocess with empty cache folders (MINIINDUCTOR_CACHE_DIR,
TORCHINDUCTOR_CACHE_DIR). A failing backend gives an error row, not a crash.

On a machine whose cores other work shares, run it with ``OMP_WAIT_POLICY=PASSIVE``:
libgomp's default policy spins at every barrier, and with two threads a parallel region
then stalls ~8 ms whenever the other process holds a core, for ATen's ops and our kernels
alike (they share one libgomp), so the cells count parallel regions, not kernel speed
(docs/benchmarks.md, "CPU rows on two threads (issue 15), third round").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # benchmark this checkout, installed or not

BACKENDS = ("eager", "miniinductor", "inductor")

#: the hand-written part of docs/benchmarks.md starts here; a run rewrites what is above it only
NOTES_MARK = "<!-- notes: kept by bench_cpu.py -->"


# ----------------------------------------------------------------------------- cases

def pointwise(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return F.gelu(x * a + 1) * torch.sigmoid(x) - torch.tanh(a)


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], w, b)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def colsum_rowmax(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.sum(0), x.amax(1)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def module_case(*layers: torch.nn.Module, shape: tuple[int, ...]) -> tuple[Callable, tuple]:
    """An eval-mode nn.Sequential of ``layers`` (seeded weights) and one input."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*layers).eval()
    if isinstance(layers[1], torch.nn.BatchNorm2d):   # non-trivial running statistics
        layers[1].running_mean.uniform_(-1, 1)
        layers[1].running_var.uniform_(0.5, 2)
    return model, (_randn(*shape),)


def make_gpt2_block(seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor]:
    from miniinductor.models import GPT2Block, make_demo_inputs
    torch.manual_seed(seed)
    model = GPT2Block(d_model=256, n_head=8, max_seq=128).eval()
    return model, make_demo_inputs(batch=4, seq=128, d_model=256, seed=seed)  # [4, 128, 256]


def setup_gpt2_block() -> tuple[Callable, tuple]:
    model, x = make_gpt2_block()
    return model, (x,)


@dataclass
class Case:
    name: str
    shape: str
    setup: Callable[[], tuple[Callable, tuple]]   # -> (fn, inputs)
    min_bytes: int | None = None                  # bytes the op must move, if memory bound


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))


N_POINTWISE = 4 * 1024 * 1024
CASES = [
    Case("pointwise", "[4M] x2", lambda: (pointwise, (_randn(N_POINTWISE), _randn(N_POINTWISE))),
         min_bytes=3 * 4 * N_POINTWISE),           # read x, read a, write out
    Case("layernorm", "[4096, 1024]",
         lambda: (layernorm, (_randn(4096, 1024), _randn(1024), _randn(1024))),
         min_bytes=4 * (2 * 4096 * 1024 + 2 * 1024)),  # read x, w, b; write out
    Case("softmax", "[4096, 1024]", lambda: (softmax, (_randn(4096, 1024),)),
         min_bytes=4 * 2 * 4096 * 1024),              # read x, write out
    Case("gpt2_block", "[4, 128, 256]", lambda: setup_gpt2_block()),
    Case("mlp_gelu", "[256, 512] -> 2048 -> 512", lambda: module_case(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512), shape=(256, 512))),
    Case("colsum_rowmax", "[2048, 2048]", lambda: (colsum_rowmax, (_randn(2048, 2048),)),
         min_bytes=4 * (2048 * 2048 + 2 * 2048)),     # read x, write both results
    Case("cross_entropy", "[512, 8000]", lambda: (cross_entropy, (
        _randn(512, 8000), torch.randint(0, 8000, (512,), generator=torch.Generator().manual_seed(0)))),
         min_bytes=4 * 512 * 8000 + 8 * 512 + 4),      # read logits and targets, write the loss
    Case("mlp_batch1", "[1, 256], 6 layers", lambda: module_case(
        *[m for _ in range(6) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())], shape=(1, 256))),
    Case("conv_bn_relu", "[8, 64, 32, 32]", lambda: module_case(
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        shape=(8, 64, 32, 32))),
    Case("resnet_stem", "[8, 3, 112, 112]", lambda: module_case(
        torch.nn.Conv2d(3, 64, 7, stride=2, padding=3), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, stride=2, padding=1), shape=(8, 3, 112, 112))),
]


# ----------------------------------------------------------------------------- timing

def compile_with(backend: str, fn: Callable) -> Callable:
    """Dynamo keys its cache on the backend too, so one function can be compiled twice."""
    if backend == "eager":
        return fn
    if backend == "miniinductor":
        import miniinductor
        return miniinductor.compile(fn)
    return torch.compile(fn, backend=backend)


def calibrate(fn: Callable[[], object], target_ms: float) -> int:
    """Warm up, then pick how many calls fill about ``target_ms``."""
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    fn()
    once_ms = (time.perf_counter() - t0) * 1e3
    return max(1, int(target_ms / max(once_ms, 1e-3)))


#: the clock: wall time, or with --cpu-time the process's CPU time (on a loaded machine, run
#: with OMP_NUM_THREADS=1: other processes' load then barely moves it)
CLOCK = [time.perf_counter]


def sample_ms(fn: Callable[[], object], inner: int) -> float:
    """Mean time per call (ms) over ``inner`` back-to-back calls."""
    t0 = CLOCK[0]()
    for _ in range(inner):
        fn()
    return (CLOCK[0]() - t0) * 1e3 / inner


def time_ms(fn: Callable[[], object], repeats: int, target_ms: float) -> float:
    """Median over ``repeats`` of the mean time per call (ms), after a warm-up."""
    inner = calibrate(fn, target_ms)
    return statistics.median(sample_ms(fn, inner) for _ in range(repeats))


@dataclass
class Row:
    case: str
    backend: str
    ms: float | None = None
    first_call_s: float | None = None
    max_err: float | None = None
    error: str | None = None


def _flat(out) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _describe(e: Exception) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"


def run_case(case: Case, args: argparse.Namespace) -> list[Row]:
    """Compile the case with every backend, then time them interleaved.

    Interleaving (eager, mini, inductor, eager, mini, ...) spreads any drift in
    machine load evenly over the backends instead of penalising whichever ran last.
    """
    rows = {b: Row(case.name, b) for b in BACKENDS}
    # each case static, as if alone: Dynamo would otherwise compile a second nn.Sequential of
    # inputs of the same rank (conv_bn_relu, then resnet_stem) with symbolic sizes
    torch._dynamo.reset()
    try:
        fn, inputs = case.setup()
    except Exception as e:
        traceback.print_exc()
        for r in rows.values():
            r.error = "setup: " + _describe(e)
        return list(rows.values())

    runners: dict[str, Callable[[], object]] = {}
    inner: dict[str, int] = {}
    ref = None
    with torch.no_grad():
        for backend in BACKENDS:
            row = rows[backend]
            try:
                t0 = time.perf_counter()
                compiled = compile_with(backend, fn)
                out = compiled(*inputs)
                row.first_call_s = time.perf_counter() - t0
                if backend == "eager":
                    ref = out
                elif ref is not None:
                    row.max_err = max((o.double() - r.double()).abs().max().item()
                                      for o, r in zip(_flat(out), _flat(ref)))
                runner = (lambda c: lambda: c(*inputs))(compiled)
                inner[backend] = calibrate(runner, args.target_ms)
                runners[backend] = runner
            except Exception as e:
                traceback.print_exc()
                row.error = _describe(e)

        samples: dict[str, list[float]] = {b: [] for b in runners}
        order = list(runners)
        for repeat in range(args.repeats):
            # the backends' order rotates each repeat: the one timed right after another has
            # run measured 1-2% slower on the convolution rows (identical graphs in two places)
            for backend in order[repeat % len(order):] + order[:repeat % len(order)]:
                if backend not in runners:
                    continue
                runner = runners[backend]
                try:
                    samples[backend].append(sample_ms(runner, inner[backend]))
                except Exception as e:
                    traceback.print_exc()
                    rows[backend].error = _describe(e)
                    del runners[backend]
    for backend, row in rows.items():
        if samples.get(backend) and row.error is None:
            row.ms = statistics.median(samples[backend])
        print(f"  {case.name:11s} {backend:13s} "
              + (f"{row.ms:9.3f} ms" if row.ms is not None else f"ERROR {row.error}"),
              flush=True)
    return list(rows.values())


def copy_bandwidth_gbs(args: argparse.Namespace) -> dict[str, float]:
    """GB/s copying a 64 MB fp32 tensor, counting the read and the write.

    ``clone`` allocates a fresh output every call (as a compiled kernel's output
    buffer is), so it pays for page faults; ``copy_`` writes into a preallocated
    buffer and is the streaming ceiling.
    """
    src = torch.empty(16 * 1024 * 1024).fill_(1.0)  # 16M floats = 64 MB
    dst = torch.empty_like(src)
    nbytes = 2 * src.numel() * src.element_size()
    return {name: nbytes / (time_ms(fn, args.repeats, args.target_ms) * 1e-3) / 1e9
            for name, fn in (("clone", lambda: src.clone()), ("copy_", lambda: dst.copy_(src)))}


# ----------------------------------------------------------------------------- cold compile

COLD_FLAG = "--_cold-compile"
NOT_RUN = "not run (--cases)"


def cold_compile_child(backend: str) -> None:
    """Runs in a fresh process: time compile + first call of the GPT-2 block."""
    model, x = make_gpt2_block()
    with torch.no_grad():
        t0 = time.perf_counter()
        out = compile_with(backend, model)(x)
        seconds = time.perf_counter() - t0
    assert out.shape == x.shape
    print(json.dumps({"seconds": seconds}))


def cold_compile_s(backend: str, timeout: float) -> tuple[float | None, str | None]:
    with tempfile.TemporaryDirectory(prefix=f"cold-{backend}-") as tmp:
        env = dict(os.environ,
                   MINIINDUCTOR_CACHE_DIR=os.path.join(tmp, "miniinductor"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"))
        try:
            proc = subprocess.run([sys.executable, __file__, COLD_FLAG, backend], env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"exit {proc.returncode}: {last}"
    return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"], None


# ----------------------------------------------------------------------------- report

def machine_info() -> dict[str, str]:
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in out.splitlines()
                     if line.startswith("Model name"))
    except Exception:
        pass
    return {"cpu": model, "cores": str(os.cpu_count()),
            "torch threads": str(torch.get_num_threads()),
            "clock": "process CPU time" if CLOCK[0] is time.process_time else "wall",
            "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__,
            "malloc": os.environ.get(PRELOADED, "glibc"),
            "load average at start (1, 5, 15 min)":
                " / ".join(f"{v:.2f}" for v in os.getloadavg())}


def _ms(r: Row) -> str:
    if r.ms is not None:
        return f"{r.ms:.3f}"
    return "-" if r.error == NOT_RUN else "error"


def _ratio(num: Row, den: Row) -> str:
    return f"{num.ms / den.ms:.2f}" if num.ms and den.ms else "n/a"


def render(rows: list[Row], copy_gbs: dict[str, float], cold: dict, args: argparse.Namespace,
           command: str, info: dict) -> str:
    by = {(r.case, r.backend): r for r in rows}
    out = ["# Benchmarks (CPU)", "",
           "Produced by `benchmarks/bench_cpu.py`; regenerate with:", "",
           f"```\n{command}\n```", "",
           "GPU figures (Triton kernels on an H100) are in [benchmarks_gpu.md](benchmarks_gpu.md).", "",
           f"Date: {datetime.date.today().isoformat()}" + ("  (quick mode: few iterations)"
                                                          if args.quick else ""), ""]
    out += [f"- {k}: {v}" for k, v in info.items()]
    out += ["", "Median time per call in ms (fp32, inference). eager/mini and inductor/mini "
            "> 1 mean miniinductor is faster. Backends are timed interleaved, in an order that "
            "rotates each repeat (the one after another runs 1-2% slower), so changes in "
            "machine load during a run hit all three about equally; still, a load average "
            "near the core count inflates absolute times (multi-threaded kernels most), so "
            "compare ratios within one run rather than times across runs.", "",
            "| case | shape | eager ms | miniinductor ms | inductor ms | eager/mini "
            "| inductor/mini | mini max abs err |", "|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        e, m, i = (by[(case.name, b)] for b in BACKENDS)
        err = f"{m.max_err:.1e}" if m.max_err is not None else "n/a"
        out.append(f"| {case.name} | {case.shape} | {_ms(e)} | {_ms(m)} | {_ms(i)} | "
                   f"{_ratio(e, m)} | {_ratio(i, m)} | {err} |")
    errors = [r for r in rows if r.error and r.error != NOT_RUN]
    if errors:
        out += ["", "Errors:", ""] + [f"- {r.case} / {r.backend}: `{r.error}`" for r in errors]

    pw = next(c for c in CASES if c.name == "pointwise")
    out += ["", "## Bandwidth", "",
            "Copy bandwidth of a 64 MB fp32 tensor (read + write): "
            + ", ".join(f"`{k}` **{v:.1f} GB/s**" for k, v in copy_gbs.items())
            + ". `clone` allocates its output each call (page faults included, as for "
            "a compiled kernel's fresh output); `copy_` writes into a preallocated buffer.",
            "", f"The pointwise chain moves at least {pw.min_bytes / 1e6:.0f} MB per call "
            "(read x and a, write the output).", "",
            "| backend | GB/s | % of clone | % of copy_ |", "|---|---|---|---|"]
    for b in BACKENDS:
        r = by[("pointwise", b)]
        if r.ms:
            gbs = pw.min_bytes / (r.ms * 1e-3) / 1e9
            pcts = " | ".join(f"{100 * gbs / v:.0f}%" for v in copy_gbs.values())
            out.append(f"| {b} | {gbs:.1f} | {pcts} |")
        else:
            out.append(f"| {b} | error | | |")

    out += ["", "## First compile (GPT-2 block, cold cache, fresh process)", "",
            "Seconds from the compile call through the first output, in a new Python "
            "process with empty MINIINDUCTOR_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR "
            "(import time excluded).", "", "| backend | seconds |", "|---|---|"]
    for b, (sec, err) in cold.items():
        out.append(f"| {b} | {f'{sec:.1f}' if sec is not None else f'error: `{err}`'} |")
    return "\n".join(out) + "\n"


def bytes_section() -> str:
    """Bytes each generated kernel reads and writes (explain()), against the least the
    graph must move: fused kernels should touch each input and output once."""
    import miniinductor
    lines = ["", "## Bytes moved by the generated kernels", "",
             "From `miniinductor.explain` (each kernel's argument buffers, counted once).", "",
             "| case | kernels | bytes per kernel | total | minimum the graph needs |", "|---|---|---|---|---|"]
    for case in CASES:
        if case.min_bytes is None:
            continue
        fn, inputs = case.setup()
        with torch.no_grad():
            kernels = miniinductor.explain(fn, *inputs).kernels
        per = ", ".join(f"{k.name}: {k.bytes_moved:,}" for k in kernels)
        total = sum(k.bytes_moved for k in kernels)
        lines.append(f"| {case.name} | {len(kernels)} | {per} | {total:,} | {case.min_bytes:,} |")
    return "\n".join(lines) + "\n"


def steady_malloc(trim_bytes: int = 1 << 30, mmap_bytes: int = 1 << 25):
    """glibc's M_TRIM_THRESHOLD (-1) and M_MMAP_THRESHOLD (-3), fixed: blocks up to 32 MB come
    from the heap and free memory is kept up to 1 GB, whatever the process freed before. With
    the dynamic defaults, conv_bn_relu's compiled call page-faulted 120 times a call in one
    process and 26 in another (docs/benchmarks.md)."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    if not (libc.mallopt(-1, trim_bytes) and libc.mallopt(-3, mmap_bytes)):
        raise RuntimeError("mallopt refused the thresholds (not glibc?)")


MALLOCS = ("glibc", "mimalloc")
PRELOADED = "MINIINDUCTOR_BENCH_MALLOC"   # set in the re-executed process: which --malloc it runs under


def mimalloc_path() -> str:
    """libmimalloc.so from the `cmeel-mimalloc` wheel (pip), or a SystemExit saying how to get it."""
    import importlib.metadata
    try:
        dist = importlib.metadata.distribution("cmeel-mimalloc")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("--malloc mimalloc needs mimalloc's shared library: "
                         "`python -m pip install cmeel-mimalloc` (a wheel that carries it)") from None
    found = sorted(str(dist.locate_file(f)) for f in dist.files or () if f.name.startswith("libmimalloc.so"))
    if not found:
        raise SystemExit("cmeel-mimalloc is installed but holds no libmimalloc.so: reinstall it")
    return found[0]


def run_under_malloc(which: str, argv: list[str]) -> None:
    """Re-execute this script with `which` preloaded (LD_PRELOAD), for all three backends
    alike. glibc's malloc places a 16 MB output at the previous call's address or at another,
    depending on the process's history and on what the caller allocates in between (eager kept
    one, both compilers alternated two, in bench_cpu's own harness), and the layer norm row
    moved +-15% with it; mimalloc reuses the address every time (docs/benchmarks.md, eighth)."""
    if os.environ.get(PRELOADED) == which:
        if not any("libmimalloc" in line for line in open("/proc/self/maps")):
            raise SystemExit(f"LD_PRELOAD={os.environ.get('LD_PRELOAD')} did not load mimalloc")
        return
    env = dict(os.environ, **{PRELOADED: which})
    env["LD_PRELOAD"] = " ".join(filter(None, [mimalloc_path(), env.get("LD_PRELOAD")]))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *argv], env)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    p.add_argument("--output", type=Path, help="the markdown page to rewrite (default: docs/benchmarks.md when every "
                   "case runs; a run of some --cases only prints, unless --output is given)")
    p.add_argument("--cases", nargs="*", default=[c.name for c in CASES],
                   choices=[c.name for c in CASES])
    p.add_argument("--cpu-time", action="store_true",
                   help="time by process CPU time (with OMP_NUM_THREADS=1, on a loaded machine)")
    p.add_argument("--repeats", type=int, help="samples per backend (default 15; 3 with --quick)")
    p.add_argument("--no-cold", action="store_true", help="skip the cold-compile subprocesses")
    p.add_argument("--steady-malloc", action="store_true",
                   help="fix glibc's malloc thresholds first (mallopt), the same for all three backends: by default "
                   "glibc moves them as the process frees large blocks, and a process whose thresholds stayed low "
                   "returns a call's buffers to the OS at its end and page-faults them back in at the next call")
    p.add_argument("--malloc", choices=MALLOCS, default="glibc",
                   help="the C allocator all three backends run under: glibc's (default), or mimalloc preloaded "
                   "(`pip install cmeel-mimalloc`), which gives a freed output's address back to the next call "
                   "where glibc's placement varies between processes and backends")
    p.add_argument("--sample-ms", type=float, help="length of one sample, the unit of interleaving (default 200; "
                   "20 with --quick): shorter samples and more --repeats spread a noisy machine's drift finer")
    args = p.parse_args(argv)
    if args.malloc != "glibc":
        if args.steady_malloc:
            p.error("--steady-malloc sets glibc's thresholds (mallopt); under --malloc mimalloc it would do nothing")
        run_under_malloc(args.malloc, sys.argv[1:] if argv is None else argv)
    if args.steady_malloc:
        steady_malloc()
    args.repeats = args.repeats or (3 if args.quick else 15)
    CLOCK[0] = time.process_time if args.cpu_time else time.perf_counter
    args.target_ms = args.sample_ms or (20.0 if args.quick else 200.0)
    command = "python benchmarks/bench_cpu.py" + (" " + " ".join(argv if argv is not None
                                                              else sys.argv[1:])).rstrip()

    info = machine_info()
    print(f"machine: {info}", flush=True)
    copy_gbs = copy_bandwidth_gbs(args)
    print("copy bandwidth GB/s: " + ", ".join(f"{k} {v:.1f}" for k, v in copy_gbs.items()),
          flush=True)
    rows = []
    for case in CASES:
        if case.name in args.cases:
            rows += run_case(case, args)
        else:
            rows += [Row(case.name, b, error=NOT_RUN) for b in BACKENDS]
    cold = {}
    for b in ("miniinductor", "inductor"):
        cold[b] = (None, "skipped (--no-cold)") if args.no_cold else cold_compile_s(b, 600)
        print(f"  cold compile {b}: {cold[b]}", flush=True)

    text = render(rows, copy_gbs, cold, args, command, info) + bytes_section()
    if args.output is None and set(args.cases) != {c.name for c in CASES}:
        print("\n" + text + "\nnot written: only some --cases ran (pass --output to write them)")
        return 0
    args.output = args.output or REPO / "docs" / "benchmarks.md"
    old = args.output.read_text() if args.output.exists() else ""
    notes = old[old.index(NOTES_MARK):] if NOTES_MARK in old else NOTES_MARK + "\n"   # hand-written, kept
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text.rstrip("\n") + "\n\n" + notes)
    print("\n" + text + f"\nwritten to {args.output}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == COLD_FLAG:
        cold_compile_child(sys.argv[2])
    else:
        sys.exit(main())
