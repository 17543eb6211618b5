"""GPU benchmark: eager vs miniinductor (Triton) vs Inductor, in one run, on one GPU.

    python benchmarks/bench_gpu.py [--quick] [--out results.json] [--only cross]

For each memory-bound workload: GPU time per call (median of `triton.testing.do_bench`),
the speed-up against eager, the ratio of our time to Inductor's, and the achieved
bandwidth (the bytes the graph must move at least) against the device's copy bandwidth
measured in the same run. The model rows come from `bench_models.py`: wall-clock time per
step, in interleaved rounds, because those steps are partly bound by the host. First-call compile time (cold caches) is reported
per workload. Prints a markdown table; `--out` also writes JSON. `--only TEXT` runs only the
workloads whose name contains TEXT (and no model rows), e.g. `--only cross --only conv` for the
cross-entropy and conv-BatchNorm-ReLU rows. `--profile` also prints, per workload, every
kernel of one call by GPU time (torch.profiler) for eager, miniinductor and Inductor.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("MINIINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mi_cache_"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind_cache_"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from bench_models import compile_timed, gpu_busy_ms, time_models  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def chain(x, a):
    return F.gelu(x * a + 1) * torch.sigmoid(x) - torch.tanh(a)


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def softmax(x):
    return torch.softmax(x, -1)


def rms_residual(x, r, w):
    h = x + r
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w, h


def colsum_rowmax(x):
    return x.sum(0), x.amax(1)


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def loss_and_grad(f, logits, target):
    """A training step's work on the logits: the loss, then its gradient (the backward graph)."""
    loss = f(logits, target)
    return loss, torch.autograd.grad(loss, logits)[0]


#: the hand-written part of the markdown file starts here; --markdown keeps it
NOTES_MARK = "<!-- notes: kept by bench_gpu.py -->"


def nbytes(*ts):
    return sum(t.numel() * t.element_size() for t in ts)


def workloads(quick: bool, dtype):
    d = "cuda"
    n = 16 * 2**20
    x, a = torch.randn(n, device=d, dtype=dtype), torch.randn(n, device=d, dtype=dtype)
    m = torch.randn(8192, 4096, device=d, dtype=dtype)
    w, b = torch.randn(4096, device=d, dtype=dtype), torch.randn(4096, device=d, dtype=dtype)
    r = torch.randn_like(m)
    big = torch.randn(16384, 4096, device=d, dtype=dtype)
    esz = m.element_size()
    # cross-entropy over a 32000-token vocabulary: a row too long for one block (online softmax)
    rows, vocab = 8192, 32000
    logits = torch.randn(rows, vocab, device=d, dtype=dtype)
    target = torch.randint(0, vocab, (rows,), device=d)
    logits_grad = logits.clone().requires_grad_(True)
    # a ResNet-style conv-BatchNorm-ReLU block in eval: the conv is cuDNN's; what a compiler adds
    # is the epilogue (BatchNorm's scale and shift, the ReLU) fused into one pass
    block = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.BatchNorm2d(64),
                                torch.nn.ReLU()).to(d, dtype).eval().requires_grad_(False)
    with torch.no_grad():   # BatchNorm statistics that are not the identity
        block[1].running_mean.uniform_(-1, 1), block[1].running_var.uniform_(0.5, 2)
        block[1].weight.uniform_(0.5, 1.5), block[1].bias.uniform_(-0.5, 0.5)
    image = torch.randn(32, 64, 56, 56, device=d, dtype=dtype)
    return {
        "pointwise chain 16M": (chain, (x, a), 3 * n * esz),
        "layer norm 8192x4096": (layer_norm, (m, w, b), 2 * m.numel() * esz),
        "softmax 8192x4096": (softmax, (m,), 2 * m.numel() * esz),
        "RMSNorm + residual": (rms_residual, (m, r, w), 4 * m.numel() * esz),
        "colsum + rowmax 16384x4096": (colsum_rowmax, (big,), big.numel() * esz),
        # read the logits once and the targets (int64); write the loss
        "cross-entropy 8192x32000": (cross_entropy, (logits, target), logits.numel() * esz + rows * 8 + esz),
        # forward and backward are two graphs: the forward reads the logits, the backward reads
        # them again and writes their gradient; each reads the targets
        "cross-entropy fwd+bwd 8192x32000": (cross_entropy, (logits_grad, target),
                                             3 * logits.numel() * esz + 2 * rows * 8 + 2 * esz, loss_and_grad),
        # compute-bound conv: no bandwidth figure
        "conv-BN-ReLU eval 32x64x56x56": (block, (image,), None),
    }


