"""Pieces every code generator shares: IndentedBuffer, CSE and CSEVariable, KernelArgs,
Kernel, Block, ScopeAnalysis (which buffers a kernel may keep in registers), GeneratedKernel.

Mirrors `torch/_inductor/codegen/common.py`. A kernel *is* an ops handler: while a
buffer's body runs under `V.set_ops_handler(kernel)`, each `ops.add(a, b)` goes through
the backend's `*Overrides` table to become a string such as `a + b`, and `CSE` names it
(`auto tmp3 = a + b;`) unless the same expression was already named, returning a
`CSEVariable`. A finished kernel is a `GeneratedKernel` record. Simplified: no `OpOverrides`
base, no vectorized CSE values or value ranges, one CSEVariable class for both backends.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools

import sympy
import torch

from ..ir.indexing import index_vars, simplify_with_ranges
from ..ir.sizevars import as_expr
from ..ops_handler import RecordingHandler
from ..virtualized import V

LOW_PRECISION = (torch.float16, torch.bfloat16)
#: at most this many op names in a kernel's name (Inductor: `kernel_name_max_ops`)
KERNEL_NAME_MAX_OPS = 10


def compute_dtype(dtype):
    """The dtype values of `dtype` are loaded into, computed and accumulated in:
    float16/bfloat16 widen to float32 (as Inductor does); others stay."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


@dataclasses.dataclass
class GeneratedKernel:
    """One generated kernel, as the wrapper, the memory plan and the debug tools see it."""
    name: str                  # e.g. cpp_fused_add_mul_0, triton_per_fused_sum_1
    language: str              # "cpp" | "triton"
    source: str                # the C++ function, or the Python module with the @triton.jit kernel
    args: list[str]            # buffer names passed, in the order of the kernel's parameters
    removed: set[str]          # buffers kept in registers, never in memory
    inplace: dict[str, str]    # output buffer → dying input whose memory it is written over
    origins: list[str]         # FX nodes its buffers were lowered from (inlined producers too)
    graph: str = "graph"       # the name of the graph it belongs to (forward, backward, ...)
    buffers: list[str] = dataclasses.field(default_factory=list)   # the buffers it computes
    bytes_moved: int = 0       # bytes its arguments take: filled by compile_fx once sizes are planned
    size_args: list[str] = dataclasses.field(default_factory=list)   # size symbols passed after the buffers (s0...)
    mutated: dict[str, str] = dataclasses.field(default_factory=dict)   # buffer → graph input it is stored into

    def computes(self) -> str:
        """Its buffers, one stored into a graph input shown as `buf3 -> arg2_1 (in place)`."""
        return ", ".join(f"{b} -> {self.mutated[b]} (in place)" if b in self.mutated else b for b in self.buffers)

    def __str__(self):
        return (f"{self.graph}.{self.name}: computes {self.computes()} from "
                f"{', '.join(self.origins)}; moves {self.bytes_moved} bytes")


class IndentedBuffer:
    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self._indent = indent

    def writeline(self, line: str = ""):
        self.lines.append(("    " * self._indent + line) if line else "")

    def writelines(self, lines):
        for line in lines:
            self.writeline(line)

    def splice(self, other: "IndentedBuffer | str"):
        text = other.getvalue() if isinstance(other, IndentedBuffer) else other
        for line in text.splitlines():
            self.writeline(line)

    @contextlib.contextmanager
    def indent(self, n: int = 1):
        self._indent += n
        try:
            yield
        finally:
            self._indent -= n

    def getvalue(self) -> str:
        return "\n".join(self.lines)

    def __bool__(self):
        return bool(self.lines)


