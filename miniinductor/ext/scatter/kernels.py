"""The kernels of a scatter group, C++ and Triton: the core's kernels with a store `mode`.

Mirrors the `atomic_add` store mode of `torch/_inductor/codegen/triton.py`
(`tl.atomic_add(ptr, value, mask, sem="relaxed")`) and of `codegen/cpp.py`. Both write the
scatter's buffer in place over its target (the copy made just before: ir.py), whatever
in-place pairs the memory planner would choose.

C++: a plain serial loop nest (no `omp parallel`, no `omp simd`), with `+=` for the add.
Chosen over `#pragma omp atomic` in a parallel loop because it is deterministic and adds in
eager's order: ATen's CPU `index_put_(accumulate=True)` is a serial loop too, so sums match
eager's bit for bit, and `torch.use_deterministic_algorithms` needs no fallback. The price is
one thread for the scatter (the copy before it is parallel). float16/bfloat16 targets are
read, added in float32 and rounded back at each add, as ATen's serial loop does.

Triton: one program per block of source elements; an add is `tl.atomic_add`, so duplicate
destinations in one block or across programs all land (in any order: not deterministic,
hence lowering.py's fallback under deterministic algorithms). A plain store (`mode` None)
is `tl.store`: with duplicates one value wins, which one undefined.
"""
from __future__ import annotations

from ...codegen.cpp import LOAD_CONVERT, STORE_CONVERT, CppKernel
from ...triton.kernel import TritonKernel
from ...virtualized import V


class _InPlaceOverTarget:
    """Mixin: the scatter's buffer is written through its target's pointer."""
    scatter = None   # the group's ScatterNode, set by make_kernel

    def set_inplace(self, inplace):
        inplace = {k: v for k, v in inplace.items() if k != self.scatter.get_name()}
        super().set_inplace({**inplace, self.scatter.get_name(): self.scatter.node.target})


class ScatterCppKernel(_InPlaceOverTarget, CppKernel):
    def _parallel_pragma(self, sizes):
        return "", 0   # serial: deterministic, eager's order (module docstring)

    def block_kind(self, node):
        return "loop"   # (not "outer": the core would put `omp simd` on the innermost loop)

    def store(self, name, index, value, mode=None):
        if mode is None:
            return super().store(name, index, value)
        assert mode == "atomic_add", mode
        dtype = V.graph.get_dtype(name)
        slot = f"{self.args.output(name)}[{self.index(index)}]"
        old = f"{LOAD_CONVERT[dtype]}({slot})" if dtype in LOAD_CONVERT else slot
        new = f"{old} + {value}"
        self.compute.writeline(f"{slot} = {STORE_CONVERT[dtype]}({new});" if dtype in STORE_CONVERT
                               else f"{slot} += {value};")


class ScatterTritonKernel(_InPlaceOverTarget, TritonKernel):
    def store(self, name, index, value, mode=None):
        if mode is None:
            return super().store(name, index, value)
        assert mode == "atomic_add", mode
        line = self._store_line(name, index, value, frozenset("x"))
        assert line.startswith("tl.store(") and line.endswith(")"), line
        self.compute.writeline(f"tl.atomic_add({line[len('tl.store('):-1]}, sem='relaxed')")


def scatter_node(group):
    """The ScatterNode of a fused group, or None."""
    from .ir import ScatterNode
    return next((n for n in getattr(group, "nodes", ()) if isinstance(n, ScatterNode)), None)


def make_kernel(cls):
    def make(group, ctx):
        node = scatter_node(group)
        if node is None:
            return None
        kernel = cls(group.kernel_name, group.R, group.Q, ctx.config)
        kernel.scatter = node
        return kernel
    return make
