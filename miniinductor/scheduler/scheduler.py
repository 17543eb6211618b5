"""Scheduler: dependencies, dead-code elimination, fusion rounds and the kernel order.

Schedule phase (the IR buffers → an ordered list of fused groups and extern calls). Mirrors
`torch/_inductor/scheduler.py`. Each buffer becomes a node (`SchedulerNode`: we generate its
loops; `ExternKernelSchedulerNode`: an ATen call; or an extension's, passes.NODE_KINDS) whose
`MemoryDep` reads and writes come from running its body under a `RecordingHandler` with
canonical loop variables `c0, c1, ...`, so that two nodes' indices compare directly. The
passes, in order: `dead_code_elimination`, `fuse` (fusion.py), `order`; extensions add theirs
between them. Dependencies and mutations in detail: docs/design_notes.md.
"""
from __future__ import annotations

import math

import networkx as nx
import sympy

from ..codegen.memory_planning import may_alias
from ..config import Config
from ..ir.indexing import canonical_vars, simplify_with_ranges
from ..ir.nodes import ComputedBuffer, ExternKernel, MultiOutput, MutationLayout, Reduction
from ..ir.sizevars import as_expr, size_hint
from ..ops_handler import MemoryDep, RecordingHandler
from ..passes import FUSION_RULES, NODE_KINDS
from ..virtualized import V
from .fusion import (
    FusionDecision,
    dependency_problem,
    fused_shape,
    mutation_problem,
    read_order_problem,
    shared_bytes,
)


def canonical(sizes) -> list[int]:
    """Sizes without the 1s: the loops a kernel actually runs."""
    return [as_expr(n) for n in sizes if n != 1]


def expand_index(sizes, symbols) -> list:
    """Give the non-1 dims of `sizes` the next symbols in order; size-1 dims get index 0."""
    it = iter(symbols)
    return [sympy.Integer(0) if n == 1 else next(it) for n in sizes]


class BaseSchedulerNode:
    is_reduction = False
    read_bytes = write_bytes = 0   # filled in by the Scheduler, which knows every buffer's size

    def __init__(self, node):
        self.node = node
        self.reads: list[MemoryDep] = []
        self.writes: list[MemoryDep] = []

    def get_name(self) -> str:
        return self.node.get_name()

    def read_names(self) -> set[str]:
        return {dep.name for dep in self.reads}

    def written_index(self, dep: MemoryDep, R):
        """Where this node writes `dep` when its group loops over R: as recorded (an extension's
        node may write where the loops it joins say: a GEMM template's output)."""
        return dep.index

    def __str__(self):
        return f"{type(self).__name__}({self.get_name()}) reads [{', '.join(sorted(self.read_names()))}]"


class SchedulerNode(BaseSchedulerNode):
    """A ComputedBuffer whose loops we generate."""

    def __init__(self, node: ComputedBuffer):
        super().__init__(node)
        self.ranges, self.reduction_ranges = node.get_size(), node.get_reduction_ranges()
        self.is_reduction = isinstance(node.data, Reduction)
        self.outer, self.inner = canonical(self.ranges), canonical(self.reduction_ranges)
        cvars = canonical_vars(len(self.outer) + len(self.inner))
        recorder = RecordingHandler()
        with V.set_ops_handler(recorder):
            node.store_body(*self.index_for(cvars[:len(self.outer)], cvars[len(self.outer):]))
        var_ranges = dict(zip(cvars, self.outer + self.inner))
        ranges = tuple(var_ranges.items())
        self.reads, self.writes = ([MemoryDep(d.name, simplify_with_ranges(sympy.expand(d.index), var_ranges), ranges)
                                    for d in deps] for deps in (recorder.reads, recorder.writes))

    def index_for(self, outer_vars, inner_vars):
        """(index, rindex) for this node's body when its loops are `outer_vars`/`inner_vars`."""
        if self.is_reduction:
            return expand_index(self.ranges, outer_vars), expand_index(self.reduction_ranges, inner_vars)
        return expand_index(self.ranges, list(outer_vars) + list(inner_vars)), []


