"""The pass registry: every pass of the pipeline, in order, with one signature.

A pass is `run(obj, ctx)` at a named stage: `obj` is what that stage works on (the ATen
graph, the loop IR, the scheduler...), `ctx` the `Context` of the graph being compiled
(its config, backend policy, device, and every artifact made so far). It returns the new
object, or None when it changed `obj` in place. A pass of an extension runs only while that
extension is on; the tables below are where extensions and the Triton backend hook into the
core, which never imports them. Mirrors the pass lists spread through `torch/_inductor`
(`compile_fx.py`, `fx_passes/*.py`, `scheduler.py`), here one table. Leaves out Inductor's
pattern matcher.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

#: the stages, in the order data flows (each stage's object in brackets)
STAGES = {
    "capture": "the compilers AOTAutograd is handed (capture/aot.py) [inference compiler → compiler]",
    "joint_graph": "rewrites of the joint forward+backward graph, before the partitioner [torch.fx.GraphModule]",
    "aten_graph": "rewrites of the ATen FX graph, before lowering [torch.fx.GraphModule]",
    "lowering": "ATen graph → loop IR [GraphModule → GraphLowering]",
    "loop_ir": "rewrites of the loop IR [GraphLowering]",
    "schedule": "nodes, fusion and kernel order [GraphLowering → Scheduler]",
    "tune": "choices timed on the device [Scheduler]",
    "codegen": "one kernel per fused group [Scheduler → {name: GeneratedKernel}]",
    "wrapper": "the code that calls the kernels [kernels → wrapper source]",
    "load": "build and import [wrapper source → module]",
    "runtime": "what wraps the compiled call [call → call]",
}


def always(ctx) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Pass:
    stage: str
    name: str
    run: Callable                   # run(obj, ctx) -> the stage's new object, or None (changed in place)
    extension: str = "core"
    enabled: Callable = always      # enabled(ctx) -> bool: its own switch, read from ctx.config / ctx.policy
    doc: str = ""

    def runs(self, ctx) -> bool:
        return ctx.config.uses(self.extension) and bool(self.enabled(ctx))


@dataclasses.dataclass
class PassRecord:
    """What one pass did to one graph: shown by explain() and the report."""
    stage: str
    name: str
    extension: str
    ran: bool
    change: str = ""    # what it changed (a count of rewrites, groups before and after); "" = nothing
    before: str = None  # the stage's object printed before and after it (option pass_snapshots)
    after: str = None

    def __str__(self):
        state = (self.change or "no change") if self.ran else "off"
        return f"{self.stage:11s} {self.name:28s} {self.extension:11s} {state}"


@dataclasses.dataclass
class Context:
    """Everything a pass may read, for one graph: set up by the driver, filled as stages run."""
    config: object
    policy: object
    device: object
    name: str = "graph"
    example_inputs: list = None
    gm: object = None           # the ATen graph
    graph: object = None        # GraphLowering (from the lowering stage on)
    scheduler: object = None    # Scheduler (schedule)
    kernels: dict = None        # {name: GeneratedKernel} (codegen)
    wrapper: object = None      # the wrapper generator, its memory plan and source (wrapper)
    plan: object = None
    source: str = None
    facts: dict = dataclasses.field(default_factory=dict)   # one pass's finding, read by a later one
    records: list = dataclasses.field(default_factory=list)
    _note: str = ""

    def note(self, change) -> None:
        """Say what the running pass changed (a count is read as "N changes")."""
        if isinstance(change, bool) or change is None:
            return
        self._note = f"{change} rewritten" if isinstance(change, int) and change else (change or "")


#: every pass, in order within its stage
PASSES: list[Pass] = []
#: backend name → [(name, extension, make(group, ctx) -> kernel or None)], first that answers wins
KERNEL_KINDS: dict[str, list] = {}
#: [(extension, patch(policy, config, device) -> {field: value})], applied by policy_for
POLICY_PATCHES: list = []
#: [(extension, constrain(graph, fx node, args) -> (args, output strides or None: the meta's),
#: or None: not its op)], asked in turn by lowering/graph.py's fallback for each extern op
EXTERN_LAYOUTS: list = []
#: [(extension, choose(a, b) -> (IR buffer or None, why ATen computes it))]: asked in order by
#: the mm/bmm/addmm lowerings (lowering/matmul.py) before they fall back to an ATen call
MATMUL_CHOICES: list = []
#: an extension's IR buffer class → its scheduler node class (Scheduler.create_nodes)
NODE_KINDS: dict = {}
#: [(extension, rule(a, b) -> None (not its pair) or ((R, Q) or why not, kind))]: asked in
#: order by Scheduler.can_fuse before the core's rules of loop shapes
FUSION_RULES: list = []
#: backend name → its own decompositions() -> {op: fn}, over the C++ kernels' (capture/decompositions.py)
DECOMPOSITIONS: dict = {}
#: custom ops the partitioner may fuse and recompute, as it does Inductor's prims (triton/softmax.py's)
PARTITIONER_OPS: list = []
#: [(extension, wrap(compile_graph) -> compile_graph)]: compile_fx_inner's compiler of one ATen graph, wrapped by each extension in use
GRAPH_COMPILERS: list = []
#: [(extension, wrap(capture) -> capture)]: compile_fx's capture, wrapped the same (ext/fx_graph_cache wraps both)
CAPTURE_WRAPPERS: list = []
#: import lines every generated wrapper has, after the core's (the Triton backend's `load_module`)
WRAPPER_IMPORTS: list = []


def register(p: Pass, *, before: str | None = None, after: str | None = None) -> Pass:
    """Add `p` to its stage: at the end, or just before/after the pass named."""
    assert p.stage in STAGES, f"unknown stage {p.stage!r}; stages: {', '.join(STAGES)}"
    assert all(q.name != p.name for q in PASSES), f"pass {p.name!r} registered twice"
    anchor = before or after
    if anchor is None:
        PASSES.append(p)
        return p
    position = next((k for k, q in enumerate(PASSES) if q.name == anchor), None)
    if position is None:
        raise KeyError(f"pass {p.name!r}: no pass named {anchor!r} to go {'before' if before else 'after'}")
    PASSES.insert(position + (after is not None), p)
    return p


@contextlib.contextmanager
def registered(p: Pass, *, before: str | None = None, after: str | None = None):
    """`p` in the registry for the `with` block only (a tutorial's or an experiment's pass)."""
    register(p, before=before, after=after)
    try:
        yield p
    finally:
        PASSES.remove(p)


def kernel_kind(backend: str, name: str, make: Callable, extension: str = "core", first: bool = False):
    """Register a kernel class for `backend`'s fused groups: `make(group, ctx)` returns a kernel,
    or None to leave the group to the next kind. Extensions go `first`: ahead of the core's
    kinds, behind those registered before them (a combo's kind, then cpu_fast's for the rest).
    A kernel may have a `regenerate(group, ctx, generate)` step: compile_fx.generate_kernel."""
    kinds = KERNEL_KINDS.setdefault(backend, [])
    core = next((k for k, kind in enumerate(kinds) if kind[1] == "core"), len(kinds))
    kinds.insert(core if first else len(kinds), (name, extension, make))


def make_kernel(group, ctx):
    """The kernel of the first kind (of ctx.policy's backend, its extension on) that takes `group`."""
    for name, extension, make in KERNEL_KINDS[ctx.policy.name]:
        if ctx.config.uses(extension) and (kernel := make(group, ctx)) is not None:
            return kernel
    raise LookupError(f"no kernel kind takes {group}")


def _summary(obj) -> str:
    """A one-line size of a stage's object, to say what a pass changed."""
    graph = getattr(obj, "graph", None)
    if hasattr(graph, "nodes") and hasattr(obj, "recompile"):   # an fx.GraphModule
        return f"{len(graph.nodes)} nodes"
    if hasattr(obj, "groups") and isinstance(obj.groups, list):   # a Scheduler
        return f"{len(obj.groups)} groups"
    if hasattr(obj, "buffers") and isinstance(obj.buffers, list):   # a GraphLowering
        return f"{len(obj.buffers)} buffers"
    return ""


def run_stage(stage: str, obj, ctx: Context):
    """Run every pass of `stage` on `obj` in order; each leaves a PassRecord in ctx.records."""
    for p in PASSES:
        if p.stage != stage:
            continue
        record = PassRecord(stage, p.name, p.extension, p.runs(ctx))
        if record.ran:
            before, ctx._note = _summary(obj), ""
            record.before = snapshot(obj) if ctx.config.pass_snapshots else None
            out = p.run(obj, ctx)
            obj = obj if out is None else out
            after = _summary(obj)
            record.change = ctx._note or (f"{before} -> {after}" if before and after and before != after else "")
            record.after = snapshot(obj) if ctx.config.pass_snapshots else None
        ctx.records.append(record)
    return obj


def snapshot(obj) -> str | None:
    """A stage's object as text, for the report's pass viewer; None for a callable."""
    if hasattr(obj, "print_readable"):   # an fx.GraphModule
        return obj.print_readable(print_output=False)
    if isinstance(obj, dict):   # the kernels
        return "\n\n".join(f"# {name}\n{getattr(k, 'source', k)}" for name, k in obj.items())
    return None if callable(obj) else str(obj)


def describe(ctx: Context) -> str:
    """Every pass in order: stage, name, extension, and whether it runs for `ctx`'s options."""
    rows = [f"{'stage':11s} {'pass':28s} {'extension':11s} runs   what it does"]
    for p in sorted(PASSES, key=lambda p: list(STAGES).index(p.stage)):   # stable: in order within a stage
        rows.append(f"{p.stage:11s} {p.name:28s} {p.extension:11s} {'yes' if p.runs(ctx) else 'no ':3s}    {p.doc}")
    return "\n".join(rows)
