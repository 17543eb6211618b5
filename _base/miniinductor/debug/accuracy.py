"""`miniinductor.debug_accuracy(fn, *inputs)`: the buffer and kernel behind a wrong answer.

Phase 7 (debug). In: a function or module and example inputs. Out: an `AccuracyReport`
that names the first buffer, in execution order, whose compiled value departs from
its reference while its inputs agree -- its kernel's name and source, the ATen nodes it
came from, its fused group, the largest error and where -- and, with `repro_dir`, a
standalone script that reruns that one kernel on saved inputs (kernel_repro.py; nothing
is written anywhere else). When no buffer departs but the results differ from eager, the
report says where the error must come from instead (below), and is not clean.

Every buffer of every graph is computed three ways, on the inputs the compiled graph
was really called with (recorded on its first call, forward and backward):
  kernel  the generated wrapper regenerated with `record=True` (codegen/wrapper.py), so
          that `call` hands over each buffer right after the step that defines it;
  IR      `ir.interpreter.evaluate_buffer` on the *kernel's* values of its inputs, so a
          kernel that departs from its own IR is caught where it departs;
  ATen    the ATen graph run node by node (`torch.fx.Interpreter`), for the buffers that
          hold an FX node's value (`GraphLowering.node_values`).
kernel != IR on the same inputs means codegen (fusion, indexing, a race); IR != ATen
means lowering. Then, for that buffer, levels:
  fusion    a rerun with fusion=False: right now → a fusion bug, still wrong → not fusion;
  fallback  a rerun with its ATen ops as ATen calls (`fallback_ops`): right now → confirmed;
  float64   the ATen graph rerun with every float widened to float64; eager's error and
            the compiled error against it tell an accuracy issue (accumulation order, TF32:
            last digits, like eager's) from a logic bug (leading digits).
Every buffer's reference is computed from the *decomposed* ATen graph, so a wrong
decomposition passes them all. Whenever the outputs or gradients differ from eager (and
"decomposition" is in `levels`, as by default), one more level runs, on the whole function:
  decomposition  the same capture with each ATen graph run eagerly instead of compiled,
            against eager; if it already differs, a decomposition is wrong, and bisection
            over the decompositions that ran names the one (decomposition_check.py).
The report is clean only when no buffer departs *and* the outputs and gradients agree with
eager; when they differ and no buffer departs, it says where the error must come from.

Mirrors the purpose of Inductor's accuracy minifier (`torch/_dynamo/repro/after_aot.py`,
`TORCHDYNAMO_REPRO_LEVEL=4`), which shrinks the graph until the error persists; having
an interpreter for our IR, we localise instead of shrinking. Simplified: random ops
(dropout) would differ between the runs and are not supported; values are compared in
float64 on the CPU.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten

from ..compile_fx import collect_compiled, load_wrapper
from ..compile_fx import compile as mi_compile
from ..ir.interpreter import evaluate_buffer, run_extern
from ..ir.nodes import Buffer, ComputedBuffer, ExternKernel, InputBuffer, MultiOutput, StorageBox, TemplateBuffer
from ..logs import plural
from ..scheduler import FusedGroup
from ..virtualized import V
from .compare import _copy_inputs, max_abs_error
from .decomposition_check import DecompositionCheck, check_decompositions
from .kernel_repro import write_repro
from .report import write_report

LEVELS = ("fusion", "fallback", "float64", "decomposition")
#: float32 keeps ~7 digits; accumulation order or TF32 (10-bit mantissa) changes the last
#: ones: a relative error (to the value's largest magnitude) under this is "accuracy" ...
PRECISION_FLOOR = {torch.float32: 5e-3, torch.float16: 5e-2, torch.bfloat16: 5e-2, torch.float64: 1e-9}
#: ... and so is one within this factor of eager's own error against float64.
EAGER_FACTOR = 100
#: ... and a bool/integer buffer is an accuracy issue when at most this share of it flips
FLIP_SHARE = 1e-4


@dataclasses.dataclass
class Error:
    """How far `got` is from `expected`: the largest |difference|, where, and whether any
    element is outside atol + rtol * |expected|."""

    max_abs: float
    where: tuple
    got: float
    expected: float
    bad: bool

    def __str__(self):
        return f"max abs error {self.max_abs:.3g} at {list(self.where)} (got {self.got:.6g}, expected {self.expected:.6g})"


def tensor_error(got: torch.Tensor, expected: torch.Tensor, rtol=0.0, atol=0.0) -> Error:
    g, e = got.detach().cpu().double(), expected.detach().cpu().double()
    diff = (g - e).abs()
    diff = torch.where((g == e) | (g.isnan() & e.isnan()), torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=float("inf"))       # NaN on one side only
    if not diff.numel():
        return Error(0.0, (), 0.0, 0.0, False)
    k = int(diff.reshape(-1).argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(k), diff.shape))
    bad = bool((diff > atol + rtol * e.abs()).any())
    return Error(float(diff.reshape(-1)[k]), where, float(g.reshape(-1)[k]), float(e.reshape(-1)[k]), bad)


@dataclasses.dataclass
class BufferCheck:
    graph: int                    # index into AccuracyReport.graphs
    name: str
    kernel: str                   # kernel name, or "extern"
    origins: list[str]            # the ATen FX nodes it was lowered from
    aten: str | None              # the FX node whose value it holds (compared with eager)
    in_registers: bool            # kept out of memory by its kernel: only its IR value exists
    kernel_vs_ir: Error | None = None
    vs_eager: Error | None = None

    @property
    def bad(self) -> bool:
        return any(e is not None and e.bad for e in (self.kernel_vs_ir, self.vs_eager))

    @property
    def max_error(self) -> float | None:
        errors = [e.max_abs for e in (self.kernel_vs_ir, self.vs_eager) if e is not None]
        return max(errors) if errors else None


@dataclasses.dataclass
class AccuracyReport:
    graphs: list                  # the CompiledGraphs, in the order they ran
    checks: list[BufferCheck]     # every buffer of every graph, in execution order
    output_error: float           # compiled vs eager over outputs (and input gradients)
    culprit: BufferCheck | None = None
    #: "codegen" (kernel != its IR), "lowering" (IR != ATen); with no bad buffer but results
    #: that differ from eager: "decomposition" (the decomposed graph run eagerly differs
    #: already) or "unlocated" (it does not, or that level did not run)
    kind: str = ""
    levels: dict = dataclasses.field(default_factory=dict)   # level → one-line verdict
    repro: Path | None = None     # standalone script rerunning the culprit's kernel (repro_dir=)
    outputs_agree: bool = False   # outputs (and gradients) within rtol/atol of eager's
    decomposition: DecompositionCheck | None = None   # the decomposition level, if it ran
    gradients: bool = False       # output_error covers gradients too

    @property
    def clean(self) -> bool:
        """No buffer departs and the outputs and gradients agree with eager's."""
        return self.culprit is None and self.outputs_agree

    @property
    def kernel_source(self) -> str | None:
        cg = self.graphs[self.culprit.graph] if self.culprit else None
        return cg.kernels[self.culprit.kernel].source if cg and self.culprit.kernel in cg.kernels else None

    def fused_group(self) -> list[str]:
        if self.culprit is None:
            return []
        return next((g.get_names() for g in self.graphs[self.culprit.graph].fused_groups()
                     if g.kernel_name == self.culprit.kernel), [self.culprit.name])

    def buffer_errors(self) -> list[dict[str, float]]:
        """Per graph, {buffer: its largest error}: the HTML report's error column."""
        out = [{} for _ in self.graphs]
        for c in self.checks:
            if c.max_error is not None:
                out[c.graph][c.name] = c.max_error
        return out

    def write_report(self, path, **kwargs):
        kwargs.setdefault("title", "miniinductor debug_accuracy: " + str(self).splitlines()[1])
        return write_report(self.graphs, path, buffer_errors=self.buffer_errors(), **kwargs)

    def __str__(self):
        head = (f"debug_accuracy: {plural(len(self.checks), 'buffer')} in {plural(len(self.graphs), 'graph')} checked; "
                f"outputs{' and gradients' if self.gradients else ''} vs eager: max abs error {self.output_error:.3g}")
        if self.culprit is None:
            return "\n".join([head] + self._unlocated())
        c, cg = self.culprit, self.graphs[self.culprit.graph]
        what = ("the kernel departs from its own IR on the same inputs (codegen: fusion, indexing, a race)"
                if self.kind == "codegen" else "the IR departs from ATen on agreeing inputs (lowering)")
        lines = [head, f"first bad buffer: {cg.graph.name}.{c.name}, computed by kernel {c.kernel}",
                 f"  {what}",
                 f"  from ATen nodes: {', '.join(self._origin_text(cg, c.origins))}",
                 f"  fused group: {', '.join(self.fused_group())}"]
        lines += [f"  kernel vs IR: {c.kernel_vs_ir}"] if c.kernel_vs_ir else []
        lines += [f"  vs eager ATen ({c.aten}): {c.vs_eager}"] if c.vs_eager else []
        lines += [f"  {level}: {verdict}" for level, verdict in self.levels.items()]
        if self.repro or c.kernel in cg.kernels:
            lines.append(f"  repro: python {self.repro}" if self.repro else
                         "  repro: not written (repro_dir= or --repro-dir DIR writes a script rerunning this kernel)")
        return "\n".join(lines)

    def _unlocated(self) -> list[str]:
        """The verdict when no buffer departs from its own reference."""
        if self.outputs_agree:
            return ["no buffer departs: clean"]
        lines = ["no buffer departs from its own reference (the ATen graph it was lowered from), "
                 "yet the outputs or gradients differ from eager beyond tolerance: NOT clean"]
        check = self.decomposition
        if check is not None and check.wrong:
            return lines + [f"  decomposition: {check}"]
        if check is not None and check.agrees:
            return lines + [f"  decomposition: {check}",
                            "  so the error enters after decomposition, outside the buffers checked: a pass that "
                            "rewrites the ATen graph before lowering, a graph run without being compiled, or how "
                            "the compiled graph returns its outputs (views, strides, input mutations)"]
        return lines + [f"  decomposition: {check}" if check is not None else
                        "  decomposition: level not run (it tells whether the decomposed graph is already wrong)",
                        "  the error comes from a decomposition or capture, a pass that rewrites the ATen graph "
                        "before lowering, a graph run without being compiled, or how the compiled graph returns its outputs"]

    @staticmethod
    def _origin_text(cg, origins):
        nodes = {n.name: n for n in cg.graph.module.graph.nodes}
        return [f"{o} ({nodes[o].target})" if o in nodes else o for o in origins]