class ExternKernelSchedulerNode(BaseSchedulerNode):
    """An ATen call (or one item of its tuple result): reads its inputs whole."""

    def __init__(self, node):
        super().__init__(node)
        inputs = node.input_nodes() if isinstance(node, ExternKernel) else [node.parent]
        self.reads = [MemoryDep(x.get_name(), sympy.Integer(0)) for x in inputs]
        self.writes = [MemoryDep(node.get_name(), sympy.Integer(0))]


class FusedGroup:
    """Nodes computed by one kernel: outer loops over R; blocks inside loop over Q."""

    def __init__(self, nodes: list[SchedulerNode], R=None, Q=None):
        self.nodes = nodes
        first = nodes[0]
        self.R = list(R if R is not None else first.outer if first.is_reduction else first.outer + first.inner)
        self.Q = list(Q if Q is not None else first.inner if first.is_reduction else [])
        self.kernel_name = ""

    @property
    def is_reduction(self):
        return any(n.is_reduction for n in self.nodes)

    def get_names(self) -> list[str]:
        return [n.get_name() for n in self.nodes]

    def get_name(self) -> str:
        return "+".join(self.get_names())

    def __str__(self):
        loops = f"{self.R}" + (f" x reduction {self.Q}" if self.Q else "")
        return f"{self.kernel_name or 'group'}: {', '.join(self.get_names())} over {loops}"


def overwritten_by(nodes, mutations: dict[str, str]) -> dict[str, list[str]]:
    """Input or buffer name → the nodes that overwrite its memory after it is made, in
    program order: mutations (buffers computed into an input) and in-place ATen calls (an
    input's `copy_` where our kernels do not take its dtype) overwrite the input, any buffer
    an earlier one of them made, and any extern result that may alias them."""
    shares: dict[str, set[str]] = {}   # a name → the inputs whose memory it may be
    found: dict[str, list[str]] = {}
    for node in nodes:
        name = node.get_name()
        targets = [mutations[name]] if name in mutations else _written_args(node)
        for target in targets:
            for other in [target, *(n for n, inputs in shares.items() if target in inputs)]:
                found.setdefault(other, []).append(name)
        if targets:
            shares[name] = set(targets)
        elif isinstance(node, ExternKernelSchedulerNode) and may_alias(node.node):
            shares[name] = set().union(*(shares.get(n, {n}) for n in node.read_names()))
    return found


def _written_args(node) -> list[str]:
    """The buffers an ATen call writes into, as its schema says (`copy_`'s first argument)."""
    schema = getattr(getattr(node.node, "op", None), "_schema", None) if isinstance(node, ExternKernelSchedulerNode) else None
    if schema is None or not isinstance(node.node, ExternKernel):
        return []
    return [a.get_name() for a, arg in zip(node.node.args, schema.arguments)
            if arg.alias_info is not None and arg.alias_info.is_write and hasattr(a, "get_name")]


