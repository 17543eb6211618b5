"""A CUTLASS kernel's fused epilogue: the pointwise nodes after a GEMM, as an epilogue
visitor tree (EVT).

Mirrors Inductor's `codegen/cuda/cutlass_python_evt.py` (`CutlassEVTCodegen`, which runs the
epilogue nodes' bodies under an ops handler to build the tree) in small, by the same trick:
`Epilogue` is an ops handler (the `V.ops` trick), and each fused node's body, run under it,
writes C++ instead of Triton. What it builds:

  - **leaves**, one per tensor the epilogue reads, by how it is indexed: the product itself
    (`Sm90AccFetch`, rounded to the output dtype first, as eager rounds mm's result), a
    tensor read at the output's own index (the first one is CUTLASS's source C,
    `Sm90SrcFetch`; others `Sm90AuxLoad`), a row of N values broadcast down the rows (a
    bias: `Sm90RowBroadcast`), a column of M values (`Sm90ColBroadcast`);
  - **one compute node** per stored value (`Sm90Compute` with a functor written here): a
    loop over the fragment that evaluates the fused nodes' scalar code on the leaves;
  - **the stores**: the last value stored is D, the kernel's output; any other value the
    graph still needs (a buffer read by a later kernel) goes through `Sm90AuxStore`, its
    value passed to D's node, which ignores it.

Where a body needs what this does not express (an index other than those four, an integer
or indirect load, a reduction, an op missing from CUDA_OPS), `EpilogueProblem` says why, and
the scheduler keeps that node out of the kernel (scheduling.py asks `epilogue_problem`).
"""
from __future__ import annotations

import math

import sympy
import torch

from ....ir.indexing import canonical_vars
from ....virtualized import V
from ..scheduling import is_template
from .emit import CUTLASS_TYPE

#: ops name → CUDA C expression on float operands ({0}, {1}, {2}: the arguments)
CUDA_OPS = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}", "neg": "-{0}",
    "maximum": "(({0} != {0} || {0} > {1}) ? {0} : {1})", "minimum": "(({0} != {0} || {0} < {1}) ? {0} : {1})",
    "relu": "({0} < 0.f ? 0.f : {0})", "abs": "fabsf({0})", "exp": "expf({0})", "exp2": "exp2f({0})",
    "expm1": "expm1f({0})", "log": "logf({0})", "log1p": "log1pf({0})", "log2": "log2f({0})", "sqrt": "sqrtf({0})",
    "rsqrt": "rsqrtf({0})", "tanh": "tanhf({0})", "erf": "erff({0})", "sigmoid": "(1.f / (1.f + expf(-{0})))",
    "reciprocal": "(1.f / {0})", "sin": "sinf({0})", "cos": "cosf({0})", "pow": "powf({0}, {1})",
    "floor": "floorf({0})", "ceil": "ceilf({0})", "square": "{0} * {0}",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
    "ge": "{0} >= {1}", "logical_and": "{0} && {1}", "logical_or": "{0} || {1}", "logical_not": "!{0}",
}
#: the ops whose result is a bool
BOOL_OPS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"}
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


class EpilogueProblem(Exception):
    """Why a node after a CUTLASS GEMM has no EVT form (it then stays out of the kernel)."""


def flat_index(variables, sizes) -> sympy.Expr:
    """The row-major index of `variables` over `sizes`."""
    strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
    return sum((v * s for v, s in zip(variables, strides)), sympy.Integer(0))


