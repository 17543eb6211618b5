"""A broad corpus: miniinductor and Inductor vs eager over ~160 models and fusion patterns,
judged by the geomean and the worst case, never by one row.

    python benchmarks/corpus.py --device cuda --out corpus.json --markdown corpus.md
    python benchmarks/corpus.py --device cuda --kinds patterns --out corpus.json     # a part; --out merges
    python benchmarks/corpus.py --merge a.json b.json --markdown corpus.md          # the report of parts
    python benchmarks/corpus.py --device cpu --kinds patterns --limit 10            # a dry run here
    python benchmarks/corpus.py --slice ci                                          # CI: CPU correctness only

The cases (benchmarks/corpus_cases.py): 17 torchvision classifiers, 14 timm models (random
init, eval mode), 12 transformers models from miniinductor.tools.real_models with their
default SDPA attention (widened to 768 and 4 layers at the GPU size), 8 named patterns from
issue 36 and 112 generated ones (seeded: a Conv1d/2d/3d, ConvTranspose2d/3d, Linear or bmm
followed by 2-4 activations, norms, pools, reductions, softmax, bias/scale/residual adds or
clamps, drawn among those that fit the shape). `--size gpu` (the default on CUDA) is batch 32
at 224x224 and KernelBench level-2 shapes; `--size cpu` is batch 1-2 at 64-224 pixels and a
few channels.

For each case, in a subprocess of its own (a crash or a CUDA error loses that case only,
and what it finished is kept), and each compiler -- eager, inductor (`torch.compile`'s
default backend), miniinductor -- with `torch._dynamo.reset()` between them: the first call
(compile time: Dynamo, AOTAutograd and the backend, and the first run), the outputs against
eager's, then the steady-state time: on CUDA the median of CUDA-event timings of single
calls (warm-up first, at least 5 and at most 100, about `--budget` 0.5 s of calls), on the
CPU the median wall time of 3-20 calls (`--threads 1` on a shared machine: an OpenMP team
whose other core is taken stalls a call for a scheduler tick). Inference runs in eval mode under `torch.no_grad()`; `--train` times a forward
and backward step (`torch.autograd.grad` of `sum(output * fixed random weights)`, or the
model's own loss for transformers) and compares the gradients of every parameter and
floating input too, from the same starting state (each compiler gets a deepcopy).

Correctness: float32 with TF32 off (cuBLAS and cuDNN then do the same arithmetic in both,
and what differs is the accumulation order of fused reductions, as on the CPU). An output
(or gradient) passes when max|compiled - eager| <= tol * max|eager| (NaNs must match): a
tolerance relative to the output's scale, since an elementwise rtol fails on values that
cancel to near 0 (a logit of 1e-7 beside logits of 10). tol = 1e-3 for the models (a
reordered reduction's 1e-7 relative error grows through 20-100 layers, and random-init
activations are far from unit scale), 1e-4 for the patterns (one leading op and a short
chain: errors of ~1e-6 are expected, 1e-4 leaves room for a sum over 10^6 elements and
still catches a wrong index or a missing term), and 1.6e-2 for the bfloat16 pattern (a
bfloat16 ulp is 2^-8 relative: one rounding each side). Gradients use the same tolerances
with every tensor's scale floored at the largest |value| of all the outputs and gradients
(so a parameter whose gradient is ~0 is not judged on its own noise).

Speed ratios are speedups: "ours/eager" = eager time / our time (above 1: we are faster),
"ours/inductor" = Inductor's time / ours (below 1: slower than Inductor). The summary: the
geomean of ours/inductor over the cases where both pass, of ours/eager over the cases we
pass, the worst case by ours/inductor, how many are below 0.85x Inductor, and how many are
slower than eager.

Parallelism: `--jobs N` cases at a time. Compiles overlap; timing does not: each child
takes a file lock (fcntl) around every timing loop, so only one process times at a time
(other processes may still be compiling on the host CPUs meanwhile, which matters only
for host-bound cases). `--jobs 1` (the default) is fully serial. Compile times are cold on a
fresh machine only: Inductor's FX graph and Triton caches and miniinductor's kernel cache
outlive a run (a second run here read 3-5 s for patterns Inductor first took 8-13 s on);
`--fresh-caches` gives the run new cache directories.

Resuming: `--out X.json` reads X.json if it exists, keeps its cases, skips them (unless
`--rerun`), and rewrites the file after every case, so a run cut short by a 10-minute limit
resumes where it stopped with the same command; `--merge a.json b.json` reports the union.

On a lent GPU machine (10-minute commands, a fresh machine per call), in parts that each
fit a call, the JSON under $OUT (it comes back even when the command is cut short), copied
back in before the next call to resume:

    python -m pip install -q --no-deps --no-build-isolation -e .      # the backend's entry point
    timeout 560 python benchmarks/corpus.py --device cuda --kinds patterns --jobs 4 --timeout 240 \
        --out $OUT/corpus_patterns.json                                # 120 cases
    timeout 560 python benchmarks/corpus.py --device cuda --kinds hf,models --jobs 4 --timeout 300 \
        --out $OUT/corpus_models.json                                  # 29 cases
    timeout 560 python benchmarks/corpus.py --device cuda --kinds timm --jobs 4 --timeout 300 \
        --out $OUT/corpus_timm.json                                    # 14 cases
    python benchmarks/corpus.py --merge corpus_*.json --markdown corpus_gpu.md   # here, afterwards

(a call cut short: `cp corpus_patterns.json $OUT/ &&` the same command again skips what is done).
The CPU-size corpus, in full, takes about an hour on 2 shared cores (10-25 s a pattern and
20-100 s a model, Inductor's compile the most of it); the CI slice about 2.5 minutes.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from corpus_cases import all_cases  # noqa: E402

COMPILERS = ["eager", "inductor", "miniinductor"]
KINDS = ["models", "timm", "hf", "patterns"]
SLOW_VS_INDUCTOR = 0.85
# the CI slice: CPU size, ours vs eager, correctness only
CI_CASES = ["resnet18", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "swin_t", "vit_b_16",
            "regnetx_002", "ghostnet_100", "deit_tiny_patch16_224", "gpt2", "bert", "llama", "t5", "whisper",
            "kb-convT2d-min-sum-gelu-add", "groupnorm32-silu-residual", "softmax-cumsum", "embedding-layernorm",
            "layernorm-bf16"]
CI_GENERATED = 16         # and the first 16 generated patterns (each lead op at least twice)


def full_float32():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


# ------------------------------------------------------------------------------- comparing
def flatten(out) -> list[torch.Tensor]:
    """The tensors of an output: a tensor, tuple/list/dict, or a transformers ModelOutput."""
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    return []


def compare(ref: list[torch.Tensor], got: list[torch.Tensor], tol: float, floor: float = 0.0,
            names: list[str] | None = None) -> tuple[float, str]:
    """(worst error / scale, what it was) over the tensors: max|got - ref| / max(max|ref|,
    floor); inf if the structure, a shape or the NaN positions differ."""
    if len(ref) != len(got):
        return math.inf, f"{len(got)} outputs, eager has {len(ref)}"
    worst, where = 0.0, ""
    names = names or [f"output {i}" for i in range(len(ref))]
    for i, (r, g) in enumerate(zip(ref, got)):
        if r.shape != g.shape:
            return math.inf, f"{names[i]}: shape {tuple(g.shape)}, eager {tuple(r.shape)}"
        if not r.is_floating_point():
            err = 0.0 if torch.equal(r, g) else math.inf
        else:
            r, g = r.detach().double(), g.detach().double()
            if not torch.equal(r.isnan(), g.isnan()):
                return math.inf, f"{names[i]}: NaN positions differ"
            finite = r.isfinite() & g.isfinite()
            if not torch.equal(r.isinf(), g.isinf()) or not torch.equal(r[r.isinf()], g[g.isinf()]):
                return math.inf, f"{names[i]}: infinities differ"
            diff = (r[finite] - g[finite]).abs().max().item() if finite.any() else 0.0
            scale = max(r[finite].abs().max().item() if finite.any() else 0.0, floor, 1e-30)
            err = diff / scale
        if err > worst:
            worst, where = err, f"{names[i]} {tuple(r.shape)}"
    return worst, where


# --------------------------------------------------------------------------------- timing
_LOCK = None


@contextlib.contextmanager
def timing_lock():
    """Only one process times at a time (the lock file is the parent's, in CORPUS_LOCK)."""
    path = os.environ.get("CORPUS_LOCK")
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def time_ms(fn, device: str, budget_s: float) -> float:
    """Median milliseconds per call of fn (already warm)."""
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    once = time.perf_counter() - t0
    if cuda:
        n = max(5, min(100, int(budget_s / max(once, 1e-6))))
        for _ in range(2):
            fn()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events)
    n = max(3, min(20, int(budget_s / max(once, 1e-6))))
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