# --------------------------------------------------------------------------- running
def _leaves(fn, inputs):
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return [x for x in tree_flatten(inputs)[0] if isinstance(x, torch.Tensor) and x.requires_grad] + params


def run_fn(fn, inputs, backward: bool, seed: int = 0, n_outputs: list | None = None) -> list[torch.Tensor]:
    """fn's tensor outputs and, if `backward`, the gradients of its tensor inputs and
    parameters for fixed random output gradients (the same for every run). The number of
    outputs is appended to `n_outputs` if given."""
    inputs = _copy_inputs(inputs)
    outs = [t for t in tree_flatten(fn(*inputs))[0] if isinstance(t, torch.Tensor)]
    results = [t.detach() for t in outs]
    if n_outputs is not None:
        n_outputs.append(len(outs))
    diff = [t for t in outs if t.requires_grad and t.dtype.is_floating_point]
    leaves = _leaves(fn, inputs)
    if backward and diff and leaves:
        gen = torch.Generator().manual_seed(seed)
        grads = [torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype).to(t.device) for t in diff]
        results += [g for g in torch.autograd.grad(diff, leaves, grads, allow_unused=True) if g is not None]
    return results


def _compiled_run(fn, inputs, backward, seed, options):
    """Run compiled; returns (results, [(CompiledGraph, args of its first call)])."""
    first_args = {}

    def record_args(cg):
        inner = cg.call

        def call(args):
            first_args.setdefault(id(cg), _clone(args))
            return inner(args)
        cg.call = call
    torch._dynamo.reset()
    with collect_compiled(record_args) as graphs:
        results = run_fn(mi_compile(fn, **options), inputs, backward, seed)
    return results, [(cg, first_args[id(cg)]) for cg in graphs if id(cg) in first_args]


