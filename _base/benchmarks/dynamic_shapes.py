"""Dynamic against static kernels, and compile counts, per shape: ours and Inductor's.

    python benchmarks/dynamic_shapes.py [--device cuda] [--json OUT.json] [--md OUT.md] [--smoke]
                                        [--cpu-backend cpp|triton] [--all-dynamic] [--case NAME ...]

For layer norm, softmax and the GPT-2 block, at three shapes each:
  - time per call of a static compile (`dynamic=False`, one compile per shape) and of one
    dynamic compile that serves all three shapes, for miniinductor and Inductor; the ratio
    dynamic/static (1.00 = no cost for being generic). Dynamic: the dim that varies (rows,
    or the sequence) marked with `torch._dynamo.mark_dynamic`, the others static, as a
    changing batch is; `--all-dynamic`: `dynamic=True`, every size a symbol (the layer
    norm then divides by a float of the sizes, `sym_float(s1)`, computed in the kernel);
  - how many graphs Dynamo handed each backend for the three shapes, how many ATen graphs
    miniinductor compiled behind them (`metrics.graphs_compiled`: a backend that specialises
    compiles one per shape), and the cold compile time of the dynamic graph (first call).
Issue 13's bar: our dynamic kernels within 10% of our static ones, and our dynamic
compile no slower than Inductor's. Timing: `triton.testing.do_bench` on CUDA (GPU time,
median), wall clock medians on the CPU. On CUDA a "kernels only" ratio as well: the kernels'
own device time from torch.profiler, since a 40 us graph's call can take longer on the host
(guards, size arithmetic) than on the GPU, and then do_bench times the host. On CUDA our kernels are Triton, generic in their
sizes (one ATen compile per graph for the three shapes); on the CPU they are C++, or with
`--cpu-backend triton` Triton under the interpreter (use --smoke: a check that it runs,
its timings mean nothing). The table goes to stdout, and to --md/--json when given.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MINIINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mi_cache_"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind_cache_"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.models import GPT2Block  # noqa: E402


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def softmax(x):
    return torch.softmax(x, -1)


def cases(device: str, smoke: bool):
    """name → (fn, [args per shape], the dim of the first argument that varies)."""
    d = device
    width = 256 if smoke else 4096
    rows = (96, 200, 333) if smoke else (3000, 8192, 12289)
    w, b = torch.randn(width, device=d), torch.randn(width, device=d)
    block = GPT2Block(d_model=64 if smoke else 768, n_head=4 if smoke else 12).to(d).eval()
    seqs = (16, 40, 64) if smoke else (128, 384, 1000)
    batch = 2 if smoke else 8
    return {
        "layer norm": (layer_norm, [(torch.randn(n, width, device=d), w, b) for n in rows], 0),
        "softmax": (softmax, [(torch.randn(n, width, device=d),) for n in rows], 0),
        "gpt2 block": (block, [(torch.randn(batch, t, block.ln1.normalized_shape[0], device=d),) for t in seqs], 1),
    }


def time_ms(fn, args, device: str, quick=False) -> float:
    """`quick` (--smoke): a few calls only (Triton's interpreter takes seconds a call)."""
    if device == "cuda":
        from triton.testing import do_bench
        return do_bench(lambda: fn(*args))
    for _ in range(1 if quick else 3):
        fn(*args)
    samples = []
    for _ in range(3 if quick else 7):
        t = time.perf_counter()
        for _ in range(1 if quick else 5):
            fn(*args)
        samples.append((time.perf_counter() - t) / 5 * 1e3)
    return statistics.median(samples)


def kernel_ms(fn, args, calls: int = 50) -> float | None:
    """GPU time of the kernels alone per call (torch.profiler's device time, summed): unlike
    do_bench, host work between launches (guards, size arithmetic) cannot show up here. A
    small graph's call can take longer on the host than its kernels on the GPU, and then
    do_bench measures the host: this column separates the two."""
    if not torch.cuda.is_available() or not args[0].is_cuda:
        return None
    from torch.profiler import ProfilerActivity, profile
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*args)
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / calls / 1e3


class CountingBackend:
    """Counts the graphs a backend compiles (Dynamo calls it once per (re)compile)."""

    def __init__(self, name: str, dynamic, options=None):
        self.name, self.dynamic, self.graphs, self.options = name, dynamic, 0, options

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        if self.name == "inductor":
            from torch._inductor.compile_fx import compile_fx
            return compile_fx(gm, example_inputs)
        return miniinductor.backend(gm, example_inputs, options=self.options)