# -------------------------------------------------------------------------- one case, child
def make_compiled(compiler: str, module):
    if compiler == "eager":
        return module
    if compiler == "inductor":
        return torch.compile(module)
    return torch.compile(module, backend="miniinductor")


def call(fn, inputs):
    return fn(**inputs) if isinstance(inputs, dict) else fn(*inputs)


def _grad_inputs(inputs):
    values = inputs.values() if isinstance(inputs, dict) else inputs
    return [t for t in values if isinstance(t, torch.Tensor) and t.is_floating_point()]


def run_case(case, args, emit, perturb_reference: float = 0.0):
    """Every compiler on `case`; `emit(record)` each compiler's record as it finishes.
    `perturb_reference` scales eager's outputs by (1 + it) before comparing (tests: a
    check that cannot fail checks nothing)."""
    torch.manual_seed(0)
    try:
        module, inputs = case.build(args.device, args.size)
    except Exception as e:
        emit({"case": case.name, "kind": case.kind, "compiler": "eager", "status": "ERROR",
              "error": f"building: {type(e).__name__}: {str(e)[:1500]}", "trace": traceback.format_exc()[-3000:]})
        return
    if args.train:
        module.train()
        for t in _grad_inputs(inputs):
            t.requires_grad_(True)
    pristine = copy.deepcopy(module) if args.train else None
    weights = None                               # the fixed random cotangent, from eager's output
    labels: list[str] = []                       # --train: what each compared tensor is
    reference = None
    for compiler in args.compilers:
        torch._dynamo.reset()
        model = copy.deepcopy(pristine) if args.train else module
        fn = make_compiled(compiler, model)
        record = {"case": case.name, "kind": case.kind, "compiler": compiler}
        try:
            if args.train:
                params = [p for p in model.parameters() if p.requires_grad] + _grad_inputs(inputs)
                param_names = [n for n, p in model.named_parameters() if p.requires_grad]
                param_names += [f"input {i}" for i in range(len(_grad_inputs(inputs)))]

                def step(fn=fn, params=params):
                    out = call(fn, inputs)
                    loss = getattr(out, "loss", None)
                    if loss is None:
                        loss = sum((o * w).sum() for o, w in zip(flatten(out), weights) if o.is_floating_point())
                    outs = flatten(out)
                    labels[:] = [f"output {i}" for i in range(len(outs))] + [f"gradient of {n}" for n in param_names]
                    return outs + list(torch.autograd.grad(loss, params, allow_unused=True))
                if weights is None:
                    with torch.no_grad():
                        gen = torch.Generator(device="cpu").manual_seed(1)
                        weights = [torch.randn(o.shape, generator=gen).to(o) for o in flatten(call(model, inputs))]
                context = contextlib.nullcontext
            else:
                def step(fn=fn):
                    return flatten(call(fn, inputs))
                context = torch.no_grad
            with context():
                t0 = time.perf_counter()
                out = step()
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                record["compile_s"] = time.perf_counter() - t0
                out = [o.detach() if o is not None else torch.zeros(()) for o in out]
                if reference is None:
                    reference = [o.clone() * (1 + perturb_reference) if o.is_floating_point() else o.clone() for o in out]
                    record.update(status="PASS", err=0.0)
                else:
                    err, where = compare(reference, out, case.tol, floor=_floor(reference, args.train), names=labels or None)
                    record.update(status="PASS" if err <= case.tol else "FAIL", err=err, where=where)
                del out
                if args.timing:
                    with timing_lock():
                        record["ms"] = time_ms(step, args.device, args.budget)
        except Exception as e:         # a compiler that raises: this compiler's ERROR, the next runs
            record.update(status="ERROR", error=f"{type(e).__name__}: {str(e)[:1500]}",
                          trace=traceback.format_exc()[-3000:])
            if compiler == "eager":
                emit(record)
                return
        emit(record)
        del fn
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