def _clone(args):
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]


def kernel_values(cg, args) -> dict[str, torch.Tensor]:
    """Every buffer `call` defines, as it stands right after the step that defines it."""
    with V.set_graph_handler(cg.graph):
        source = cg.wrapper.generate(cg.plan, record=True)
    module, _ = load_wrapper(source)
    module.constants.update(cg.graph.constants)
    values = {}
    module.record = lambda name, t: values.__setitem__(name, t.detach().clone()) \
        if isinstance(t, torch.Tensor) else None
    module.call(_clone(args))
    return values


def ir_values(cg, args, kernel: dict) -> dict[str, object]:
    """Each buffer evaluated by the IR interpreter from the kernel's values of its inputs
    (its own IR values where the kernel kept a buffer in registers)."""
    graph = cg.graph
    memory = dict(zip(graph.graph_input_names, _clone(args)))
    memory.update(graph.constants)
    values = {}
    with V.set_graph_handler(graph):
        for buf in graph.buffers:
            name = buf.get_name()
            if isinstance(buf, ComputedBuffer):
                values[name] = evaluate_buffer(buf, memory)
            elif isinstance(buf, (ExternKernel, MultiOutput, TemplateBuffer)):
                values[name] = memory[name] = run_extern(buf, memory)
            if name in kernel:
                memory[name] = kernel[name]
    return values