class CSEVariable:
    """A value in a kernel: its variable's name (`str()` gives it, so f-strings print the
    name), the dtype it computes in (None where the backend does not track it: C++), and
    the block dims ("x", "r") it varies along (Triton: which masks a load needs, and when a
    pointer must be widened to the mask's shape)."""

    def __init__(self, name: str, dtype: torch.dtype | None = None, dims=()):
        self.name, self.dtype, self.dims = name, dtype, frozenset(dims)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"CSEVariable({self.name!r}, {self.dtype}, {''.join(sorted(self.dims))!r})"


class CSE:
    """Common-subexpression elimination: one variable per distinct expression string."""

    def __init__(self, prefix="tmp", line_template="auto {var} = {expr};"):
        self.prefix, self.template = prefix, line_template
        self.cache: dict[str, CSEVariable] = {}
        self.varname_map: dict[str, CSEVariable] = {}   # name → variable (an indirect index's Symbol is named after one)
        self._count = itertools.count()

    def newvar(self, dtype=None, dims=()) -> CSEVariable:
        var = CSEVariable(f"{self.prefix}{next(self._count)}", dtype, dims)
        self.varname_map[var.name] = var
        return var

    def generate(self, buffer: IndentedBuffer, expr: str, dtype=None, dims=()) -> CSEVariable:
        """The variable holding `expr`: the one named before, or a new one, declared in `buffer`
        (a cached variable keeps the dtype and dims it was made with)."""
        if expr in self.cache:
            return self.cache[expr]
        var = self.newvar(dtype, dims)
        buffer.writeline(self.template.format(var=var, expr=expr))
        self.cache[expr] = var
        return var

    @contextlib.contextmanager
    def scope(self):
        """Names made inside (e.g. in a C++ lambda) must not leak to code outside: the inside
        works on a copy (`cache` may be shared between blocks: CppKernel.outer_cse)."""
        outer = self.cache
        self.cache = dict(outer)
        try:
            yield
        finally:
            self.cache = outer


class KernelArgs:
    """Buffer name → kernel parameter name (`in_ptr0`, `out_ptr0`), in call order."""

    def __init__(self, inplace: dict[str, str] | None = None):
        self.input_buffers: dict[str, str] = {}
        self.output_buffers: dict[str, str] = {}
        self.inplace = dict(inplace or {})   # output buffer → dying input whose memory it takes
        self.sizevars: set = set()           # size symbols the kernel reads (passed as int64 arguments)

    def note_sizes(self, expr):
        """Record the size symbols `expr` reads (the kernel takes them as arguments)."""
        if V.has_graph():
            self.sizevars |= V.graph.sizevars.free_symbols(expr)
        return expr

    def size_names(self) -> list[str]:
        return sorted(map(str, self.sizevars))

    def input(self, name: str) -> str:
        if name in self.output_buffers or name in self.inplace.values():
            return self.output(name)
        if name not in self.input_buffers:
            self.input_buffers[name] = f"in_ptr{len(self.input_buffers)}"
        return self.input_buffers[name]

    def output(self, name: str) -> str:
        name = self.inplace.get(name, name)
        if name not in self.output_buffers:
            prefix = "in_out_ptr" if name in self.inplace.values() else "out_ptr"
            self.output_buffers[name] = f"{prefix}{len(self.output_buffers)}"
        return self.output_buffers[name]

    def call_names(self) -> list[str]:
        """Buffer names to pass, in the order of the kernel's parameters."""
        return list(self.input_buffers) + list(self.output_buffers)


def simplified_index(index, var_ranges):
    """`index` expanded and simplified over the loop ranges (a view's FloorDiv of a contiguous
    run becomes the run's variable): what the stride hints below read."""
    return sympy.expand(simplify_with_ranges(sympy.expand(sympy.sympify(index)), var_ranges))


def innermost_strides(index, var_ranges, x_last, r_last) -> tuple:
    """A load's (x stride, r stride): the coefficients of the innermost non-1 loop variables
    `x_last` and `r_last` (None where there is none) in its simplified index. A block-shape
    hint: `reduces_columns` (triton/policy.py) reads a list of them. `var_ranges`
    None: `index` is simplified already (`simplified_index`)."""
    index = index if var_ranges is None else simplified_index(index, var_ranges)
    return tuple(index.coeff(v) if v is not None else None for v in (x_last, r_last))


