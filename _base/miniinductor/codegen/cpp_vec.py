"""Explicit vectors in the C++ kernels: a pointwise kernel's innermost loop in steps of
MI_VEC_LANES floats, each step one GCC vector (`mi_vec`, cpp_prelude.h), then a scalar tail.

Mirrors `torch/_inductor/codegen/cpp.py`'s CppVecKernel (the body on `at::vec::Vectorized<float>`)
and CppVecKernelChecker (may this kernel be vectorised?), with the scalar CppKernel's body as the
tail, as CppKernelProxy does. The vector body is generated beside the scalar one, node by node
(`CppVecKernel.mirror`), by a twin sharing the scalar kernel's arguments (`with_vector_twin`);
generating it is the check: the first load, store or op it has no vector form for raises
VecUnsupported, and the kernel keeps its omp-simd loop, the reason written in its source:

    for (int64_t i0 = 0; i0 < 8; i0 += 1) {
        for (int64_t i1 = 0; i1 < (1000 - 1000 % MI_VEC_LANES); i1 += MI_VEC_LANES) {
            auto tmp0 = mi_vload(in_ptr0 + (1000*i0 + i1));
            auto tmp1 = mi_vsplat(in_ptr1[i0]);                <- constant along i1
            auto tmp2 = mi_add(tmp0, tmp1);
            mi_vstore(out_ptr0 + (1000*i0 + i1), tmp2);
        }
        for (int64_t i1 = (1000 - 1000 % MI_VEC_LANES); i1 < 1000; i1 += 1) {
            ...the scalar body...                              <- the tail

The threads share the outer loops (`parallel for`, collapsed or not); a kernel of one loop
shares its vectors, and its tail runs on one thread (`omp single`). Loop-invariant parts of the
vector body (the splats, a batch norm's 1/sqrt(var + eps)) are written in the outermost loop they
vary with (cpp_loops.hoist_invariant; g++ alone moved them out of the vector loop only, not out
of the loops around it). The vector loop has no branch (a loop over steps with a tail branch
inside measured slower).

Values that do not vary along the innermost index stay scalars (`self.scalars`): index
arithmetic of the outer indices and what is computed from it (a pooling window's bounds checks
and divisor), taken as the scalar kernel writes them; a scalar float meeting a vector is
splatted, and a scalar condition picks whole vectors (`c ? a : b`).

Simplified: pointwise kernels only (reductions keep their lane loops, codegen/cpp.py, which g++
vectorizes), float32 buffers only, every load and store contiguous along the innermost index or
(loads) constant along it; no gathers, no masks of `ops.masked`, no index arithmetic along the
innermost index, no integer or bool buffers, no dtype conversions of vectors but bool to float. The C++ policy enables it
(codegen/policy.py `explicit_vectors`): measured level with the omp-simd loops or faster.
"""
from __future__ import annotations

import sympy
import torch

from ..ir.indexing import simplify_with_ranges
from ..ops_handler import BINARY_OPS, UNARY_OPS
from ..runtime.cpp_builder import vector_lanes
from ..virtualized import V
from .common import Kernel
from .cpp import COMPUTE_TYPE, CppKernel, CppOverrides, cpp_constant

#: ops that take masks (an int32 vector of -1 or 0: bools), and those whose result is one
MASK_ARGUMENTS = {f"{kind}_{op}" for kind in ("logical", "bitwise") for op in ("and", "or", "xor", "not")}
MASK_RESULTS = MASK_ARGUMENTS | {"eq", "ne", "lt", "le", "gt", "ge", "isnan"}
#: ops as vector expressions; where the scalar one (CppOverrides) works on vectors too, it is used
VEC_OPS = {
    **{name: getattr(CppOverrides, name) for name in (
        "add sub mul truediv neg maximum minimum relu reciprocal square sigmoid exp eq ne lt le gt ge").split()},
    **{f"{kind}_{op}": (lambda a, b, _c=c: f"{a} {_c} {b}") for kind in ("logical", "bitwise")
       for op, c in (("and", "&"), ("or", "|"), ("xor", "^"))},
    "logical_not": lambda x: f"~{x}", "bitwise_not": lambda x: f"~{x}",
    "isnan": lambda x: f"{x} != {x}", "rsqrt": lambda x: f"1 / mi_v_sqrt({x})",
    "abs": lambda x: f"mi_v_abs({x})", "round": lambda x: f"mi_v_nearbyint({x})",
    **{name: (lambda x, _f=name: f"mi_v_{_f}({x})") for name in (   # instructions, or libmvec calls
        "sqrt floor ceil trunc exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh "
        "asinh acosh atanh erf erfc").split()},
}


class VecUnsupported(Exception):
    """What keeps a kernel on the omp-simd path (said in its source)."""