class _NodeValues(torch.fx.Interpreter):
    """The ATen graph run node by node, keeping every value; `widen` runs every floating
    tensor and dtype argument as float64."""

    def __init__(self, gm, widen=False):
        super().__init__(gm, garbage_collect_values=False)
        self.widen = widen

    def _wide(self, x):
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            return x.double()
        if isinstance(x, torch.dtype) and x.is_floating_point:
            return torch.float64
        return x

    def call_function(self, target, args, kwargs):
        if self.widen:
            args, kwargs = torch.utils._pytree.tree_map(self._wide, (args, kwargs))
        return super().call_function(target, args, kwargs)

    def values(self, args) -> dict[str, object]:
        args = [self._wide(a) if self.widen else a for a in _clone(args)]
        self.run(*args)
        return {n.name: v for n, v in self.env.items()}


def buffer_nodes(graph) -> dict[str, str]:
    """{buffer: the first FX node whose lowered value is that buffer}."""
    found = {}
    for node, value in graph.node_values.items():
        value = value.data if isinstance(value, StorageBox) else value
        if isinstance(value, Buffer) and not isinstance(value, InputBuffer):
            found.setdefault(value.get_name(), node)
    return found


def execution_order(cg):
    """(buffer, kernel name or "extern") in the order `call` computes them."""
    for item in cg.scheduler.schedule:
        if isinstance(item, FusedGroup):
            yield from ((name, item.kernel_name) for name in item.get_names())
        else:
            yield item.node.get_name(), "extern"