def _floor(reference, train: bool) -> float:
    """Gradients are judged against the largest of them (module docstring)."""
    if not train:
        return 0.0
    return max((r.abs().max().item() for r in reference if r.is_floating_point() and r.numel()), default=0.0)


# ------------------------------------------------------------------------- the parent side
LIVE: set[int] = set()           # the process groups of the running cases


def _terminated(signum, frame):
    """SIGTERM (`timeout 560 python ...`): the running cases' groups go too, so nothing is left
    on the GPU; the --out file already holds every finished case."""
    for pid in list(LIVE):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(124)


def spawn(case, args) -> list[dict]:
    cmd = [sys.executable, __file__, "--child", case.name, "--device", args.device, "--size", args.size,
           "--compilers", ",".join(args.compilers), "--budget", str(args.budget)]
    cmd += (["--train"] if args.train else []) + ([] if args.timing else ["--no-timing"])
    cmd += ["--threads", str(args.threads)] if args.threads else []
    env = dict(os.environ, PYTHONUNBUFFERED="1", CORPUS_LOCK=args.lock)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            start_new_session=True)
    LIVE.add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
        problem = None if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)      # the child's group: it and Inductor's compile workers
        stdout, stderr = proc.communicate()
        problem = f"timed out after {args.timeout} s"
    finally:
        LIVE.discard(proc.pid)
    records = [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("RESULT ")]
    done = {r["compiler"] for r in records}
    for compiler in args.compilers:
        if compiler not in done and problem is not None:
            records.append({"case": case.name, "kind": case.kind, "compiler": compiler, "status": "ERROR",
                            "error": f"{problem}: " + (stderr or "")[-1500:]})
            problem = "an earlier compiler's " + problem.split(":")[0]      # the tail once only
            stderr = ""
    for r in records:
        r.setdefault("case_s", time.perf_counter() - start)
    return records