class Scheduler:
    """Built from lowering's buffers (one node each, with its deps); the passes are methods
    that compile_fx.schedule calls in order."""

    def __init__(self, buffers, output_names: set[str], config: Config, inputs=()):
        self.config = config
        # buffer → the graph input it is computed into (a mutation: MutationLayout)
        self.mutations = {b.get_name(): b.layout.target for b in buffers if isinstance(b.layout, MutationLayout)}
        self.output_names = set(output_names) | set(self.mutations)   # what the graph keeps
        self.nbytes = {b.get_name(): size_hint(math.prod(b.get_size())) * b.get_dtype().itemsize
                       for b in list(buffers) + list(inputs) if b.layout is not None}
        self.decisions: list[FusionDecision] = []
        self.nodes = self.create_nodes(buffers)
        self.overwritten = overwritten_by(self.nodes, self.mutations)
        if self.mutations:   # readers of an input's old value first (lowering may make one after the write)
            order = {id(n): k for k, n in enumerate(self.nodes)}
            graph = nx.DiGraph()
            graph.add_nodes_from(self.nodes)
            graph.add_edges_from(self._edges(self.nodes))
            self.nodes = list(nx.lexicographical_topological_sort(graph, key=lambda n: order[id(n)]))
        for node in self.nodes:  # bytes each node reads and writes, counting each buffer once
            node.read_bytes = sum(self.nbytes.get(n, 0) for n in node.read_names())
            node.write_bytes = sum(self.nbytes.get(d.name, 0) for d in node.writes)
        self.groups: list = [FusedGroup([n]) if isinstance(n, SchedulerNode) else n for n in self.nodes]
        self.original_order = {id(g): k for k, g in enumerate(self.groups)}
        self.schedule: list = []                   # set by `order`
        self._readers: dict[str, list] = {}        # buffer → groups of the schedule that read it
        self._deps: nx.DiGraph | None = None       # dependency graph of `groups`, kept up to date by merge
        self._slots: list = []                     # `groups` in a topological order (None: a merged-away slot)
        self._position: dict = {}                  # group → its index in _slots
        self._rank: dict | None = None             # id(node) → its index in `nodes`

    # ------------------------------------------------------------------ passes
    @staticmethod
    def create_nodes(buffers):
        nodes = []
        for buf in buffers:
            if type(buf) in NODE_KINDS:   # an extension's kind of buffer
                nodes.append(NODE_KINDS[type(buf)](buf))
            elif isinstance(buf, ComputedBuffer):
                nodes.append(SchedulerNode(buf))
            elif isinstance(buf, (ExternKernel, MultiOutput)):
                nodes.append(ExternKernelSchedulerNode(buf))
        return nodes

    def dead_code_elimination(self):
        """Drop computed buffers that no one reads and the graph does not return."""
        while True:
            used = {name for n in self.nodes for name in n.read_names()} | self.output_names
            alive = [n for n in self.nodes if not isinstance(n, SchedulerNode) or n.get_name() in used]
            if len(alive) == len(self.nodes):
                break
            self.nodes = alive
        alive = {id(n) for n in self.nodes}
        self.groups = [g for g in self.groups if all(id(n) in alive for n in getattr(g, "nodes", [g]))]
        self._deps = self._rank = None

    def fuse(self):
        for _ in range(10):
            if not self.fuse_round():
                return

    def fuse_round(self) -> bool:
        """Score every candidate pair, then fuse the best pairs greedily."""
        candidates = []
        groups = [g for g in self.groups if isinstance(g, FusedGroup)]
        position = {id(g): k for k, g in enumerate(self.groups)}
        readers = {}   # buffer → the groups that read it: a pair shares at least one buffer
        for g in groups:
            for name in self._read(g):
                readers.setdefault(name, []).append(g)
        for a in groups:
            a_names = {d.name for n in a.nodes for d in n.reads + n.writes}
            later = {id(b): b for name in a_names for b in readers.get(name, ()) if position[id(b)] > position[id(a)]}
            for b in later.values():   # (the sort below orders the pairs whatever order they come in)
                score = shared_bytes(a, b, lambda name: self.nbytes.get(name, 0))
                distance = position[id(b)] - position[id(a)]
                candidates.append((-score, distance, position[id(a)], a, b))
        candidates.sort(key=lambda c: c[:3])
        fused_any, touched = False, set()
        for neg_score, _, _, a, b in candidates:
            if id(a) in touched or id(b) in touched:
                continue
            shape, reason = self.can_fuse(a, b)
            self.decisions.append(FusionDecision(a.get_name(), b.get_name(), shape is not None, reason, -neg_score))
            if shape is None:
                continue
            merged = self.merge(a, b, *shape)
            touched |= {id(a), id(b), id(merged)}
            fused_any = True
        return fused_any

    def merge(self, a, b, R, Q, make=FusedGroup) -> FusedGroup:
        """Replace groups a and b by one group over (R, Q), its nodes in program order
        (`make`: the group's class, FusedGroup or an extension's subclass of it)."""
        if self._rank is None:
            self._rank = {id(n): k for k, n in enumerate(self.nodes)}
        merged = make(sorted(a.nodes + b.nodes, key=lambda n: self._rank[id(n)]), R, Q)
        self.groups[self.groups.index(a)] = merged
        self.groups.remove(b)
        self.original_order[id(merged)] = min(self.original_order[id(a)], self.original_order[id(b)])
        if self._deps is not None:
            self._contract(a, b, merged)
        return merged

    def _contract(self, a, b, merged):
        """a and b become `merged` in the dependency graph and in the topological order. The
        groups between them that depend on the earlier one move after `merged`: none of them
        leads to the later one (else path_between would have refused the fusion), so the
        order stays topological, and only the slots between a and b change."""
        graph, slots, position = self._deps, self._slots, self._position
        first, last = sorted((a, b), key=position.__getitem__)
        start, end = position[first], position[last]
        after = self._reach(first, graph.successors, lambda g: position[g] < end)
        del position[first], position[last]
        window = [g for g in slots[start + 1:end] if g is not None]
        slots[start:end + 1] = [g for g in window if g not in after] + [merged] + [g for g in window if g in after] \
            + [None] * (end - start - len(window))
        for k in range(start, end + 1):
            if slots[k] is not None:
                position[slots[k]] = k
        preds = {p for g in (a, b) for p in graph.predecessors(g)} - {a, b}
        succs = {s for g in (a, b) for s in graph.successors(g)} - {a, b}
        graph.remove_nodes_from((a, b))
        graph.add_node(merged)
        graph.add_edges_from([(p, merged) for p in preds] + [(merged, s) for s in succs])

    def split(self, group, first, second, reason: str):
        """Replace `group` by the groups `first` and `second`, kernels of their own in that order
        (an extension's benchmark found the fused kernel slower); record the decision and order
        the schedule again."""
        k = self.groups.index(group)
        self.groups[k:k + 1] = [first, second]
        order = self.original_order[id(group)]
        self.original_order[id(first)], self.original_order[id(second)] = order, order + 0.5
        score = shared_bytes(first, second, lambda name: self.nbytes.get(name, 0))
        self.decisions.append(FusionDecision(first.get_name(), second.get_name(), False, reason, score))
        self._deps = None
        self.order()

    def can_fuse(self, a, b):
        """((R, Q), reason) when a and b may share a kernel, else (None, reason). An extension's
        rule that takes the pair (`fusion_rule`) gives its loops, or why not, and its kind."""
        if len(a.nodes) + len(b.nodes) > self.config.max_fusion_size:
            return None, f"would exceed max_fusion_size={self.config.max_fusion_size}"
        shape, kind = self.fusion_rule(a, b) or (fused_shape(a, b), None)
        if isinstance(shape, str):
            return None, shape
        problem = mutation_problem(a, b, self.overwritten, self.mutations) \
            or dependency_problem(a, b, shape[0]) or dependency_problem(b, a, shape[0]) \
            or read_order_problem(a, b)
        if problem:
            return None, problem
        via = self.path_between(a, b)
        if via is not None:
            return None, f"would create a cycle via {via}"
        kind = kind or ("vertical" if {d.name for n in a.nodes for d in n.writes} &
                        {d.name for n in b.nodes for d in n.reads} else "horizontal")
        return shape, f"{kind}, loops {shape[0]}" + (f" x {shape[1]}" if shape[1] else "")

    def fusion_rule(self, a, b):
        """The answer of the first rule of an extension in use (passes.FUSION_RULES) that takes
        the pair: (R, Q) or why not, and the fusion's kind; None where none takes it."""
        for extension, rule in FUSION_RULES:
            if self.config.uses(extension) and (answer := rule(a, b)) is not None:
                return answer
        return None

    def dependency_graph(self) -> nx.DiGraph:
        """Edges writer → reader between the groups (the groups themselves are the graph's
        nodes), and a topological order of them; built once, then updated by each merge."""
        if self._deps is None:
            self._deps = self._build_dependency_graph()
            self._slots = list(nx.lexicographical_topological_sort(self._deps, key=self._original_order))
            self._position = {g: k for k, g in enumerate(self._slots)}
        return self._deps

    def _original_order(self, group) -> int:
        return self.original_order[id(group)]

    def _build_dependency_graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_nodes_from(self.groups)
        graph.add_edges_from(self._edges(self.groups))
        return graph

    def _edges(self, items):
        """(earlier, later) pairs of `items` (nodes or groups): a buffer's writer before its
        readers; and where a mutation overwrites memory (`overwritten`), whoever reads or
        writes that memory before it (Inductor's WeakDep: the reader of a parameter's old value
        runs before the kernel that stores its new one)."""
        writer = {name: item for item in items for name in self._written(item)}
        for item in items:
            read = self._read(item)
            for name in read:
                if name in writer and writer[name] is not item:
                    yield writer[name], item
            for name in read | self._written(item):
                for later in self.overwritten.get(name, ()):
                    if writer.get(later, item) is not item:
                        yield item, writer[later]

    @staticmethod
    def _reach(start, step, inside) -> set:
        """The groups reachable from `start` by `step` (successors or predecessors) through
        groups for which `inside` holds."""
        seen, todo = set(), [start]
        while todo:
            for g in step(todo.pop()):
                if g not in seen and inside(g):
                    seen.add(g)
                    todo.append(g)
        return seen

    def path_between(self, a, b) -> str | None:
        """The name of a node outside a and b on a path between them, or None. Such a node
        sits between the two in the topological order, so both searches stay in that window."""
        graph, position = self.dependency_graph(), self._position
        first, last = sorted((a, b), key=position.__getitem__)
        lo, hi = position[first], position[last]
        between = self._reach(first, graph.successors, lambda g: position[g] < hi) & \
            self._reach(last, graph.predecessors, lambda g: position[g] > lo)
        if not between:
            return None
        return min(between, key=self._original_order).get_name()

    def order(self) -> list:
        """The schedule: a topological order of the groups, close to the original; kernels
        are named in it (kernel0, kernel1, ...)."""
        self.schedule = list(nx.lexicographical_topological_sort(self.dependency_graph(), key=self._original_order))
        for k, group in enumerate(g for g in self.schedule if isinstance(g, FusedGroup)):
            group.kernel_name = f"kernel{k}"
        self._readers = {}
        for g in self.schedule:
            for name in self._read(g):
                self._readers.setdefault(name, []).append(g)
        return self.schedule

    @staticmethod
    def _written(g):
        nodes = g.nodes if isinstance(g, FusedGroup) else [g]
        return {d.name for n in nodes for d in n.writes}

    @staticmethod
    def _read(g):
        nodes = g.nodes if isinstance(g, FusedGroup) else [g]
        return {d.name for n in nodes for d in n.reads}

    # ------------------------------------------------------------------ queries
    def kernel_count(self) -> int:
        return sum(isinstance(item, FusedGroup) for item in self.schedule)

    def readers(self, name: str) -> list:
        """The groups of the schedule that read `name`, in order."""
        return self._readers.get(name, [])

    def __str__(self):   # the groups, until `order` has made the schedule
        return "\n".join(str(g) if isinstance(g, FusedGroup) else f"extern: {g.get_name()}"
                         for g in self.schedule or self.groups)