def compiled(backend: str, fn, dynamic, options=None):
    torch._dynamo.reset()
    counter = CountingBackend(backend, dynamic, options)
    return torch.compile(fn, backend=counter, dynamic=dynamic), counter


def marked(args, dim):
    """`args` with a copy of the first, its `dim` marked dynamic (a symbol from the first call)."""
    first = args[0].clone()
    torch._dynamo.mark_dynamic(first, dim)
    return (first, *args[1:])


def run_case(name, fn, shapes, device, options=None, quick=False, dim=None):
    """`dim`: the varying dim, marked dynamic; None: every size dynamic (`dynamic=True`)."""
    rows = []
    for backend in ("miniinductor", "inductor"):
        static_ms, static_kernel_ms = [], []
        for args in shapes:  # a fresh static compile per shape
            cfn, _ = compiled(backend, fn, False, options)
            with torch.no_grad():
                cfn(*args)
                static_ms.append(time_ms(cfn, args, device, quick))
                static_kernel_ms.append(kernel_ms(cfn, args))
        cfn, counter = compiled(backend, fn, True if dim is None else None, options)
        dyn_shapes = shapes if dim is None else [marked(args, dim) for args in shapes]
        miniinductor.metrics.reset()
        dyn_ms, dyn_kernel_ms = [], []
        with torch.no_grad():
            t = time.perf_counter()
            out = cfn(*dyn_shapes[0])
            if device == "cuda":
                torch.cuda.synchronize()
            compile_s = time.perf_counter() - t
            for args in dyn_shapes:
                got, want = cfn(*args), fn(*args)
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
                dyn_ms.append(time_ms(cfn, args, device, quick))
                dyn_kernel_ms.append(kernel_ms(cfn, args))
        del out
        rows.append({"case": name, "backend": backend, "static_ms": static_ms, "dynamic_ms": dyn_ms,
                     "ratio": [d / s for d, s in zip(dyn_ms, static_ms)], "graphs": counter.graphs,
                     "kernel_ratio": [d / s for d, s in zip(dyn_kernel_ms, static_kernel_ms) if d and s],
                     "static_kernel_ms": static_kernel_ms, "dynamic_kernel_ms": dyn_kernel_ms,
                     "aten_graphs": miniinductor.metrics.graphs_compiled if backend == "miniinductor" else None,
                     "specializations": miniinductor.metrics.specializations if backend == "miniinductor" else None,
                     "dynamic_compile_s": compile_s})
    return rows


def render(rows, device, kernels, all_dynamic=False) -> str:
    lines = ["| case | backend | static ms (3 shapes) | dynamic ms | dynamic/static | kernels only: dynamic/static "
             "| Dynamo graphs | our ATen compiles | dynamic compile s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = lambda xs, p=3: " / ".join(f"{x:.{p}f}" for x in xs)  # noqa: E731
        ours = "-" if r["aten_graphs"] is None else r["aten_graphs"]
        lines.append(f"| {r['case']} | {r['backend']} | {f(r['static_ms'])} | {f(r['dynamic_ms'])} | "
                     f"{f(r['ratio'], 2)} | {f(r['kernel_ratio'], 2) or '-'} | {r['graphs']} | {ours} | {r['dynamic_compile_s']:.1f} |")
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    dynamic = "dynamic=True" if all_dynamic else "the varying dim marked dynamic"
    return f"device: {name}, torch {torch.__version__}, our kernels: {kernels}, {dynamic}\n\n" + "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--smoke", action="store_true", help="tiny shapes (a check that it runs)")
    p.add_argument("--cpu-backend", choices=("cpp", "triton"), default="cpp",
                   help="our kernels on the CPU (triton: the interpreter, slow: with --smoke)")
    p.add_argument("--all-dynamic", action="store_true", help="dynamic=True (every size a symbol)")
    p.add_argument("--case", action="append", help="only these cases (layer norm, softmax, gpt2 block)")
    p.add_argument("--json", help="also write the rows as JSON here")
    p.add_argument("--md", help="also write the markdown table here")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    options = {"cpu_backend": args.cpu_backend}
    kernels = "Triton" if args.device == "cuda" or args.cpu_backend == "triton" else "C++"
    rows = []
    for name, (fn, shapes, dim) in cases(args.device, args.smoke).items():
        if args.case and name not in args.case:
            continue
        rows += run_case(name, fn, shapes, args.device, options, args.smoke, None if args.all_dynamic else dim)
    table = render(rows, args.device, kernels, args.all_dynamic)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.md:
        Path(args.md).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