def fmt(x, spec="{:.2f}"):
    return "-" if x is None else spec.format(x)


def row_of(case: str, records: dict) -> dict:
    """One table row from a case's records {compiler: record}."""
    e, i, o = (records.get(c, {}) for c in COMPILERS)

    def speed(num, den):          # speed of num relative to den: den time / num time
        if num.get("ms") and den.get("ms"):
            return den["ms"] / num["ms"]
        return None
    return {"case": case, "kind": next(iter(records.values()))["kind"], "eager_ms": e.get("ms"), "inductor_ms": i.get("ms"),
            "ours_ms": o.get("ms"), "ours/eager": speed(o, e) if o.get("status") == "PASS" else None,
            "inductor/eager": speed(i, e) if i.get("status") == "PASS" else None,
            "ours/inductor": speed(o, i) if o.get("status") == "PASS" and i.get("status") == "PASS" else None,
            "inductor_compile_s": i.get("compile_s"), "ours_compile_s": o.get("compile_s"),
            "inductor": i.get("status", "-"), "err": o.get("err"),
            "ours": o.get("status") or ("ERROR" if e.get("status") == "ERROR" else "-"),
            "problem": o.get("error") or i.get("error") or e.get("error") or (o.get("where") if o.get("status") == "FAIL" else None)}


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summary(rows: list[dict]) -> list[str]:
    lines = []
    ours = [r for r in rows if r["ours"] != "-"]
    counts = {s: sum(r["ours"] == s for r in ours) for s in ("PASS", "FAIL", "ERROR")}
    lines.append(f"miniinductor: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['ERROR']} ERROR of {len(ours)} cases"
                 + (f"; inductor: {sum(r['inductor'] == 'PASS' for r in rows)} PASS of "
                    f"{sum(r['inductor'] != '-' for r in rows)}" if any(r["inductor"] != "-" for r in rows) else ""))
    for kinds, label in ((KINDS, "all"), *(([k], k) for k in KINDS)):
        part = [r for r in rows if r["kind"] in kinds]
        vs_ind = [r["ours/inductor"] for r in part if r["ours/inductor"]]
        vs_eager = [r["ours/eager"] for r in part if r["ours/eager"]]
        if not vs_ind and not vs_eager:
            continue
        line = f"{label:9} geomean ours/inductor {fmt(geomean(vs_ind))} over {len(vs_ind)}, ours/eager {fmt(geomean(vs_eager))} over {len(vs_eager)}"
        if vs_ind:
            worst = min((r for r in part if r["ours/inductor"]), key=lambda r: r["ours/inductor"])
            line += (f"; worst {worst['case']} {worst['ours/inductor']:.2f}x inductor; "
                     f"{sum(x < SLOW_VS_INDUCTOR for x in vs_ind)} below {SLOW_VS_INDUCTOR}x inductor")
        if vs_eager:
            line += f"; {sum(x < 1 for x in vs_eager)} slower than eager"
        lines.append(line)
    bad = [r for r in rows if r["ours"] in ("FAIL", "ERROR")]
    for r in bad:
        lines.append(f"  {r['ours']} {r['case']}: " + (f"error {r['err']:.2e} " if r["ours"] == "FAIL" and r["err"] is not None else "")
                     + (r["problem"] or "").strip().splitlines()[-1][:200] if (r["problem"] or "").strip() else f"  {r['ours']} {r['case']}")
    return lines