def check_graph(index, cg, args, rtol, atol) -> tuple[list[BufferCheck], dict]:
    kernel = kernel_values(cg, args)
    ir = ir_values(cg, args, kernel)
    eager = _NodeValues(cg.graph.module).values(args)
    nodes = buffer_nodes(cg.graph)
    checks = []
    for name, kname in execution_order(cg):
        buf = cg.graph.get_buffer(name)
        origins = sorted(getattr(getattr(buf, "data", None), "origins", ()) or ())
        check = BufferCheck(index, name, kname, origins, nodes.get(name), name not in kernel)
        value = kernel.get(name, ir.get(name))
        if name in kernel and isinstance(ir.get(name), torch.Tensor):
            check.kernel_vs_ir = tensor_error(kernel[name], ir[name], rtol, atol)
        ref = eager.get(check.aten)
        if isinstance(ref, torch.Tensor) and isinstance(value, torch.Tensor) and ref.shape == value.shape:
            check.vs_eager = tensor_error(value, ref, rtol, atol)
        checks.append(check)
    return checks, {"kernel": kernel, "ir": ir, "eager": eager}


# --------------------------------------------------------------------------- levels
@dataclasses.dataclass
class _Job:
    """One `debug_accuracy` call: what to run, how, and eager's results to judge reruns by."""

    fn: object
    inputs: tuple
    backward: bool
    seed: int
    options: dict
    rtol: float
    atol: float
    reference: list
    n_outputs: int                # reference[:n_outputs] are outputs, the rest gradients

    def run(self, **options) -> list:
        """Compile again with these options on top and run: the results."""
        return _compiled_run(self.fn, self.inputs, self.backward, self.seed, {**self.options, **options})[0]

    def rerun(self, **options) -> tuple[bool, float]:
        """Compile again with these options on top: (right now?, max abs error vs eager)."""
        return self.judge(self.run(**options))

    def judge(self, results) -> tuple[bool, float]:
        """(results agree with eager's within rtol/atol?, max abs error vs eager)."""
        return self.judge_split(results)[:2]

    def judge_split(self, results) -> tuple[bool, float, float]:
        """judge's two answers, and the max abs error over the outputs alone."""
        if len(results) != len(self.reference):
            return False, float("inf"), float("inf")
        ok = all(not tensor_error(r, e, self.rtol, self.atol).bad for r, e in zip(results, self.reference))
        n = self.n_outputs
        return ok, max_abs_error(results, self.reference), max_abs_error(results[:n], self.reference[:n])


def float64_verdict(value, eager32, eager64) -> str:
    """'accuracy' or 'logic', with both errors against float64, relative to the value's scale."""
    scale = max(float(eager64.detach().abs().max()), 1e-30) if eager64.numel() else 1.0
    compiled = tensor_error(value, eager64).max_abs / scale
    eager = tensor_error(eager32, eager64).max_abs / scale
    floor = PRECISION_FLOOR.get(value.dtype, 0.0)
    kind = "accuracy" if compiled <= max(EAGER_FACTOR * eager, floor) else "logic"
    return (f"{kind}: against float64, compiled error {compiled:.2g} and eager error {eager:.2g} "
            f"(relative to max |value| {scale:.3g})")


def flip_verdict(value, eager32, eager64) -> str:
    """A bool or integer buffer (a comparison's mask, say) departs on inputs that agree within
    tolerance: where only a few elements flip, a compared value lay within rounding of its
    threshold (accuracy: a ReLU mask flips for one pre-activation of ~1e-8); many is logic."""
    n = max(value.numel(), 1)
    value, eager32, eager64 = (t.detach().cpu() for t in (value, eager32, eager64))
    flips = int((value != eager32).sum())
    vs64 = int((value != eager64.to(value.dtype)).sum())
    eager_vs64 = int((eager32 != eager64.to(eager32.dtype)).sum())
    kind = "accuracy" if flips <= max(1, FLIP_SHARE * n) else "logic"
    return (f"{kind}: {flips} of {n} elements differ from eager on inputs that agree within tolerance "
            f"(against float64: compiled differs in {vs64}, eager in {eager_vs64})"
            + ("; a compared value lies within rounding of its threshold" if kind == "accuracy" else ""))