class CppVecKernel(CppKernel):
    """The body on vectors of MI_VEC_LANES consecutive elements along the innermost index
    (`self.itervars[-1]`, or `dim`: the innermost loop of a reordered nest). Values are float
    vectors or masks (`self.masks`: comparisons)."""

    def __init__(self, scalar: CppKernel, dim: int = -1):
        super().__init__(scalar.name, scalar.ranges, scalar.reduction_ranges, scalar.config)
        self.scalar, self.lanes = scalar, vector_lanes()
        self.unmerged = scalar.unmerged   # (merged loops: the nodes' indices recovered the same way)
        self.x, self.n = self.itervars[dim], self.ranges[dim]   # the vectors' index and its range
        self.masks: set[str] = set()
        self.scalars: dict[str, bool] = {}   # a value constant along the innermost index → is it a float32?

    def mirror(self, node) -> str | None:
        """Generate `node`'s body on vectors after the scalar kernel did; None, or why it cannot."""
        self.args, self.removed = self.scalar.args, self.scalar.removed   # the same pointers and registers
        try:
            self.codegen_node(node)
        except VecUnsupported as exc:
            return str(exc)
        return None

    def codegen_node(self, node):
        Kernel.codegen_node(self, node)   # CppKernel's would make a twin of the twin

    def __getattr__(self, name):
        if name not in UNARY_OPS and name not in BINARY_OPS:
            raise AttributeError(name)

        def op(*args):
            if all(str(a) in self.scalars for a in args) and hasattr(CppOverrides, name):   # as the scalar kernel
                floats = all(self.scalars[str(a)] for a in args) and name not in MASK_RESULTS
                return self._scalar(getattr(CppOverrides, name)(*args), floats)
            if name not in VEC_OPS:
                raise VecUnsupported(f"no vector form of ops.{name}")
            args = [self._vector(a) for a in args]
            if any((str(a) in self.masks) != (name in MASK_ARGUMENTS) for a in args):
                raise VecUnsupported(f"ops.{name} of a {'bool' if name not in MASK_ARGUMENTS else 'float'} value")
            return self._value(VEC_OPS[name](*args), mask=name in MASK_RESULTS)
        return op

    def _scalar(self, expr, is_float: bool):
        var = self.cse.generate(self.compute, expr)
        self.scalars[var.name] = is_float
        return var

    def _vector(self, value):
        """`value` as a vector: a scalar float32 splatted; another scalar cannot be one."""
        if str(value) not in self.scalars:
            return value
        if not self.scalars[str(value)]:
            raise VecUnsupported(f"a scalar {value} that is not a float32 in a vector expression")
        return self._value(f"mi_vsplat({value})")

    def _value(self, expr, mask=False):
        var = self.cse.generate(self.compute, expr)
        if mask:
            self.masks.add(var.name)
        return var

    def _stride(self, name, index) -> int:
        """How far `index` moves when the innermost index does: 0 or 1, else VecUnsupported."""
        x = self.x
        index = simplify_with_ranges(sympy.sympify(index), self.var_ranges)
        stride = sympy.diff(index, x)   # unevaluated (not 0 or 1) through FloorDiv, ModularIndexing
        if stride not in (0, 1) or x in (index - stride * x).free_symbols:
            raise VecUnsupported(f"{name}[{self.index(index)}] is not contiguous along {x}")
        return int(stride)

    def _float32(self, name):
        if V.graph.get_dtype(name) != torch.float32:
            raise VecUnsupported(f"{name} is {V.graph.get_dtype(name)}, not float32")

    def load(self, name, index):
        if (stored := self._stored(name, self.index(index))) is not None:
            return stored
        self._float32(name)
        pointer, text = self.args.input(name), self.index(index)
        if self._stride(name, index) == 0:
            return self._value(f"mi_vsplat({pointer}[{text}])")
        return self._value(f"mi_vload({pointer} + ({text}))")

    def _store_line(self, name, index, value):
        self._float32(name)
        value = self._vector(value)
        if self._stride(name, index) != 1 or str(value) in self.masks:
            raise VecUnsupported(f"the store of {name} is not one float per element along {self.x}")
        return f"mi_vstore({self.args.output(name)} + ({self.index(index)}), {value});"

    def constant(self, value, dtype):
        if dtype != torch.float32:   # (an int or a bool: index arithmetic's, a scalar)
            return self._scalar(cpp_constant(value, dtype), False)
        return self._value(f"mi_vsplat({cpp_constant(value, dtype)})")

    def index_expr(self, expr, dtype):
        """An index expression that does not vary along the innermost index: a scalar."""
        if self.x in simplify_with_ranges(sympy.sympify(expr), self.var_ranges).free_symbols:
            raise VecUnsupported(f"index arithmetic along {self.x}")
        return self._scalar(f"static_cast<{COMPUTE_TYPE[dtype]}>({self.index(expr)})", dtype == torch.float32)

    def to_dtype(self, x, dtype):
        """Every vector here is a float32 vector or a mask (bool): those convert to each other;
        a scalar converts to anything."""
        if str(x) in self.scalars:
            return self._scalar(f"static_cast<{COMPUTE_TYPE[dtype]}>({x})", dtype == torch.float32)
        if dtype == torch.float32 and str(x) in self.masks:
            return self._value(f"{x} ? mi_vsplat(1.0f) : mi_vec{{}}")
        if dtype == (torch.bool if str(x) in self.masks else torch.float32):
            return x
        raise VecUnsupported(f"a conversion to {dtype}")

    def where(self, cond, a, b):
        if all(str(v) in self.scalars for v in (cond, a, b)):
            return self._scalar(CppOverrides.where(cond, a, b), self.scalars[str(a)])
        a, b = self._vector(a), self._vector(b)
        if str(cond) in self.scalars:   # one condition for the whole vector: C++'s ?: of two vectors
            if (str(a) in self.masks) != (str(b) in self.masks):
                raise VecUnsupported("ops.where of a mask and a float vector")
            return self._value(f"{cond} ? {a} : {b}", mask=str(a) in self.masks)
        if str(cond) not in self.masks or (str(a) in self.masks) != (str(b) in self.masks):
            raise VecUnsupported("ops.where of other than a mask")
        return self._value(f"{cond} ? {a} : {b}", mask=str(a) in self.masks)

    def truediv(self, a, b):
        return self.__getattr__("truediv")(a, b)

    def codegen_innermost(self, code, pragma: str, body: list[str] | None = None):
        """The scalar kernel's innermost loop: a loop of whole vectors, then a scalar loop over
        the rest. With `pragma` (the kernel's only loop) the threads share the vectors, and the
        rest runs on one thread (`single`: in a combo kernel's parallel region the others go on).
        `body`: the vector loop's lines, where the caller moved its invariant ones out of it."""
        x, n = self.x, self.size(self.n)
        whole = f"({n} - ({n}) % MI_VEC_LANES)"   # (n: a sum, when symbolic)
        for blocks, start, stop, step in ((self.blocks, "0", whole, "MI_VEC_LANES"), (self.scalar.blocks, whole, n, "1")):
            if pragma:
                code.writeline(pragma if step != "1" else "#pragma omp single nowait")
            code.writeline(f"for (int64_t {x} = {start}; {x} < {stop}; {x} += {step}) {{")
            with code.indent():
                if body is not None and step != "1":
                    code.writelines(body)
                else:
                    for block in blocks:
                        code.splice(block.body)
            code.writeline("}")

    def _unsupported(self, *args, **kwargs):
        raise VecUnsupported("a gather, a masked load or a reduction")

    indirect_indexing = masked = reduction = store_reduction = _unsupported


