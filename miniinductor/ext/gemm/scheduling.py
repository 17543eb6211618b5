"""A GEMM template in the scheduler: its node, and the rule of what may fuse with it.

Mirrors the template branches of `torch/_inductor/scheduler.py` (`can_fuse_vertical` with a
template node, `speedup_by_fusion`'s split of a slower fusion). A `TemplateSchedulerNode`
(passes.NODE_KINDS: made for each TemplateBuffer) reads its operands whole and writes its
output where a pointwise node over its ranges would. `template_fusion` (passes.FUSION_RULES,
asked before the core's rules of loop shapes) lets pointwise readers of its output, after
it, join it as an epilogue (`template_problem`, `template_shape`); the core's rules then
check dependencies, mutations and cycles as for any pair, the template's output read at
`written_index`. `unfuse_template` splits a group again where the epilogue benchmark
(epilogue_tuning.py) found it slower fused.

Simplified: no prologue fusion, no fusion of two templates.
"""
from __future__ import annotations

import math

import sympy

from ...ir.indexing import canonical_vars
from ...ops_handler import MemoryDep
from ...scheduler.scheduler import BaseSchedulerNode, FusedGroup, SchedulerNode, canonical
from .ir import TemplateBuffer

#: the kind of a fusion with a template, in its decision ("epilogue of the GEMM template, loops [...]")
EPILOGUE = "epilogue of the GEMM template"


class TemplateSchedulerNode(SchedulerNode):
    """A TemplateBuffer (a GEMM template): reads its operands whole, writes its output at
    the index a pointwise node over the same ranges would, so that pointwise readers can
    fuse into its store as an epilogue (`template_problem`)."""
    is_template = True   # (scheduler/combo.py keeps a group holding one out of combo kernels)

    def __init__(self, node: TemplateBuffer):
        BaseSchedulerNode.__init__(self, node)
        self.ranges, self.reduction_ranges = node.get_size(), []
        self.outer, self.inner = canonical(self.ranges), []
        self.reads = [MemoryDep(x.get_name(), sympy.Integer(0)) for x in node.input_nodes()]
        self.writes = [MemoryDep(node.get_name(), self.write_index(self.outer),
                                 tuple(zip(canonical_vars(len(self.outer)), self.outer)))]

    def write_index(self, R) -> sympy.Expr:
        """Its output's index in loops over R: the flat index, the output being contiguous.
        R may be any sizes of its numel whose last ones make up its columns (a reshape of
        the product, e.g. [B*T, C] read as [B, T, C]: `template_shape`)."""
        strides = [math.prod(R[k + 1:]) for k in range(len(R))]
        return sum((v * s for v, s in zip(canonical_vars(len(R)), strides)), sympy.Integer(0))

    def written_index(self, dep: MemoryDep, R) -> sympy.Expr:
        return self.write_index(R)


def is_template(node) -> bool:
    """Whether a scheduler node is a GEMM template's."""
    return isinstance(node, TemplateSchedulerNode)


def template_fusion(a, b):
    """The rule of passes.FUSION_RULES: None where neither group holds a template, else (the
    fused loops (R, Q) or why the pair cannot fuse, EPILOGUE)."""
    if not any(map(is_template, a.nodes + b.nodes)):
        return None
    shape = template_problem(a, b) or template_shape(a, b)
    for check in EPILOGUE_CHECKS:   # (a CUTLASS kernel's epilogue must have an EVT form)
        if not isinstance(shape, str):
            shape = check(a.nodes + b.nodes, shape[0]) or shape
    return shape, EPILOGUE


#: checks of a template's epilogue by its backend: `check(nodes, loops)` → why the nodes (the
#: template's and its epilogue's, over `loops`) cannot share its kernel, or None
#: (cutlass/epilogue.py adds `epilogue_problem`)
EPILOGUE_CHECKS: list = []


def template_shape(a, b):
    """(R, []) of a GEMM template's group a and a pointwise group b, or why they do not line
    up. Besides equal ranges, b may iterate a reshape of the product (a Linear on [B, T, C]
    reads its [B*T, N] product as [B, T, N]): the same elements in the same order, as long as
    b's last sizes make up the N columns of a tile and a has no epilogue over other ranges."""
    if a.R == b.R:
        return a.R, []
    template = next((n for n in a.nodes if is_template(n)), None)
    columns = template.ranges[-1] if template is not None else None
    if (template is None or b.is_reduction or math.prod(a.R) != math.prod(b.R)
            or not any(math.prod(b.R[k:]) == columns for k in range(len(b.R) + 1))
            or any(not is_template(n) and n.outer + n.inner != b.R for n in a.nodes)):
        return f"ranges differ: {a.R} vs {b.R}"
    return b.R, []


def template_problem(a, b) -> str | None:
    """Why a group holding a GEMM template (a TemplateSchedulerNode) and another group
    cannot share a kernel, or None. A template takes epilogues only: pointwise nodes over its
    output's ranges that read what it writes (Inductor's `can_fuse_vertical` with a template
    node; no prologue fusion here)."""
    with_template = [g for g in (a, b) if any(map(is_template, g.nodes))]
    if not with_template:
        return None
    if len(with_template) == 2:
        return "two GEMM templates cannot share a kernel"
    template, other = with_template[0], b if with_template[0] is a else a
    if other is a:
        return "a GEMM template takes no prologue: only nodes after it join it"
    if a.is_reduction or b.is_reduction:
        return "a GEMM template's epilogue is pointwise, not a reduction"
    written = {d.name for n in template.nodes for d in n.writes}
    if not any(d.name in written for n in other.nodes for d in n.reads):
        return "a GEMM template only takes epilogues that read its output"
    return None


def unfuse_template(scheduler, group, reason: str) -> tuple:
    """Split a GEMM template's group into the template alone and its epilogue, a kernel of
    its own over the group's loops (a benchmark found the fused kernel slower:
    epilogue_tuning.py); the scheduler records the decision and orders the schedule again."""
    template = FusedGroup([n for n in group.nodes if is_template(n)])
    epilogue = FusedGroup([n for n in group.nodes if not is_template(n)], group.R, [])
    scheduler.split(group, template, epilogue, reason)
    return template, epilogue
