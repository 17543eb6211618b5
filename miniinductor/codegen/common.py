"""Pieces every code generator shares: IndentedBuffer, CSE, KernelArgs, Kernel, Block,
GeneratedKernel.

Mirrors `torch/_inductor/codegen/common.py`. A kernel *is* an ops handler: while a
buffer's body runs under `V.set_ops_handler(kernel)`, each `ops.add(a, b)` goes through
the backend's `*Overrides` table to become a string such as `a + b`, and `CSE` names it
(`auto tmp3 = a + b;`) unless the same expression was already named. What a finished
kernel hands the later phases is a `GeneratedKernel` record.

Simplified: no `OpOverrides` base of default op expressions, no vectorized CSE values,
and kernel values are plain strings (TritonKernel keeps their dtypes and dims on the side).
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools

import sympy
import torch

from ..ir.indexing import index_vars, simplify_with_ranges
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
    bytes_moved: int = 0       # bytes its arguments take: filled by compile_fx once sizes are planned


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


class CSE:
    """Common-subexpression elimination: one variable per distinct expression string."""

    def __init__(self, prefix="tmp", line_template="auto {var} = {expr};"):
        self.prefix, self.template = prefix, line_template
        self.cache: dict[str, str] = {}
        self._count = itertools.count()

    def newvar(self) -> str:
        return f"{self.prefix}{next(self._count)}"

    def generate(self, buffer: IndentedBuffer, expr: str) -> str:
        if expr in self.cache:
            return self.cache[expr]
        var = self.newvar()
        buffer.writeline(self.template.format(var=var, expr=expr))
        self.cache[expr] = var
        return var

    @contextlib.contextmanager
    def scope(self):
        """Names made inside (e.g. in a C++ lambda) must not leak to code outside.

        The inside works on a copy: `cache` may be a dict the kernel shares between
        blocks (CppKernel.outer_cse), and filling that one in place would hand a
        later block a variable declared inside the lambda ("'tmp4' was not declared")."""
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


def innermost_strides(index, var_ranges, x_last, r_last) -> tuple:
    """A load's (x stride, r stride): the coefficients of the innermost non-1 loop variables
    `x_last` and `r_last` (None where there is none) in its simplified index. A block-shape
    hint: `reduces_columns` (runtime/triton_runtime.py) reads a list of them."""
    index = sympy.expand(simplify_with_ranges(sympy.expand(sympy.sympify(index)), var_ranges))
    return tuple(index.coeff(v) if v is not None else None for v in (x_last, r_last))


def canonical_len(sizes) -> int:
    """How many loops `sizes` needs (dims of size 1 need none)."""
    return len([n for n in sizes if n != 1])


class MissingStore(Exception):
    """A fused-away buffer was read where its value is not in scope: keep it in memory."""


class Block:
    """One part of a kernel's body inside its outer loops, in order. `outer` code runs once
    per outer iteration (C++) or block of rows (Triton); the other kinds loop over the
    reduction ranges (C++ `inner`/`reduction`, Triton `loop`), with accumulators set up in
    `prefix` and the finished reductions (and their stores) in `suffix`."""

    def __init__(self, kind):
        self.kind = kind
        self.prefix, self.body, self.suffix = IndentedBuffer(), IndentedBuffer(), IndentedBuffer()
        self.written: set[str] = set()   # buffers its nodes computed
        self.reduced: set[str] = set()   # (Triton) buffers whose reduction finishes after the loop
        self.omp_reductions: list[tuple[str | None, str]] = []   # (C++) OpenMP reduction clauses
        self.has_argreduction = False                             # (C++) no clause can fold it


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

    Loads and stores share one scoping rule: a value stored earlier in scope is reused by
    a load of the same (buffer, index); a buffer kept in registers that is read out of scope
    raises MissingStore (the caller then keeps it in memory)."""

    language = ""   # "cpp" | "triton"
    loop_kind = ""  # the kind of a block that loops over the reduction ranges

    def __init__(self, name: str, ranges, reduction_ranges, config, removed_buffers=(), inplace=None, cse=None):
        self.name, self.config = name, config
        self.ranges, self.reduction_ranges = [int(s) for s in ranges], [int(s) for s in reduction_ranges]
        self.itervars = index_vars("i", self.ranges)
        self.reduction_vars = index_vars("r", self.reduction_ranges)
        self.var_ranges = dict(zip(self.itervars + self.reduction_vars, self.ranges + self.reduction_ranges))
        self.removed = set(removed_buffers)   # buffers kept in registers, never in memory
        self.args = KernelArgs(inplace)       # in-place outputs write through their input's pointer
        self.cse = cse or CSE()
        self.blocks: list[Block] = []
        self.block: Block | None = None
        self.outer_cse: dict[str, str] = {}
        self.outer_stores: dict[tuple[str, str], str] = {}   # (buffer, index) → variable
        self.stores_in_scope: dict[tuple[str, str], str] = self.outer_stores

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

    def codegen_node(self, node):
        """Emit one scheduler node's body (a SchedulerNode with `index_for`) into the right block."""
        kind = self.block_kind(node)
        if self.block is None or self.starts_new_block(kind, {d.name for d in node.reads}):
            self._open_block(kind)
        index, rindex = node.index_for(self.itervars, self.reduction_vars)
        with V.set_ops_handler(self):
            node.node.store_body(index, rindex)
        self.block.written.add(node.get_name())

    # ------------------------------------------------------------------ loads and stores
    def _stored(self, name: str, index_text: str) -> str | None:
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
        return GeneratedKernel(self.name, self.language, self.codegen(), self.args.call_names(), set(self.removed),
                               dict(self.args.inplace), origins)