def with_vector_twin(kernel: CppKernel) -> CppKernel:
    """`kernel`, with a vector twin to follow its nodes (CppKernel.codegen_node) where it may
    have one (the graph's policy says so), else the reason in `vec_reason`."""
    policy = V.graph.policy if V.has_graph() else None
    if policy is None or not policy.explicit_vectors:
        kernel.vec_reason = "the policy keeps omp simd (policy.explicit_vectors)"
    elif kernel.reduction_ranges:
        kernel.vec_reason = "a reduction: its lane loops are left to omp simd"
    else:
        kernel.vec_along = lambda var: vector_twin_along(kernel, var)
        if not kernel.ranges or kernel.hint(kernel.ranges[-1]) < vector_lanes():
            kernel.vec_reason = "the innermost loop is shorter than a vector"
        else:
            kernel.vec, kernel.vec_reason = CppVecKernel(kernel), None
    return kernel


def vector_twin_along(kernel: CppKernel, var: str) -> tuple[CppVecKernel | None, str | None]:
    """(a twin on vectors along `var`, None), or (None, why not): for a kernel whose loops
    cpp_loops.loop_plan reordered so that `var` is innermost (a channels-last store). The
    twin follows the kernel's nodes again, now that the order is known."""
    dim = [str(v) for v in kernel.itervars].index(var)
    if kernel.hint(kernel.ranges[dim]) < vector_lanes():
        return None, f"the innermost loop ({var}) is shorter than a vector"
    twin = CppVecKernel(kernel, dim)
    reason = next((why for node in kernel.nodes_seen if (why := twin.mirror(node))), None)
    return (None, reason) if reason else (twin, None)