def print_kernels(workload: str, call, fns: dict):
    """Each backend's kernels of one call, slowest first, in microseconds of GPU time."""
    for key, fn in fns.items():
        kernels = {}
        busy = gpu_busy_ms(call, fn, per_kernel=kernels)
        print(f"--- {workload}, {key}: {busy * 1e3:.1f} us of GPU time per call")
        for name, us in sorted(kernels.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {us:9.1f}  {name[:110]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--markdown", help="also write the table, command and device to this file")
    parser.add_argument("--only", action="append", help="only the workloads whose name contains this "
                        "(repeatable; no model rows)")
    parser.add_argument("--profile", action="store_true", help="print each call's kernels by GPU time")
    opts = parser.parse_args()
    rows = []
    src = torch.empty(256 * 2**20 // 4, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = do_bench(lambda: dst.copy_(src))
    copy_bw = 2 * nbytes(src) / copy_ms / 1e9   # GB per ms: bw fractions below use the same units
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  copy bandwidth {copy_bw:.2f} TB/s")
    for dtype in (torch.float32, torch.bfloat16):
        for name, (fn, args, min_bytes, *how) in workloads(opts.quick, dtype).items():
            if opts.only and not any(part in name for part in opts.only):
                continue
            call = (lambda f: how[0](f, *args)) if how else (lambda f: f(*args))   # noqa: E731
            row = {"workload": f"{name} {str(dtype)[6:]}"}
            eager_ms = do_bench(lambda: call(fn))
            compiled_fns = {}
            for backend in ("miniinductor", "inductor"):
                try:
                    compiled, compile_s = compile_timed(fn, backend, call)
                    got, want = call(compiled), call(fn)
                    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
                    if "conv" in name and dtype == torch.float32:   # cuDNN's float32 convolutions round to
                        tol = dict(rtol=1e-2, atol=1e-2)   # TF32 (cudnn.allow_tf32 defaults to True), by whichever
                        # algorithm it picks; bfloat16 keeps its 2e-2 (one ulp of a value near 3 is 0.0156)
                    torch.testing.assert_close(got, want, **tol)
                    ms = do_bench(lambda: call(compiled))
                    row[backend] = {"ms": ms, "x_eager": eager_ms / ms, "compile_s": compile_s}
                    compiled_fns[backend] = compiled
                    if min_bytes:
                        row[backend]["bw_frac"] = min_bytes / ms / 1e9 / copy_bw
                except Exception as exc:  # a failing backend is a row, not a crash
                    row[backend] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            row["eager_ms"] = eager_ms
            if opts.profile:
                print_kernels(row["workload"], call, {"eager": fn, **compiled_fns})
            rows.append(row)
            print(json.dumps(row))
    # model steps: wall clock per step in interleaved rounds (bench_models.py says why)
    rounds = 3 if opts.quick else 5
    rows += [] if opts.only else time_models(rounds=rounds)
    table = ["| workload | eager ms | mini ms | Inductor ms | mini x eager | Inductor x eager | mini/Inductor time | "
             "mini % copy bw | Inductor % copy bw | compile s mini / Inductor |"]
    table.append("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        mi, ind = row.get("miniinductor", {}), row.get("inductor", {})
        if "error" in mi or "error" in ind:
            table.append(f"| {row['workload']} | {row['eager_ms']:.3f} | {mi.get('error', '')} | {ind.get('error', '')} |")
            continue
        bw = lambda r: f"{100 * r['bw_frac']:.0f}%" if "bw_frac" in r else "-"  # noqa: E731
        table.append(f"| {row['workload']} | {row['eager_ms']:.3f} | {mi['ms']:.3f} | {ind['ms']:.3f} | {mi['x_eager']:.2f} | "
                     f"{ind['x_eager']:.2f} | {mi['ms'] / ind['ms']:.2f} | {bw(mi)} | {bw(ind)} | {mi['compile_s']:.1f} / {ind['compile_s']:.1f} |")
    print("\n" + "\n".join(table))
    if opts.markdown:
        device = f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
        old = Path(opts.markdown).read_text() if Path(opts.markdown).exists() else ""
        notes = old[old.index(NOTES_MARK):] if NOTES_MARK in old else ""   # hand-written, kept
        Path(opts.markdown).write_text(
            "# Benchmarks (GPU)\n\nProduced by `python benchmarks/bench_gpu.py --markdown docs/benchmarks_gpu.md` "
            f"(run by `bash benchmarks/gpu_suite.sh`) on {device}, {time.strftime('%Y-%m-%d')}.\n\n"
            f"Measured copy bandwidth (`copy_` of 256 MiB, read + write): **{copy_bw:.2f} TB/s**. Times are the "
            "median of `triton.testing.do_bench`; `mini/Inductor time` < 1 means miniinductor is faster; "
            "`% copy bw` is the minimum bytes the graph must move divided by the time, against the copy "
            "bandwidth. The model rows (from `bench_models.py`) are wall-clock time per step instead, the median "
            f"of {rounds} interleaved rounds of 200 steps, since those steps are partly bound by the host. Compile times "
            "are the first call in this process (Dynamo + AOTAutograd included); cold-process times are below.\n\n"
            + "\n".join(table) + "\n" + ("\n" + notes if notes else ""))
    if opts.out:
        Path(opts.out).write_text(json.dumps({"copy_gbs": copy_bw, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