def is_gather(index, var) -> bool:
    """Does the simplified `index` (`simplified_index`) step along `var`, the innermost x loop
    variable, other than by 0 or 1, or through a function of it (FloorDiv, a clamp)? Such a
    load is not vectorised."""
    if var is None or var not in index.free_symbols:
        return False
    coeff = index.coeff(var)
    return coeff not in (0, 1) or var in (index - coeff * var).free_symbols


def affine_strides(index, itervars, var_ranges) -> dict | None:
    """{loop variable: its integer coefficient} in `index`, or None where the index is not
    a sum of integer multiples of the loop variables and a constant (a view's FloorDiv, an
    index read from memory)."""
    expr = simplified_index(index, var_ranges)
    coeffs = {v: expr.coeff(v) for v in itervars}
    rest = sympy.expand(expr - sum(c * v for v, c in coeffs.items()))
    if rest.free_symbols or not all(c.is_Integer for c in coeffs.values()):
        return None
    return {v: int(c) for v, c in coeffs.items()}


def canonical_len(sizes) -> int:
    """How many loops `sizes` needs (dims of size 1 need none)."""
    return len([n for n in sizes if n != 1])


class MissingStore(AssertionError):
    """An internal error: a buffer kept in registers was read where its value is not in
    scope. `Kernel.reads_out_of_scope` decides up front which buffers those reads keep in
    memory, so codegen never meets one."""


class Block:
    """One part of a kernel's body inside its outer loops, in order. `outer` code runs once
    per outer iteration (C++) or block of rows (Triton); a `loop` block loops over the
    reduction ranges, with accumulators set up in `prefix` and the finished reductions (and
    their stores) in `suffix`."""

    def __init__(self, kind):
        self.kind = kind
        self.prefix, self.body, self.suffix = IndentedBuffer(), IndentedBuffer(), IndentedBuffer()
        self.written: set[str] = set()   # buffers its nodes computed
        self.reduced: set[str] = set()   # buffers whose reduction finishes after the loop
        self.omp_reductions: list[tuple[str | None, str]] = []   # (C++) OpenMP reduction clauses
        self.has_argreduction = False                             # (C++) no clause can fold it


class ScopeAnalysis(RecordingHandler):
    """Reads bodies as a Kernel generates them, keeping which (buffer, store key) pairs are
    in scope; values are placeholders. A load with no store in scope adds its buffer to
    `missing`. The scoping is Kernel's: a scoped block starts from the stores that outlive
    blocks (reductions'), an unscoped one shares them; an ops.masked body's stores die with it."""

    def __init__(self, kernel: "Kernel"):
        super().__init__()
        self.kernel = kernel
        self.outer: set[tuple] = set()
        self.in_scope = self.outer
        self.missing: set[str] = set()

    def open_block(self, scoped: bool):
        self.in_scope = set(self.outer) if scoped else self.outer

    def load(self, name, index):
        if (name, self.kernel.store_key(index)) not in self.in_scope:
            self.missing.add(name)
        return "tmp"

    def store(self, name, index, value, mode=None):
        self.in_scope.add((name, self.kernel.store_key(index)))

    def store_reduction(self, name, index, value):
        self.outer.add((name, self.kernel.store_key(index)))
        self.store(name, index, value)

    def masked(self, mask, body, other):
        saved = set(self.in_scope)
        body()
        self.in_scope.clear()
        self.in_scope.update(saved)
        return "tmp"


