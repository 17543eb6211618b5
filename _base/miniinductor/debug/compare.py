"""`miniinductor.compare(fn, *inputs)`: eager, miniinductor and real Inductor, side by side.

Phase 7 (debug). In: a function or module and example inputs. Out: a `Comparison` with
one `Row` per backend -- max abs error against eager, kernels generated, bytes the
generated kernels move, the first call (compile + run) and the median time of a call --
that prints as a table (`str()`), shows as HTML in Jupyter (`_repr_html_`), and feeds the
HTML report's timings (`comparison.write_report(path)`, or
`explain_result.write_report(path, timings=comparison.timings())`).

Real Inductor has no single twin: its numbers come from `torch/_inductor/metrics.py`
(`generated_kernel_count`, and `num_bytes_accessed` / `nodes_num_elem`, which Inductor
fills only while its `inductor_metrics` log is on; we switch it on quietly for the one
compile). Bytes are counted for generated kernels only, extern calls (matmuls) excluded,
on both sides. An Inductor failure is caught and reported in its row, never raised.

Timing: after three warm-up calls the backends are timed in turn (eager, mini, inductor,
eager, ...), so a change in machine load hits all of them alike; CUDA is synchronised.
Everything runs under `torch.no_grad()` (inference) unless `no_grad=False`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import html
import logging
import statistics
import time

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .. import metrics
from ..compile_fx import collect_compiled
from ..compile_fx import compile as mi_compile
from .explain import ExplainResult
from .fusion_graph import human_bytes

BACKENDS = ("eager", "miniinductor", "inductor")


@dataclasses.dataclass
class Row:
    """What one backend did. `None` means not measured (e.g. eager has no kernels)."""

    backend: str
    max_abs_error: float | None = None   # against eager, over every output tensor
    kernels: int | None = None           # generated kernels (extern calls excluded)
    bytes_moved: int | None = None       # bytes those kernels read + write, estimated
    first_call_s: float | None = None    # compile + first run
    median_ms: float | None = None
    error: str | None = None             # why this backend failed (it is then not timed)
    output: object = dataclasses.field(default=None, repr=False)

    def cells(self, eager_ms: float | None) -> list[str]:
        def num(v, fmt):
            return "-" if v is None else format(v, fmt)
        speedup = (f"{eager_ms / self.median_ms:.2f}x" if eager_ms and self.median_ms else "-")
        return [self.backend, num(self.max_abs_error, ".2e"), num(self.kernels, "d"),
                "-" if self.bytes_moved is None else human_bytes(self.bytes_moved),
                num(self.first_call_s, ".2f"), num(self.median_ms, ".3f"), speedup,
                self.error or "ok"]


HEADER = ["backend", "max abs err", "kernels", "bytes moved", "first call s", "median ms",
          "vs eager", "status"]


@dataclasses.dataclass
class Comparison:
    rows: list[Row]
    graphs: list = dataclasses.field(default_factory=list, repr=False)  # our CompiledGraphs
    fallback_ops: dict = dataclasses.field(default_factory=dict)        # op → times it fell back
    output_code_paths: list = dataclasses.field(default_factory=list)

    def __getitem__(self, backend: str) -> Row:
        for row in self.rows:
            if row.backend == backend:
                return row
        raise KeyError(f"no row for {backend!r}; rows: {[r.backend for r in self.rows]}")

    def __iter__(self):
        return iter(self.rows)

    def timings(self) -> dict:
        """{backend: {column: value}}: the HTML report's `timings=` argument."""
        eager_ms = self["eager"].median_ms
        return {r.backend: dict(zip(HEADER[1:], r.cells(eager_ms)[1:])) for r in self.rows}

    def __str__(self):
        eager_ms = self["eager"].median_ms
        table = [HEADER] + [r.cells(eager_ms) for r in self.rows]
        widths = [max(len(line[i]) for line in table) for i in range(len(HEADER) - 1)]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
                 + "  " + line[-1] for line in table]
        lines.insert(1, "-" * max(len(x) for x in lines))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        eager_ms = self["eager"].median_ms
        head = "".join(f"<th>{h}</th>" for h in HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r.cells(eager_ms)) + "</tr>"
                       for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    @property
    def explain(self):
        """miniinductor's side as an `ExplainResult` (kernels, decisions, report, trace)."""
        return ExplainResult(self.graphs, self["miniinductor"].output)

    def write_report(self, path, **kwargs):
        """The HTML report of miniinductor's graphs, with this table as its timings."""
        return self.explain.write_report(path, timings=self.timings(), **kwargs)


# --------------------------------------------------------------------------- measuring
def _error_text(exc: BaseException) -> str:
    """One line: the exception's type and first line (Dynamo's wrapper unwrapped)."""
    exc = getattr(exc, "inner_exception", None) or exc   # torch._dynamo's BackendCompilerFailed
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def max_abs_error(out, ref) -> float:
    """Largest |out - ref| over all tensors of two (nested) outputs of the same structure."""
    flat_out, spec_out = tree_flatten(out)
    flat_ref, spec_ref = tree_flatten(ref)
    if spec_out != spec_ref:
        raise ValueError(f"output structure differs from eager's: {spec_out} vs {spec_ref}")
    err = 0.0
    for a, b in zip(flat_out, flat_ref):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape:
                raise ValueError(f"output shape {tuple(a.shape)} differs from eager's {tuple(b.shape)}")
            if a.numel():
                diff = (a.detach().double() - b.detach().double()).abs()
                both_nan = a.isnan() & b.isnan()
                same_inf = (a == b)
                err = max(err, diff.masked_fill(both_nan | same_inf, 0).max().item())
        elif a != b:
            err = float("inf")
    return err