# --------------------------------------------------------------------------- the tool
def debug_accuracy(fn, *inputs, backward: bool = True, rtol: float = 1e-4, atol: float = 1e-5,
                   levels=LEVELS, repro_dir=None, seed: int = 0, **options) -> AccuracyReport:
    """Compile `fn` (with `**options`), run it forward and, if `backward`, backward with
    fixed random output gradients; check every buffer of every graph (kernel vs IR vs
    ATen, see the module docstring) and return the report. `levels`: which of "fusion",
    "fallback", "float64" to run on the first bad buffer, and whether to run
    "decomposition" when the results differ from eager. `repro_dir`: where the script
    reproducing the bad buffer's kernel goes (none is written without it)."""
    unknown = set(levels) - set(LEVELS)
    if unknown:
        raise ValueError(f"unknown levels {sorted(unknown)}; valid: {', '.join(LEVELS)}")
    n_outputs = []
    reference = run_fn(fn, inputs, backward, seed, n_outputs)
    results, recorded = _compiled_run(fn, inputs, backward, seed, options)
    graphs = [cg for cg, _ in recorded]
    job = _Job(fn, inputs, backward, seed, options, rtol, atol, reference, n_outputs[0])
    outputs_agree, output_error = job.judge(results)
    report = AccuracyReport(graphs, [], output_error, outputs_agree=outputs_agree, gradients=len(reference) > job.n_outputs)
    for index, (cg, args) in enumerate(recorded):
        checks, values = check_graph(index, cg, args, rtol, atol)
        report.checks += checks
        culprit = next((c for c in checks if c.bad), None)
        if culprit is not None and report.culprit is None:
            report.culprit = culprit
            report.kind = "codegen" if culprit.kernel_vs_ir is not None and culprit.kernel_vs_ir.bad else "lowering"
            values["args"] = args
            _levels(report, values, job, levels)
            if culprit.kernel in cg.kernels and repro_dir is not None:
                report.repro = write_repro(cg, culprit.kernel, values, repro_dir, rtol, atol)
    if not outputs_agree and "decomposition" in levels:
        report.decomposition = check_decompositions(job)
        if report.culprit is not None:
            report.levels["decomposition"] = str(report.decomposition)
    if report.culprit is None and not outputs_agree:
        report.kind = "decomposition" if report.decomposition is not None and report.decomposition.wrong else "unlocated"
    return report


def _levels(report, values, job: _Job, levels):
    c = report.culprit
    cg = report.graphs[c.graph]
    if report.outputs_agree and {"fusion", "fallback"} & set(levels):
        report.levels["reruns"] = ("the outputs already agree with eager within tolerance, so reruns "
                                   "with fusion off, the op in ATen or the graph uncompiled cannot tell anything: skipped")
        levels = [level for level in levels if level == "float64"]
    if "fusion" in levels:
        ok, err = job.rerun(fusion=False)
        report.levels["fusion"] = (f"with fusion=False the results match eager (max error {err:.3g}): a fusion bug"
                                   if ok else f"with fusion=False still wrong (max error {err:.3g}): not fusion")
    nodes = {n.name: n for n in cg.graph.module.graph.nodes}
    ops = tuple(sorted({str(nodes[o].target) for o in c.origins if o in nodes}))
    if "fallback" in levels and ops:
        ok, err = job.rerun(fallback_ops=tuple(job.options.get("fallback_ops", ())) + ops)
        report.levels["fallback"] = (f"with {', '.join(ops)} run as ATen calls: "
                                     + (f"results match eager (max error {err:.3g}): confirmed" if ok
                                        else f"still wrong (max error {err:.3g}): not confirmed"))
    if "float64" in levels:
        value = values["kernel"].get(c.name, values["ir"].get(c.name))
        if c.aten is None or not isinstance(value, torch.Tensor):
            report.levels["float64"] = "no ATen value to compare with for this buffer"
        else:
            wide = _NodeValues(cg.graph.module, widen=True).values(values["args"])
            verdict = float64_verdict if value.dtype.is_floating_point else flip_verdict
            report.levels["float64"] = verdict(value, values["eager"][c.aten], wide[c.aten])