def fused_name(origins) -> str:
    """`fused_add_native_layer_norm`: the sorted ATen ops of a kernel's FX origins (Inductor's
    `get_fused_kernel_name` with descriptive names from the original ATen ops)."""
    targets = V.graph.fx_targets if V.has_graph() else {}
    ops = sorted({getattr(targets[o], "_opname", None) or getattr(targets[o], "__name__", str(targets[o]))
                  for o in origins if o in targets})
    return "_".join(["fused", *ops[:KERNEL_NAME_MAX_OPS]])


class Kernel:
    """What CppKernel and TritonKernel share: the loop variables of `ranges` (i0, i1, ...) and
    `reduction_ranges` (r0, ...), the buffers kept out of memory, the arguments, CSE, and the
    body as a list of blocks. Each scheduler node's body goes into the current block or opens
    a new one: the backend says which kind of block a node needs (`block_kind`), when a node
    cannot join the open block of that kind (`starts_new_block`, e.g. it reads a reduction the
    block finishes), and whether names made in a block die with it (`scoped`: a loop's).
    Which buffers may stay in registers is decided before any code (`reads_out_of_scope`)."""

    language = ""   # "cpp" | "triton"
    loop_kind = ""  # the kind of a block that loops over the reduction ranges

    def __init__(self, name: str, ranges, reduction_ranges, config, removed_buffers=(), inplace=None, cse=None):
        self.name, self.config = name, config
        self.ranges, self.reduction_ranges = [as_expr(s) for s in ranges], [as_expr(s) for s in reduction_ranges]
        self.itervars = index_vars("i", self.ranges)
        self.reduction_vars = index_vars("r", self.reduction_ranges)
        self.var_ranges = dict(zip(self.itervars + self.reduction_vars, self.ranges + self.reduction_ranges))
        self.removed = set(removed_buffers)   # buffers kept in registers, never in memory
        self.args = KernelArgs(inplace)       # in-place outputs write through their input's pointer
        self.cse = cse or CSE()
        for size in self.ranges + self.reduction_ranges:
            self.args.note_sizes(size)
        self.blocks: list[Block] = []
        self.block: Block | None = None
        self.outer_cse: dict[str, CSEVariable] = {}
        self.outer_stores: dict[tuple[str, str], CSEVariable] = {}   # (buffer, index) → variable
        self.stores_in_scope: dict[tuple[str, str], CSEVariable] = self.outer_stores

    # ------------------------------------------------------------------ blocks
    def block_kind(self, node) -> str:
        raise NotImplementedError

    def starts_new_block(self, kind: str, reads: set[str]) -> bool:
        raise NotImplementedError

    def scoped(self, kind: str) -> bool:
        """Do names made in a block of this kind die with it (it is a loop)?"""
        raise NotImplementedError

    def _open_block(self, kind: str):
        self.block = Block(kind)
        self.blocks.append(self.block)
        if self.scoped(kind):
            self.cse.cache, self.stores_in_scope = dict(self.outer_cse), dict(self.outer_stores)
        else:
            self.cse.cache, self.stores_in_scope = self.outer_cse, self.outer_stores

    def _current(self) -> Block:
        if self.block is None:  # used as a plain ops handler (store_body under V.set_ops_handler)
            self._open_block(self.loop_kind if self.reduction_ranges else "outer")
        return self.block

    @property
    def compute(self) -> IndentedBuffer:
        return self._current().body

    @compute.setter
    def compute(self, buffer):
        self._current().body = buffer

    def node_indices(self, node):
        """The index variables a node's body runs on: (ours over `ranges`, ours over the reduction)."""
        return node.index_for(self.itervars, self.reduction_vars)

    def codegen_node(self, node):
        """Emit one scheduler node's body (a SchedulerNode with `index_for`) into the right block."""
        kind = self.block_kind(node)
        if self.block is None or self.starts_new_block(kind, {d.name for d in node.reads}):
            self._open_block(kind)
        index, rindex = self.node_indices(node)
        with V.set_ops_handler(self):
            node.node.store_body(index, rindex)
        self.block.written.add(node.get_name())

    # ------------------------------------------------------------------ the plan
    def set_inplace(self, inplace: dict[str, str]):
        """Output buffer → dying input whose memory it is written over (decided before codegen)."""
        self.args.inplace = dict(inplace)

    def store_key(self, index):
        """What a store of `index` is remembered by (the index's text, or what it is made from),
        computed without side effects: `reads_out_of_scope` matches loads to stores with it."""
        raise NotImplementedError

    def reads_out_of_scope(self, nodes) -> set[str]:
        """The buffers of `nodes` that a node of this kernel reads where no store of theirs is
        in scope (in a later block after a loop's, inside a loop after it ended, at another
        index): they cannot stay in registers. Decided before generating, from the block plan
        `codegen_node` would follow and each body read by a ScopeAnalysis handler."""
        analysis, names = ScopeAnalysis(self), {n.get_name() for n in nodes}
        try:
            for node in nodes:
                kind = self.block_kind(node)
                if self.block is None or self.starts_new_block(kind, {d.name for d in node.reads}):
                    self.block = Block(kind)
                    analysis.open_block(self.scoped(kind))
                with V.set_ops_handler(analysis):
                    node.node.store_body(*self.node_indices(node))
                self.block.written.add(node.get_name())
                if node.is_reduction and self.scoped(kind):   # it finishes after the loop
                    self.block.reduced.add(node.get_name())
        finally:
            self.block = None
        return analysis.missing & names

    # ------------------------------------------------------------------ loads and stores
    def _stored(self, name: str, index_text: str) -> CSEVariable | None:
        """The variable holding `name[index]` if it was stored in scope; None if it must be
        loaded from memory; MissingStore if it never reaches memory."""
        found = self.stores_in_scope.get((name, index_text))
        if found is None and name in self.removed:
            raise MissingStore(name)
        return found

    def _note_store(self, name: str, index_text: str, value, store_line, buffer: IndentedBuffer = None,
                    outlives_block=False):
        """Remember `name[index] = value` for later loads and write `store_line()` unless the
        buffer stays in registers. A reduction's result (`outlives_block`) stays in scope
        after its loop."""
        if outlives_block:
            self.outer_stores[(name, index_text)] = value
        self.stores_in_scope[(name, index_text)] = value
        if name not in self.removed:
            (self.compute if buffer is None else buffer).writeline(store_line())

    @contextlib.contextmanager
    def masked_scope(self):
        """Stores made inside an `ops.masked` body are not in scope after it."""
        saved = dict(self.stores_in_scope)
        try:
            yield
        finally:
            self.stores_in_scope.clear()
            self.stores_in_scope.update(saved)

    # ------------------------------------------------------------------ the record
    def name_prefix(self) -> str:
        """`cpp`, `triton_per`, `triton_red`, `triton_poi`: the start of the kernel's name."""
        return self.language

    def codegen(self) -> str:
        raise NotImplementedError

    def record(self, group, index: int) -> GeneratedKernel:
        """Name the kernel like Inductor (`cpp_fused_add_mul_0`: its kind, its ATen ops,
        `index` counting the graph's kernels; outside the forward/inference graph, the
        graph's name joins the count so that a backward kernel never shares a forward one's
        name), generate its source, and hand back the record."""
        origins = sorted({o for n in group.nodes for o in n.node.origins})
        graph = V.graph.name if V.has_graph() else "graph"
        suffix = str(index) if graph in ("forward", "inference", "graph") else f"{graph}{index}"
        self.name = f"{self.name_prefix()}_{fused_name(origins)}_{suffix}"
        mutated = {o: s for o, s in self.args.inplace.items() if V.has_graph() and o in V.graph.mutations}
        return GeneratedKernel(self.name, self.language, self.codegen(), self.args.call_names(), set(self.removed),
                               dict(self.args.inplace), origins, graph, group.get_names(),
                               size_args=self.args.size_names(), mutated=mutated)