HEADER = ["case", "kind", "eager ms", "inductor ms", "ours ms", "ours/eager", "inductor/eager", "ours/inductor",
          "compile s ind / ours", "inductor", "ours"]


def cells(r: dict) -> list[str]:
    return [r["case"], r["kind"], fmt(r["eager_ms"], "{:.3f}"), fmt(r["inductor_ms"], "{:.3f}"), fmt(r["ours_ms"], "{:.3f}"),
            fmt(r["ours/eager"]), fmt(r["inductor/eager"]), fmt(r["ours/inductor"]),
            f"{fmt(r['inductor_compile_s'], '{:.1f}')} / {fmt(r['ours_compile_s'], '{:.1f}')}", r["inductor"], r["ours"]]


def print_row(r: dict):
    c = cells(r)
    print(f"{c[0][:44]:44} {c[1]:8} " + " ".join(f"{x:>9}" for x in c[2:8]) + f" {c[8]:>13} {c[9]:>8} {c[10]:>5}", flush=True)


def print_header():
    print(f"{'case':44} {'kind':8} " + " ".join(f"{h:>9}" for h in ("eager ms", "ind ms", "ours ms", "ours/eag", "ind/eag", "ours/ind"))
          + f" {'compile i/o s':>13} {'inductor':>8} {'ours':>5}", flush=True)


def rows_from(results: dict) -> list[dict]:
    rows = [row_of(case, recs) for case, recs in results.items() if recs]
    return sorted(rows, key=lambda r: (KINDS.index(r["kind"]) if r["kind"] in KINDS else len(KINDS), r["case"]))


def write_markdown(path: str, results: dict, meta: dict):
    rows = rows_from(results)
    lines = ["# Corpus benchmark", "", f"`{meta.get('command', '')}` on {meta.get('environment', {})}", "",
             "Ratios are speedups (above 1: the first is faster); compile s is the first call.", "", "```"]
    lines += summary(rows) + ["```", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    Path(path).write_text("\n".join(lines) + "\n")


def environment(device: str) -> dict:
    env = {"torch": torch.__version__, "device": device, "python": sys.version.split()[0], "threads": torch.get_num_threads()}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        pass
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    return env


def select(args) -> list:
    cases = all_cases(args.size)
    if args.slice == "ci":
        generated = [c for c in cases if re.match(r"p\d{3}-", c.name)][:CI_GENERATED]
        cases = [c for c in cases if c.name in CI_CASES] + generated
    kinds = args.kinds.split(",")
    cases = [c for c in cases if c.kind in kinds]
    if args.only:
        subs = args.only.split(",")
        cases = [c for c in cases if any(s in c.name for s in subs)]
    return cases[:args.limit] if args.limit else cases


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--size", choices=["gpu", "cpu"], help="default: gpu on CUDA, cpu on the CPU")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated of {','.join(KINDS)}")
    p.add_argument("--only", help="cases whose name contains one of these comma-separated substrings")
    p.add_argument("--limit", type=int, help="the first N selected cases")
    p.add_argument("--compilers", default=",".join(COMPILERS), help="comma-separated; eager always runs (the reference)")
    p.add_argument("--train", action="store_true", help="forward + backward, gradients compared too")
    p.add_argument("--no-timing", dest="timing", action="store_false", help="correctness and compile time only")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per compiler (about)")
    p.add_argument("--fresh-caches", action="store_true",
                   help="Inductor's, Triton's and miniinductor's caches in new directories for this run (compile times "
                        "cold, as on a fresh machine; shared by its cases)")
    p.add_argument("--threads", type=int, help="CPU: torch.set_num_threads in each case's process (1: less noise on a shared machine)")
    p.add_argument("--jobs", type=int, default=1, help="cases at a time (timing never overlaps)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per case")
    p.add_argument("--out", help="JSON: merged into if it exists, rewritten after every case")
    p.add_argument("--rerun", action="store_true", help="with --out: run again the cases it holds")
    p.add_argument("--markdown", help="write the table here")
    p.add_argument("--merge", nargs="+", help="report the union of these --out files (no run)")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    p.add_argument("--slice", choices=["ci"], help="ci: CPU size, miniinductor vs eager, correctness only, in-process")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.slice == "ci":
        args.device, args.compilers, args.timing = "cpu", "eager,miniinductor", False
    unknown = set(args.kinds.split(",")) - set(KINDS)
    if unknown:
        p.error(f"unknown kinds {sorted(unknown)}; known: {','.join(KINDS)}")
    args.size = args.size or ("gpu" if args.device.startswith("cuda") else "cpu")
    args.compilers = ["eager"] + [c for c in args.compilers.split(",") if c != "eager"]
    return args


