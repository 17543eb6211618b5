"""Pieces every code generator shares: IndentedBuffer, CSE, KernelArgs, BlockKernel.

Mirrors `torch/_inductor/codegen/common.py`. A kernel *is* an ops handler: while a
buffer's body runs under `V.set_ops_handler(kernel)`, each `ops.add(a, b)` goes through
the backend's `*Overrides` table to become a string such as `a + b`, and `CSE` names it
(`auto tmp3 = a + b;`) unless the same expression was already named.
"""
from __future__ import annotations

import contextlib
import itertools

from ..virtualized import V


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


def canonical_len(sizes) -> int:
    """How many loops `sizes` needs (dims of size 1 need none)."""
    return len([n for n in sizes if n != 1])


class BlockKernel:
    """What CppKernel and TritonKernel share: a fused group's body is a list of blocks (code
    run once per outer iteration, or looping over the reduction ranges), and each scheduler
    node's body goes into the current block or opens a new one. The backend says which
    kind of block a node needs (`block_kind`) and when a node cannot join the open block of
    that kind (`starts_new_block`, e.g. it reads a reduction the block finishes)."""

    block = None

    def block_kind(self, node) -> str:
        raise NotImplementedError

    def starts_new_block(self, kind: str, reads: set[str]) -> bool:
        raise NotImplementedError

    def _open_block(self, kind: str):
        raise NotImplementedError

    def codegen_node(self, node):
        """Emit one scheduler node's body (a SchedulerNode with `index_for`) into the right block."""
        kind = self.block_kind(node)
        if self.block is None or self.starts_new_block(kind, {d.name for d in node.reads}):
            self._open_block(kind)
        index, rindex = node.index_for(self.itervars, self.reduction_vars)
        with V.set_ops_handler(self):
            node.node.store_body(index, rindex)
        self.block.written.add(node.get_name())