class Epilogue:
    """The ops handler that turns fused epilogue nodes into an EVT (see the module
    docstring). `template`: the template's buffer name and dtype; `loops`: the group's loop
    sizes, a reshape of the product [M, N] (or [B, M, N]) whose last sizes make up N."""

    def __init__(self, template: str, dtype: torch.dtype, loops, columns: int):
        self.template, self.dtype = template, dtype
        self.loops = [n for n in loops if n != 1]
        split = next(k for k in range(len(self.loops) + 1) if math.prod(self.loops[k:]) == columns)
        self.vars = canonical_vars(len(self.loops))
        self.flat = flat_index(self.vars, self.loops)
        self.col = flat_index(self.vars[split:], self.loops[split:])
        self.row = flat_index(self.vars[:split], self.loops[:split])
        self.leaves: list[tuple[str, str, torch.dtype]] = []   # (kind, buffer, dtype): the functor's inputs
        self.lines: list[str] = []                             # its C++ statements, per element
        self.stores: dict[str, tuple[str, torch.dtype]] = {}   # buffer → (its value's variable, dtype)
        self.bools: set[str] = set()
        self.ops: set[str] = set()   # (named in the functors, so that a profile's kernel name shows them)
        self.count = 0
        self.out_dtype = dtype

    # ------------------------------------------------------------------ running the nodes
    def add_node(self, node):
        """Run one scheduler node's body under this handler."""
        if node.is_reduction:
            raise EpilogueProblem("a reduction")
        index, _ = node.index_for(self.vars, [])
        with V.set_ops_handler(self):
            node.node.store_body(index, [])

    def _var(self, expr: str, is_bool: bool = False) -> str:
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"{'bool' if is_bool else 'float'} {name} = {expr};")
        if is_bool:
            self.bools.add(name)
        return name

    def __getattr__(self, name):
        if name.startswith("_") or name not in CUDA_OPS:
            raise EpilogueProblem(f"ops.{name} has no CUTLASS epilogue form here")
        self.ops.add(name)
        return lambda *args: self._var(CUDA_OPS[name].format(*args), name in BOOL_OPS)

    def load(self, name, index):
        if name in self.stores:   # computed by an earlier node of this kernel: its value, in registers
            if sympy.expand(index) != self.flat:
                raise EpilogueProblem(f"reads {name} at {index}, not the element this thread computed")
            return self.stores[name][0]
        buffer_dtype = self.dtype if name == self.template else V.graph.get_dtype(name)
        if buffer_dtype not in FLOATS:
            raise EpilogueProblem(f"reads {name}, of dtype {buffer_dtype} (floating-point tensors only)")
        index = sympy.expand(index)
        if name == self.template:
            if index != self.flat:
                raise EpilogueProblem(f"reads the product at {index}, not its own element")
            kind = "acc"
        elif index == self.flat:
            kind = "C" if not any(k == "C" for k, _, _ in self.leaves) else "aux"
        elif index == self.col:
            kind = "row"
        elif index == self.row and self.row != 0:
            kind = "col"
        else:
            raise EpilogueProblem(f"reads {name} at {index} (the output's element, its column or its row only)")
        leaf = (kind, name, buffer_dtype)
        if leaf not in self.leaves:
            self.leaves.append(leaf)
        value = f"in{self.leaves.index(leaf)}[i]"
        if kind == "acc" and self.dtype != torch.float32:   # eager's mm rounds its result to the dtype
            value = f"float({CUTLASS_TYPE[self.dtype]}({value}))"
        return self._var(value)

    def store(self, name, index, value, mode=None):
        if mode is not None or sympy.expand(index) != self.flat:
            raise EpilogueProblem(f"stores {name} at {index}{f' ({mode})' if mode else ''}, not the output's element")
        dtype = V.graph.get_dtype(name)
        if dtype not in FLOATS:
            raise EpilogueProblem(f"stores {name} as {dtype} (floating-point outputs only)")
        self.stores[name] = (value, dtype)

    def constant(self, value, dtype):
        if isinstance(value, bool) or dtype == torch.bool:
            return self._var("true" if value else "false", True)
        value = float(value)
        text = ("INFINITY" if value > 0 else "-INFINITY") if math.isinf(value) else "NAN" if math.isnan(value) \
            else f"{value!r}f"
        return self._var(text)

    def to_dtype(self, x, dtype, *args, **kwargs):
        if dtype == torch.bool:
            return x if x in self.bools else self._var(f"{x} != 0.f", True)
        if dtype == torch.float32:
            return x if x not in self.bools else self._var(f"float({x})")
        if dtype in (torch.float16, torch.bfloat16):
            return self._var(f"float({CUTLASS_TYPE[dtype]}({x}))")
        raise EpilogueProblem(f"casts to {dtype}")

    def where(self, cond, a, b):
        return self._var(f"{cond} ? {a} : {b}")

    def index_expr(self, expr, dtype):
        raise EpilogueProblem("an index value (ops.index_expr)")

    def indirect_indexing(self, x, size):
        raise EpilogueProblem("an indirect load")

    def masked(self, mask, body, other):
        raise EpilogueProblem("a masked load")

    def reduction(self, *args):
        raise EpilogueProblem("a reduction")

    # ------------------------------------------------------------------ the tree
    def outputs(self, removed=()) -> list[tuple[str, str, torch.dtype]]:
        """(buffer, variable, dtype) of each value that reaches memory, D last. With no
        epilogue, the product itself."""
        found = [(name, var, dtype) for name, (var, dtype) in self.stores.items() if name not in removed]
        if self.template not in removed:   # the product itself reaches memory (alone: it is D)
            found.insert(0, (self.template, self.load(self.template, self.flat), self.dtype))
        if not found:
            raise EpilogueProblem("nothing to store")
        return found

    def finish(self, removed=()):
        """Fix the stores (after `removed`: the buffers kept in registers); D is the last."""
        self.outs = self.outputs(removed)
        self.out_dtype = self.outs[-1][2]
        if len({n for n, _, _ in self.outs}) < len(self.outs):
            raise EpilogueProblem("a buffer stored twice")

    @property
    def source_dtype(self):
        return next((d for k, _, d in self.leaves if k == "C"), None)

    def pointer_names(self) -> list[str]:
        """The tensors the kernel takes after A and B: D, then C and the other leaves, then
        the auxiliary stores."""
        return [self.outs[-1][0]] + [name for kind, name, _ in self.leaves if kind not in ("acc",)] \
            + [name for name, _, _ in self.outs[:-1]]

    def _leaf_types(self) -> list[str]:
        found = []
        for kind, _, dtype in self.leaves:
            t = CUTLASS_TYPE[dtype]
            found.append({"acc": "Sm90AccFetch", "C": f"Sm90SrcFetch<{t}>",
                          "aux": f"Sm90AuxLoad<0, void, {t}, cutlass::layout::RowMajor, void, void>",
                          "row": f"Sm90RowBroadcast<0, TileShape, {t}, float, Stride<_0, _1, int64_t>>",
                          "col": f"Sm90ColBroadcast<0, TileShape, {t}, float, Stride<_1, _0, int64_t>>"}[kind])
        return found

    def _leaf_arguments(self) -> list[str]:
        """Each leaf's arguments: its pointer (by position in `pointer_names`) and strides."""
        found, ptr = [], 3   # ptrs: A, B, D, then the leaves' tensors
        for kind, _, dtype in self.leaves:
            t = CUTLASS_TYPE[dtype]
            if kind in ("acc", "C"):
                found.append("{}")
                ptr += kind == "C"
                continue
            stride = {"aux": "dD", "row": "cute::make_stride(cute::_0{}, cute::_1{}, int64_t(0))",
                      "col": "cute::make_stride(cute::_1{}, cute::_0{}, int64_t(0))"}[kind]
            found.append(f"{{static_cast<{t} const*>(ptrs[{ptr}]), {t}(0), {stride}}}")
            ptr += 1
        return found

    def functor(self, k: int) -> str:
        """The name of output k's compute functor: `mi_epilogue_add_erf_mul_0`."""
        return "_".join(["mi_epilogue", *sorted(self.ops), str(k)])

    def functors(self) -> str:
        """The compute functors, one per output: the fused code over a fragment."""
        code = []
        for k, (name, var, _) in enumerate(self.outs):
            inputs = len(self.leaves) + (len(self.outs) - 1 if k == len(self.outs) - 1 else 0)
            params = ", ".join(f"cutlass::Array<float, F> const& in{j}" for j in range(inputs))
            body = "\n".join(f"      {line}" for line in self.lines)
            code.append(f"""// computes {name}
template <class T> struct {self.functor(k)};
template <int F> struct {self.functor(k)}<cutlass::Array<float, F>> {{
  CUTLASS_DEVICE cutlass::Array<float, F> operator()({params}) const {{
    cutlass::Array<float, F> out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < F; ++i) {{
{body}
      out[i] = {var};
    }}
    return out;
  }}
}};
""")
        return "\n".join(code)

    def evt_type(self) -> str:
        leaves = self._leaf_types()
        last = len(self.outs) - 1
        stores = [f"Sm90EVT<Sm90AuxStore<0, void, {CUTLASS_TYPE[dtype]}, RN, cutlass::layout::RowMajor, void, void>, "
                  f"Sm90EVT<Sm90Compute<{self.functor(k)}, float, float, RN>, {', '.join(leaves)}>>"
                  for k, (_, _, dtype) in enumerate(self.outs[:-1])]
        return (f"Sm90EVT<Sm90Compute<{self.functor(last)}, {CUTLASS_TYPE[self.out_dtype]}, float, RN>,\n    "
                + ",\n    ".join(leaves + stores) + ">")

    def evt_arguments(self) -> str:
        leaves = self._leaf_arguments()
        first_store = 3 + sum(kind != "acc" for kind, _, _ in self.leaves)
        stores = [f"{{{{{', '.join(leaves)}, {{}}}}, {{static_cast<{CUTLASS_TYPE[dtype]}*>(ptrs[{first_store + k}]), dD}}}}"
                  for k, (_, _, dtype) in enumerate(self.outs[:-1])]
        return "{" + ", ".join(leaves + stores + ["{}"]) + "}"

    def source_pointer(self) -> str:
        if self.source_dtype is None:
            return "nullptr"
        ptr = 3 + [kind for kind, _, _ in self.leaves if kind != "acc"].index("C")
        return f"static_cast<{CUTLASS_TYPE[self.source_dtype]} const*>(ptrs[{ptr}])"


def epilogue_problem(nodes, loops) -> str | None:
    """Why these nodes (a CUTLASS template's and its epilogue's, over `loops`) cannot share
    its kernel, or None; None too for a Triton template (scheduling.EPILOGUE_CHECKS)."""
    template = next(n for n in nodes if is_template(n)).node
    if template.config.get("backend") != "cutlass":
        return None
    epilogue = Epilogue(template.get_name(), template.get_dtype(), loops, template.get_size()[-1])
    try:
        for node in nodes:
            if not is_template(node):
                epilogue.add_node(node)
    except EpilogueProblem as why:
        return f"a CUTLASS epilogue: {why}"
    return None


def bare_epilogue(template: str, dtype: torch.dtype, M: int, N: int) -> Epilogue:
    """The epilogue of a template alone: D = the product."""
    epilogue = Epilogue(template, dtype, [M, N], N)
    epilogue.finish()
    return epilogue
