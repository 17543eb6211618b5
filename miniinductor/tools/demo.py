"""``python -m miniinductor demo``: compile a GPT-2 block end to end and check it.

What it does, in order:
  1. builds a small ``GPT2Block`` (default B=2, T=64, d_model=128, 4 heads) and an
     input of shape [B, T, d_model], seeded so every run is identical;
  2. runs ``miniinductor.compare``: eager, ``miniinductor.compile`` and the real Inductor
     (``torch.compile(backend="inductor")``), each compiled, checked against eager and
     timed in turn (an Inductor failure is reported, not fatal);
  3. prints the comparison table (error, kernels, bytes moved, times), what was fused
     (each kernel with the ATen ops it came from, as ``explain`` prints it, and the fusion
     decisions), ATen fallbacks, the paths of the generated code and speed ratios;
  4. writes the same to a markdown report (``--report``, default ``miniinductor_report.md``)
     and, beside it with the suffix ``.html`` unless ``--html`` says otherwise, the HTML
     compile report with the comparison as its timings.

The demo runs inference under ``torch.no_grad()``, so only a forward graph is captured.
Exit status is 0 when miniinductor matches eager within tolerance, 1 otherwise.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import torch

from miniinductor.tools.debug.compare import BACKENDS, Comparison, Row, compare, max_abs_error
from miniinductor.tools.debug.explain import decision_lines, kernel_lines
from miniinductor.tools.models import GPT2Block, make_demo_inputs

#: the demo's input [B, T, d_model] (and 4 heads); `explain gpt2_block` defaults to it too, so that
#: both compile the same graph and print the same kernels under the same names
DEFAULT_SHAPE = (2, 64, 128)
DEFAULT_HEADS = 4


@dataclass
class DemoReport:
    """Everything the demo measured; rendered to the console and to markdown."""

    config: dict
    comparison: Comparison
    errors: dict[str, float] = field(default_factory=dict)   # "a vs b" -> max abs error
    passed: bool = False
    mismatch: str | None = None
    html: Path | None = None      # where the HTML compile report was written

    def fusion_lines(self) -> list[str]:
        """Each kernel with the ATen ops it came from, then the fusion decisions."""
        result = self.comparison.explain
        return kernel_lines(result) + decision_lines(result.decisions)

    @property
    def kernel_count(self) -> int:
        return self.comparison["miniinductor"].kernels or 0

    @property
    def fallback_ops(self) -> dict[str, int]:
        return self.comparison.fallback_ops

    @property
    def fallback_count(self) -> int:
        return sum(self.comparison.fallback_ops.values())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    B, T, C = DEFAULT_SHAPE
    parser.add_argument("--batch", type=int, default=B, help=f"batch size B (default {B})")
    parser.add_argument("--seq", type=int, default=T, help=f"sequence length T (default {T})")
    parser.add_argument("--d-model", type=int, default=C, help=f"model width (default {C})")
    parser.add_argument("--n-head", type=int, default=DEFAULT_HEADS,
                        help=f"attention heads (default {DEFAULT_HEADS})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=30,
                        help="timed runs per backend; the median is reported (default 30)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--skip-inductor", action="store_true",
                        help="do not compile with the real Inductor")
    parser.add_argument("--report", type=Path, default=Path("miniinductor_report.md"),
                        help="markdown report path (default ./miniinductor_report.md); "
                             "the HTML report goes beside it")
    parser.add_argument("--html", type=Path, default=None,
                        help="HTML compile report path (default: --report with the suffix .html)")


def run_demo(args: argparse.Namespace) -> DemoReport:
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = GPT2Block(args.d_model, args.n_head, max_seq=max(args.seq, 1)).to(device).eval()
    x = make_demo_inputs(args.batch, args.seq, args.d_model, args.seed).to(device)  # [B, T, C]
    config = {"batch": args.batch, "seq": args.seq, "d_model": args.d_model,
              "n_head": args.n_head, "device": str(device), "torch": torch.__version__,
              "threads": torch.get_num_threads(), "repeats": args.repeats}
    # eager, miniinductor and Inductor, run and timed in turn (inference, no_grad)
    # (pass_snapshots: each pass's before and after, for the HTML report's pass viewer)
    comparison = compare(model, x, repeats=args.repeats, inductor=not args.skip_inductor, pass_snapshots=True)
    report = DemoReport(config, comparison)
    eager, mini, ind = (comparison[name] for name in BACKENDS)
    for row in (mini, ind):
        if row.max_abs_error is not None:
            report.errors[f"{row.backend} vs eager"] = row.max_abs_error
    if mini.output is not None and ind.output is not None:
        report.errors["miniinductor vs inductor"] = max_abs_error(mini.output, ind.output)

    if mini.error is not None:
        report.mismatch = f"miniinductor failed: {mini.error}"
    else:
        try:
            torch.testing.assert_close(mini.output, eager.output, rtol=args.rtol, atol=args.atol)
            report.passed = True
        except AssertionError as e:
            report.mismatch = str(e)
    return report


def _fmt_ms(r: Row) -> str:
    return f"{r.median_ms:.3f}" if r.median_ms is not None else "n/a"


def _fmt_s(r: Row) -> str:
    return f"{r.first_call_s:.2f}" if r.first_call_s is not None else "n/a"


def _speedup(base: Row, other: Row) -> str:
    """How many times faster ``other`` is than ``base`` (base_ms / other_ms)."""
    if base.median_ms is None or other.median_ms is None or other.median_ms == 0:
        return "n/a"
    return f"{base.median_ms / other.median_ms:.2f}x"


def render_markdown(report: DemoReport, args: argparse.Namespace) -> str:
    c = report.config
    eager, mini, ind = (report.comparison[name] for name in BACKENDS)
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
        "| backend | first call (compile + run) s | median ms | speed-up vs eager | kernels | "
        "bytes moved | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in (eager, mini, ind):
        cells = res.cells(eager.median_ms)
        lines.append(f"| {res.backend} | {_fmt_s(res)} | {_fmt_ms(res)} | {_speedup(eager, res)} | "
                     f"{cells[2]} | {cells[3]} | {res.error or ''} |")
    lines += ["", f"miniinductor vs inductor speed: {_speedup(ind, mini)} "
              "(>1 means miniinductor is faster)", "", "| comparison | max abs error |",
              "|---|---|"]
    lines += [f"| {k} | {v:.3e} |" for k, v in report.errors.items()]
    lines += ["", f"- generated kernels: {report.kernel_count}",
              f"- ATen fallbacks: {report.fallback_count}"]
    lines += [f"  - `{op}`: {n}" for op, n in report.fallback_ops.items()]
    lines += ["- generated code:"]
    lines += [f"  - `{p}`" for p in report.comparison.output_code_paths] or ["  - (none recorded)"]
    if report.comparison.graphs:
        lines += ["", "## What was fused", "", "Each kernel with the buffers it computes and the ATen ops "
                  "they came from, then the fusion decisions:", "", "```text", *report.fusion_lines(), "```"]
    lines += ["", f"HTML compile report (phases, fusion graph, why (not) fused, memory): `{report.html}`"
              if report.html else "No HTML compile report (miniinductor compiled no graph)."]
    if report.mismatch:
        lines += ["", "## Mismatch", "", "```", report.mismatch, "```"]
    return "\n".join(lines) + "\n"


def print_summary(report: DemoReport) -> None:
    eager, mini, ind = (report.comparison[name] for name in BACKENDS)
    print("\n=== miniinductor demo ===")
    print(f"config: {report.config}")
    print(report.comparison)
    print(f"miniinductor vs inductor: {_speedup(ind, mini)} (>1: miniinductor faster)")
    for k, v in report.errors.items():
        print(f"  max abs error {k:26s} {v:.3e}")
    print(f"generated_kernel_count: {report.kernel_count}")
    print(f"fallback_count:         {report.fallback_count}")
    print(f"fallback_ops:           {report.fallback_ops}")
    print("output_code_paths:")
    for p in report.comparison.output_code_paths or ["(none recorded)"]:
        print(f"  {p}")
    if report.comparison.graphs:
        print("what was fused (kernel: buffers <- ATen ops):")
        print("\n".join(report.fusion_lines()))
    print("correctness vs eager:   " + ("PASS" if report.passed else "FAIL"))
    if report.mismatch:
        print(report.mismatch)


def main(args: argparse.Namespace) -> int:
    report = run_demo(args)
    print_summary(report)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    if report.comparison.graphs:
        beside = args.report.with_suffix(".html")
        report.html = args.html or (beside if beside != args.report else args.report.with_suffix(".md.html"))
        report.html.parent.mkdir(parents=True, exist_ok=True)
        report.comparison.write_report(report.html, title="miniinductor demo: GPT-2 block")
    args.report.write_text(render_markdown(report, args))
    print(f"markdown report written to {args.report}")
    if report.html:
        print(f"HTML compile report written to {report.html}")
    return 0 if report.passed else 1