def _sync(inputs):
    if any(isinstance(x, torch.Tensor) and x.is_cuda for x in tree_flatten(inputs)[0]):
        torch.cuda.synchronize()


def _copy_inputs(inputs):
    """Fresh copies per backend, so one that mutates its inputs cannot affect another."""
    return tree_map(lambda x: x.detach().clone().requires_grad_(x.requires_grad)
                    if isinstance(x, torch.Tensor) else x, inputs)


@contextlib.contextmanager
def inductor_metrics_on():
    """Inductor counts bytes only while its `inductor_metrics` artifact log is enabled;
    the log has no handler of its own, so enabling it prints nothing."""
    from torch._inductor.compile_fx import inductor_metrics_log as log
    old = log.level
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.setLevel(old)


def _inductor_bytes() -> int | None:
    from torch._inductor import metrics
    from torch._inductor.scheduler import ExternKernelSchedulerNode
    if not metrics.nodes_num_elem:
        return None
    # nodes_num_elem holds (node, bytes // 4) per scheduler node; drop extern calls as we do.
    return sum(n * 4 for node, n in metrics.nodes_num_elem if not isinstance(node, ExternKernelSchedulerNode))


def _first_call(row: Row, make, inputs):
    """Build a callable with `make()` and run it once; record the time or the failure."""
    try:
        t0 = time.perf_counter()
        fn = make()
        row.output = fn(*inputs)
        _sync(inputs)
        row.first_call_s = time.perf_counter() - t0
        return fn
    except Exception as exc:  # a failing backend is reported in its row, not raised
        row.error = _error_text(exc)
        return None


def _time(runs: dict, repeats: int, warmup: int):
    for row, fn, inputs in runs.values():
        for _ in range(warmup):
            fn(*inputs)
    times = {name: [] for name in runs}
    for _ in range(max(1, repeats)):
        for name, (row, fn, inputs) in runs.items():
            _sync(inputs)
            t0 = time.perf_counter()
            fn(*inputs)
            _sync(inputs)
            times[name].append((time.perf_counter() - t0) * 1e3)
    for name, (row, _, _) in runs.items():
        row.median_ms = statistics.median(times[name])


def compare(fn, *example_inputs, repeats: int = 20, warmup: int = 3, inductor: bool = True,
            no_grad: bool = True, **options) -> Comparison:
    """Run `fn(*example_inputs)` eagerly, with miniinductor (`**options`) and with Inductor.

    A bad miniinductor option raises ValueError; a backend that fails to compile or run
    is reported in its row (`Row.error`) and left out of the timing.
    repeats: timed calls per backend (the median is reported; 0 skips timing).
    inductor: False leaves real Inductor out (its row says "skipped").
    """
    from torch._inductor import config as inductor_config
    from torch._inductor import metrics as inductor_metrics
    rows = {name: Row(name) for name in BACKENDS}
    inputs = {name: _copy_inputs(example_inputs) for name in BACKENDS}
    fns = {}
    grad_mode = torch.no_grad() if no_grad else contextlib.nullcontext()
    with grad_mode:
        torch._dynamo.reset()       # compile afresh: a cached graph would not count its kernels
        fns["eager"] = _first_call(rows["eager"], lambda: fn, inputs["eager"])
        if fns["eager"] is None:
            raise RuntimeError(f"eager run of {getattr(fn, '__name__', fn)} failed: {rows['eager'].error}")

        compiled = mi_compile(fn, **options)   # a bad option raises here, before anything runs
        metrics.reset()
        with collect_compiled() as graphs:
            fns["miniinductor"] = _first_call(rows["miniinductor"], lambda: compiled, inputs["miniinductor"])
        if fns["miniinductor"] is not None:
            rows["miniinductor"].kernels = metrics.generated_kernel_count
            rows["miniinductor"].bytes_moved = metrics.estimated_bytes_moved
        fallback_ops, code_paths = dict(metrics.fallback_ops.most_common()), list(metrics.output_code_paths)

        if inductor:
            inductor_metrics.reset()
            # No FX-graph cache: a cache hit would skip the byte counting.
            with inductor_metrics_on(), inductor_config.patch(fx_graph_cache=False):
                fns["inductor"] = _first_call(rows["inductor"], lambda: torch.compile(fn, backend="inductor"),
                                              inputs["inductor"])
            if fns["inductor"] is not None:
                rows["inductor"].kernels = inductor_metrics.generated_kernel_count
                rows["inductor"].bytes_moved = _inductor_bytes()
        else:
            rows["inductor"].error = "skipped"

        for name, row in rows.items():
            if row.output is not None:
                try:
                    row.max_abs_error = max_abs_error(row.output, rows["eager"].output)
                except ValueError as exc:
                    row.error = str(exc)
        if repeats > 0:
            _time({n: (rows[n], f, inputs[n]) for n, f in fns.items() if f is not None}, repeats, warmup)
    return Comparison(list(rows.values()), list(graphs), fallback_ops, code_paths)