def load(path: str) -> tuple[dict, dict]:
    data = json.loads(Path(path).read_text())
    return data.get("results", {}), data.get("meta", {})


def main(argv=None) -> int:
    args = parse(argv)
    full_float32()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        case = next(c for c in all_cases(args.size) if c.name == args.child)
        run_case(case, args, lambda r: print("RESULT " + json.dumps(r), flush=True))
        return 0
    if args.merge:
        results, meta = {}, {}
        for path in args.merge:
            res, meta = load(path)
            for case, recs in res.items():
                results.setdefault(case, {}).update(recs)
        meta["command"] = "merge of " + " ".join(args.merge)
        return report(results, meta, args)
    cases = select(args)
    if args.list:
        for c in cases:
            print(f"{c.kind:9} {c.name}")
        print(f"{len(cases)} cases: " + ", ".join(f"{k} {sum(c.kind == k for c in cases)}" for k in KINDS))
        return 0
    meta = {"command": "python benchmarks/corpus.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "environment": environment(args.device), "train": args.train, "size": args.size}
    results = {}
    if args.out and Path(args.out).exists():
        results, _ = load(args.out)
        if not args.rerun:
            skipped = [c for c in cases if c.name in results]
            cases = [c for c in cases if c.name not in results]
            if skipped:
                print(f"{len(skipped)} cases already in {args.out}: skipped (--rerun to run them)")
    print(f"{len(cases)} cases, compilers {','.join(args.compilers)}, {'train' if args.train else 'inference'}, "
          f"size {args.size}, {meta['environment']}", flush=True)
    print_header()
    start = time.perf_counter()

    def finish(case, records):
        results[case.name] = {r["compiler"]: r for r in records}
        print_row(row_of(case.name, results[case.name]))
        if args.out:
            Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))

    if args.slice == "ci":            # in this process: no interpreter start per case
        for case in cases:
            records = []
            run_case(case, args, records.append)
            finish(case, records)
    else:
        signal.signal(signal.SIGTERM, _terminated)
        with tempfile.NamedTemporaryFile(prefix="corpus-lock-") as lock, tempfile.TemporaryDirectory(prefix="corpus-caches-") as caches:
            args.lock = lock.name
            if args.fresh_caches:
                for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "MINIINDUCTOR_CACHE_DIR"):
                    os.environ[var] = os.path.join(caches, var.split("_")[0].lower())
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:   # written as each finishes
                futures = {pool.submit(spawn, c, args): c for c in cases}
                for future in as_completed(futures):
                    finish(futures[future], future.result())
    print(f"{len(cases)} cases in {time.perf_counter() - start:.0f} s")
    return report({c: results[c] for c in results}, meta, args)


def report(results: dict, meta: dict, args) -> int:
    rows = rows_from(results)
    print()
    for line in summary(rows):
        print(line)
    if args.markdown:
        write_markdown(args.markdown, results, meta)
    return 0 if all(r["ours"] in ("PASS", "-") and r["inductor"] in ("PASS", "-") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
