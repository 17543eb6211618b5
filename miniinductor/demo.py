"""``python -m miniinductor demo``: compile a GPT-2 block end to end and check it.

What it does, in order:
  1. builds a small ``GPT2Block`` (default B=2, T=64, d_model=128, 4 heads) and an
     input of shape [B, T, d_model], seeded so every run is identical;
  2. compiles it with ``miniinductor.compile`` and checks it against eager;
  3. compiles it with the real Inductor (``torch.compile(backend="inductor")``) and
     compares all three outputs (an Inductor failure is reported, not fatal);
  4. prints what miniinductor generated (kernel count, ATen fallbacks, the paths of
     the generated code) and median run times as ratios;
  5. writes the figures to a markdown report (``miniinductor_report.md``).

The demo runs inference under ``torch.no_grad()``, so only a forward graph is captured.
Exit status is 0 when miniinductor matches eager within tolerance, 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch


@dataclass
class BackendResult:
    """What one way of running the model produced."""

    name: str
    output: torch.Tensor | None = None
    first_call_s: float | None = None    # compile + first run
    median_ms: float | None = None
    error: str | None = None


@dataclass
class DemoReport:
    """Everything the demo measured; rendered to the console and to markdown."""

    config: dict
    results: dict[str, BackendResult] = field(default_factory=dict)
    errors: dict[str, float] = field(default_factory=dict)   # "a vs b" -> max abs error
    passed: bool = False
    mismatch: str | None = None
    kernel_count: int = 0
    fallback_count: int = 0
    fallback_ops: dict[str, int] = field(default_factory=dict)
    output_code_paths: list[str] = field(default_factory=list)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=2, help="batch size B (default 2)")
    parser.add_argument("--seq", type=int, default=64, help="sequence length T (default 64)")
    parser.add_argument("--d-model", type=int, default=128, help="model width (default 128)")
    parser.add_argument("--n-head", type=int, default=4, help="attention heads (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=30,
                        help="timed runs per backend; the median is reported (default 30)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--skip-inductor", action="store_true",
                        help="do not compile with the real Inductor")
    parser.add_argument("--report", type=Path, default=Path("miniinductor_report.md"),
                        help="markdown report path (default ./miniinductor_report.md)")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _build(name: str, make: Callable[[], Callable], x: torch.Tensor,
           device: torch.device) -> tuple[BackendResult, Callable | None]:
    """Build a callable with ``make()`` and run it once, timing compile + first run."""
    result = BackendResult(name)
    try:
        t0 = time.perf_counter()
        fn = make()
        result.output = fn(x)
        _sync(device)
        result.first_call_s = time.perf_counter() - t0
        return result, fn
    except Exception as e:  # a failing backend is reported, not fatal
        result.error = f"{type(e).__name__}: {e}".strip()
        traceback.print_exc()
        return result, None


def _time_interleaved(runs: dict[str, tuple[BackendResult, Callable]], x: torch.Tensor,
                      repeats: int, device: torch.device) -> None:
    """Median ms per backend, timing them in turn (a, b, c, a, b, c, ...).

    Interleaving spreads any change in machine load evenly over the backends.
    """
    for _, fn in runs.values():          # warm-up
        for _ in range(3):
            fn(x)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(max(1, repeats)):
        for name, (_, fn) in runs.items():
            _sync(device)
            t0 = time.perf_counter()
            fn(x)
            _sync(device)
            times[name].append((time.perf_counter() - t0) * 1e3)
    for name, (result, _) in runs.items():
        result.median_ms = statistics.median(times[name])


def _max_abs_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def run_demo(args: argparse.Namespace) -> DemoReport:
    import miniinductor
    from miniinductor import metrics
    from miniinductor.models import GPT2Block, make_demo_inputs

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = GPT2Block(args.d_model, args.n_head, max_seq=max(args.seq, 1)).to(device).eval()
    x = make_demo_inputs(args.batch, args.seq, args.d_model, args.seed).to(device)  # [B, T, C]
    report = DemoReport(config={
        "batch": args.batch, "seq": args.seq, "d_model": args.d_model,
        "n_head": args.n_head, "device": str(device), "torch": torch.__version__,
        "threads": torch.get_num_threads(), "repeats": args.repeats,
    })

    with torch.no_grad():
        eager, eager_fn = _build("eager", lambda: model, x, device)
        metrics.reset()
        mini, mini_fn = _build("miniinductor", lambda: miniinductor.compile(model), x, device)
        # Read our counters before Inductor runs, so nothing else can touch them.
        report.kernel_count = metrics.generated_kernel_count
        report.fallback_count = metrics.fallback_count
        report.fallback_ops = dict(metrics.fallback_ops.most_common())
        report.output_code_paths = list(metrics.output_code_paths)
        if args.skip_inductor:
            ind, ind_fn = BackendResult("inductor", error="skipped (--skip-inductor)"), None
        else:
            ind, ind_fn = _build("inductor", lambda: torch.compile(model, backend="inductor"),
                                 x, device)
        built = {r.name: (r, fn) for r, fn in ((eager, eager_fn), (mini, mini_fn),
                                               (ind, ind_fn)) if fn is not None}
        _time_interleaved(built, x, args.repeats, device)
    report.results = {r.name: r for r in (eager, mini, ind)}

    pairs = [("miniinductor", "eager"), ("inductor", "eager"), ("miniinductor", "inductor")]
    for a, b in pairs:
        oa, ob = report.results[a].output, report.results[b].output
        if oa is not None and ob is not None:
            report.errors[f"{a} vs {b}"] = _max_abs_err(oa, ob)

    if mini.output is None:
        report.mismatch = f"miniinductor failed: {mini.error}"
    else:
        try:
            torch.testing.assert_close(mini.output, eager.output,
                                       rtol=args.rtol, atol=args.atol)
            report.passed = True
        except AssertionError as e:
            report.mismatch = str(e)
    return report


def _fmt_ms(r: BackendResult) -> str:
    return f"{r.median_ms:.3f}" if r.median_ms is not None else "n/a"


def _fmt_s(r: BackendResult) -> str:
    return f"{r.first_call_s:.2f}" if r.first_call_s is not None else "n/a"


def _speedup(base: BackendResult, other: BackendResult) -> str:
    """How many times faster ``other`` is than ``base`` (base_ms / other_ms)."""
    if base.median_ms is None or other.median_ms is None or other.median_ms == 0:
        return "n/a"
    return f"{base.median_ms / other.median_ms:.2f}x"


def render_markdown(report: DemoReport, args: argparse.Namespace) -> str:
    c, r = report.config, report.results
    eager, mini, ind = r["eager"], r["miniinductor"], r["inductor"]
    lines = [
        "# miniinductor demo report",
        "",
        f"Model: `GPT2Block(d_model={c['d_model']}, n_head={c['n_head']})`, input "
        f"`[{c['batch']}, {c['seq']}, {c['d_model']}]`, device `{c['device']}`, "
        f"torch `{c['torch']}`, {c['threads']} threads, median of {c['repeats']} runs.",
        "",
        f"Correctness vs eager (rtol={args.rtol}, atol={args.atol}): "
        f"**{'PASS' if report.passed else 'FAIL'}**",
        "",
        "| backend | first call (compile + run) s | median ms | speed-up vs eager | error |",
        "|---|---|---|---|---|",
    ]
    for res in (eager, mini, ind):
        lines.append(f"| {res.name} | {_fmt_s(res)} | {_fmt_ms(res)} | "
                     f"{_speedup(eager, res)} | {res.error or ''} |")
    lines += ["", f"miniinductor vs inductor speed: {_speedup(ind, mini)} "
              "(>1 means miniinductor is faster)", "", "| comparison | max abs error |",
              "|---|---|"]
    lines += [f"| {k} | {v:.3e} |" for k, v in report.errors.items()]
    lines += ["", f"- generated kernels: {report.kernel_count}",
              f"- ATen fallbacks: {report.fallback_count}"]
    lines += [f"  - `{op}`: {n}" for op, n in report.fallback_ops.items()]
    lines += ["- generated code:"]
    lines += [f"  - `{p}`" for p in report.output_code_paths] or ["  - (none recorded)"]
    if report.mismatch:
        lines += ["", "## Mismatch", "", "```", report.mismatch, "```"]
    return "\n".join(lines) + "\n"


def print_summary(report: DemoReport) -> None:
    r = report.results
    eager, mini, ind = r["eager"], r["miniinductor"], r["inductor"]
    print("\n=== miniinductor demo ===")
    print(f"config: {report.config}")
    for res in (eager, mini, ind):
        status = f"ERROR {res.error}" if res.error else "ok"
        print(f"  {res.name:13s} first call {_fmt_s(res):>7s} s   median {_fmt_ms(res):>9s} ms"
              f"   vs eager {_speedup(eager, res):>6s}   {status}")
    print(f"  miniinductor vs inductor: {_speedup(ind, mini)} (>1: miniinductor faster)")
    for k, v in report.errors.items():
        print(f"  max abs error {k:26s} {v:.3e}")
    print(f"generated_kernel_count: {report.kernel_count}")
    print(f"fallback_count:         {report.fallback_count}")
    print(f"fallback_ops:           {report.fallback_ops}")
    print("output_code_paths:")
    for p in report.output_code_paths or ["(none recorded)"]:
        print(f"  {p}")
    print("correctness vs eager:   " + ("PASS" if report.passed else "FAIL"))
    if report.mismatch:
        print(report.mismatch)


def main(args: argparse.Namespace) -> int:
    report = run_demo(args)
    print_summary(report)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(render_markdown(report, args))
    print(f"report written to {args.report}")
    return 0 if report.passed else 1
