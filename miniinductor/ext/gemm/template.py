"""Triton GEMM templates: a matmul kernel with a hole where its epilogue goes.

Mirrors `torch/_inductor/kernel/mm.py` (`mm_template`) and `select_algorithm.py`
(`TritonTemplateKernel` and its `store_output`) in small. The template is
plain text: each program computes one BLOCK_M x BLOCK_N tile of `C[b] = A[b] @ B[b]` in
a float32 accumulator `acc` (a loop over K in steps of BLOCK_K, `tl.dot`), then hands the
tile to the epilogue. The epilogue is written by `TritonTemplateKernel`, a TritonKernel
whose block is the tile: XBLOCK = BLOCK_M rows (`xindex = b*M + m`), RBLOCK = BLOCK_N
columns (`rindex = n`), as in a tiled pointwise kernel. Storing the template's buffer
only records `acc` as its value; each fused pointwise node (a bias add, GELU, a residual,
a cast, a scale) then runs its body under the kernel, and its load of the product finds
`acc` in registers instead of memory. An unfused template simply stores `acc`. The
epilogue may iterate a reshape of the product (a Linear on [B, T, C] reads its [B*T, N]
product as [B, T, N]): the kernel's loops are then the epilogue's, cut where their last
sizes make up N.

Which tile config a matmul gets is the autotuner's choice (autotune.py, `select_gemm`);
once fused, a template is timed again with its epilogue (epilogue_tuning.py).

Precision as eager: float32 operands multiply in IEEE float32 unless
`torch.backends.cuda.matmul.allow_tf32` (read at compile time) asks for TF32; float16 and
bfloat16 operands accumulate in float32 and round once at the store. The option
`gemm_fp32_precision="tf32x3"` asks instead for Triton's three-product TF32 dot (each operand
split into a TF32 part and a TF32 remainder, the remainders' product dropped): tensor cores,
faster than cuBLAS's IEEE float32 on an H100, where an IEEE `tl.dot` is slower than
cuBLAS, and closer to a float64 product than either IEEE result on the data measured
(docs/benchmarks_gpu.md), but not the same bits as eager. The `precision` argument below is
Triton's `input_precision`. Under Triton's interpreter a bfloat16 `tl.dot` is wrong (Triton
3.9: NumPy has no bfloat16), so there the operands are widened to float32 first: the same
products, exactly, in the same accumulator.

Persistent templates (`enable_persistent_tma_matmul`): one program per SM loops over the
tiles (`for tile in range(pid, tiles, programs)`, the epilogue inside the loop); on a GPU of
compute capability 9.0+ (and under the interpreter, which runs the same code, its loop
written as a `while`: Triton 3.6's interpreter fails on a program id as a `range` bound
under NumPy 2.4) the tiles of A and B come through TMA descriptors (`tl.make_tensor_descriptor`: the copy engine fetches a
tile, out-of-bounds elements read as 0), elsewhere through the same masked loads as the
ordinary template. The persistent configs join the autotuner's choices ahead of the others.

Leaves out: split-K, prologue fusion, warp specialisation, dynamic shapes (sizes
and strides are literals), and int64 indexing (an operand of 2**31 elements or more takes
no template).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from ...codegen.common import IndentedBuffer
from ...ir.indexing import canonical_vars
from ...ir.nodes import Layout, ReinterpretView
from ...ir.sizevars import is_static
from ...triton.kernel import TritonKernel
from ...triton.overrides import TRITON_TYPE
from ...triton.program import interpreter_range
from ...triton.runtime import cdiv
from ...virtualized import V
from .scheduling import is_template

#: operand dtypes the template computes
TEMPLATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclasses.dataclass(frozen=True)
class Gemm:
    """The problem one template solves: C[b] = A[b] @ B[b], C contiguous [B, M, N] (no
    batch dim for mm); the operands' strides are (batch, row, column), their offsets too."""
    op: str                 # "mm" or "bmm"
    B: int
    M: int
    N: int
    K: int
    a_stride: tuple
    b_stride: tuple
    a_offset: int
    b_offset: int
    dtype: torch.dtype

    @classmethod
    def of(cls, a: Layout, b: Layout) -> "Gemm":
        batch = lambda layout: layout.stride[0] if len(layout.size) == 3 else 0  # noqa: E731
        return cls("bmm" if len(a.size) == 3 else "mm", a.size[0] if len(a.size) == 3 else 1,
                   a.size[-2], b.size[-1], a.size[-1], (batch(a), *a.stride[-2:]), (batch(b), *b.stride[-2:]),
                   a.offset, b.offset, a.dtype)

    def __str__(self):
        batch = f"{self.B}x" if self.op == "bmm" else ""
        return f"{self.op}({batch}{self.M}x{self.K}, {batch}{self.K}x{self.N}) {str(self.dtype).removeprefix('torch.')}"


def operand(x) -> tuple[str, Layout]:
    """(buffer name, the layout it is read through) of a template input."""
    return (x.data.get_name(), x.layout) if isinstance(x, ReinterpretView) else (x.get_name(), x.layout)


#: why a template is not used with symbolic sizes (its configurations are timed, and its
#: tiles and grid sized, for one shape: it stays static, as the combo kernels do)
SYMBOLIC_PROBLEM = "symbolic sizes (the template is compiled for static sizes only)"


def template_problem(layouts, dtypes) -> str | None:
    """Why the template cannot compute a matmul of these operands, or None."""
    if not all(is_static(n) for layout in layouts for n in (*layout.size, *layout.stride, layout.offset)):
        return SYMBOLIC_PROBLEM
    if any(d not in TEMPLATE_DTYPES for d in dtypes) or len(set(dtypes)) > 1:
        return f"the template takes float32, float16 or bfloat16 operands of one dtype, not {', '.join(map(str, dtypes))}"
    if any(n == 0 for layout in layouts for n in layout.size):
        return "an empty operand"
    if any(layout.storage_numel() >= 2**31 for layout in layouts):
        return "an operand of 2**31 elements or more (the template indexes in int32)"
    return None


def tma_problem(g: Gemm) -> str | None:
    """Why a TMA descriptor cannot read these operands, or None. A descriptor describes a
    2-D row-major array: one unit stride, the other stride and the start 16-byte aligned."""
    size = torch.empty((), dtype=g.dtype).element_size()
    if g.op == "bmm":
        return "bmm (the TMA template takes mm only)"
    for name, (_, rows, cols), offset in (("A", g.a_stride, g.a_offset), ("B", g.b_stride, g.b_offset)):
        if 1 not in (rows, cols):
            return f"{name} has no unit stride"
        if (max(rows, cols) * size) % 16 or (offset * size) % 16:
            return f"{name}'s stride or offset is not a multiple of 16 bytes"
    return None


# --------------------------------------------------------------------------- the template
def gemm_source(g: Gemm, config: dict, precision: str, interpret: bool, a_ptr: str, b_ptr: str) -> list[str]:
    """The template's body up to the epilogue: `acc` holds this program's tile, `rm`/`rn`
    its rows and columns, `idx_b` its batch; then the tile's x/r block (`xindex`, `xmask`,
    `rindex`, `rmask`) that the epilogue is written against. A persistent config
    (`config["persistent"]`) wraps all of it in a loop over tiles, `programs` apart: the
    lines after `for tile in ...` (and the epilogue the caller adds) are one level in."""
    bk, gm = config["BLOCK_K"], config["GROUP_M"]
    persistent = config.get("persistent")
    batch = g.B > 1
    hint = lambda v, n, block: (f"tl.max_contiguous(tl.multiple_of({v} % {n}, {block}), {block})"  # noqa: E731
                                if n % block == 0 else f"{v} % {n}")   # (a wrapped tile is not contiguous)
    dot = _gemm_dot(g, precision, interpret)
    pid = "tile" if persistent else "pid"
    head = _gemm_head(g, config, interpret, a_ptr, b_ptr)
    a_load, b_load = _operand_loads(g, config, a_ptr, b_ptr)
    body = [
        f"# tiles in groups of {gm} rows, so that programs running together share B's columns in cache",
        f"width = {gm} * grid_n",
        f"group_id = {pid} // width",
        f"group_size = tl.minimum(grid_m - group_id * {gm}, {gm})",
        f"pid_m = group_id * {gm} + ({pid} % group_size)",
        f"pid_n = ({pid} % width) // group_size",
        *(["idx_b = tl.program_id(1)"] if batch else []),
        "rm = pid_m * XBLOCK + tl.arange(0, XBLOCK)",
        "rn = pid_n * RBLOCK + tl.arange(0, RBLOCK)",
        *([] if persistent == "tma" else [
            "# rows and columns past the edge read valid memory again; the epilogue masks them off",
            f"ram = {hint('rm', g.M, config['BLOCK_M'])}",
            f"rbn = {hint('rn', g.N, config['BLOCK_N'])}",
            f"rk = tl.arange(0, {bk})"]),
        "acc = tl.full([XBLOCK, RBLOCK], 0, tl.float32)",
        f"for k in range(0, {g.K}, {bk}):",
        f"    a = {a_load}",
        f"    b = {b_load}",
        f"    acc += {dot}",
        "# the epilogue's block: tile element (m, n) of batch idx_b is x = idx_b*M + m, r = n",
        f"xnumel = {g.B * g.M}",
        f"rnumel = {g.N}",
        f"xindex = {'idx_b * M + ' if batch else ''}rm[:, None]",
        "xmask = rm[:, None] < M",
        "rindex = rn[None, :]",
        "rmask = rindex < rnumel",
    ]
    return head + [("    " if persistent else "") + line for line in body]


def _gemm_dot(g: Gemm, precision: str, interpret: bool) -> str:
    """The main loop's product of the tiles `a` and `b`, by the operands' dtype."""
    if g.dtype == torch.float32:
        return f"tl.dot(a, b, input_precision={precision!r})"
    if g.dtype == torch.bfloat16 and interpret:   # see the module docstring
        return "tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision='ieee')"
    return "tl.dot(a, b)"   # float16/bfloat16 products, float32 accumulator


def _gemm_head(g: Gemm, config: dict, interpret: bool, a_ptr: str, b_ptr: str) -> list[str]:
    """gemm_source's first lines: the sizes and the grid; for a persistent config, then its TMA
    descriptors (`"tma"`) and the `for tile in ...` loop whose body is one level in."""
    bk = config["BLOCK_K"]
    persistent = config.get("persistent")
    (_, sam, sak), (_, sbk, sbn) = g.a_stride, g.b_stride
    head = [
        f"# {g}: one XBLOCK x RBLOCK (BLOCK_M x BLOCK_N) tile of C = A @ B per "
        + (f"loop step: a persistent kernel, {config['programs']} programs each taking one tile in {config['programs']}"
           if persistent else "program"),
        f"M, N, K = {g.M}, {g.N}, {g.K}",
        "pid = tl.program_id(0)",
        "grid_m = (M + XBLOCK - 1) // XBLOCK",
        "grid_n = (N + RBLOCK - 1) // RBLOCK",
    ]
    if persistent == "tma":   # descriptors of A [M, K] and B [K, N], read through their unit strides
        def descriptor(name, ptr, offset, rows, cols, sr, sc, block_r, block_c):
            base = f"{ptr} + {offset}" if offset else ptr
            if sc == 1:
                return f"{name}_desc = tl.make_tensor_descriptor({base}, shape=[{rows}, {cols}], strides=[{sr}, 1], " \
                       f"block_shape=[{block_r}, {block_c}])"
            return f"{name}_desc = tl.make_tensor_descriptor({base}, shape=[{cols}, {rows}], strides=[{sc}, 1], " \
                   f"block_shape=[{block_c}, {block_r}])   # (a transposed operand: loaded as its transpose)"
        head += ["# TMA: the copy engine fetches each tile (out-of-bounds elements read as 0: no masks)",
                 descriptor("a", a_ptr, g.a_offset, "M", "K", sam, sak, "XBLOCK", bk),
                 descriptor("b", b_ptr, g.b_offset, "K", "N", sbk, sbn, bk, "RBLOCK")]
    if persistent and interpret:
        head += interpreter_range("tile", "pid", "grid_m * grid_n", config["programs"])
    elif persistent:
        head += [f"for tile in range(pid, grid_m * grid_n, {config['programs']}):"]
    return head


def _operand_loads(g: Gemm, config: dict, a_ptr: str, b_ptr: str) -> tuple[str, str]:
    """The main loop's loads of A's and B's tiles at step `k`: through the TMA descriptors, or
    `tl.load` at the tile's addresses (masked along K where BLOCK_K does not divide it)."""
    bk = config["BLOCK_K"]
    persistent = config.get("persistent")
    (sab, sam, sak), (sbb, sbk, sbn) = g.a_stride, g.b_stride
    batch = g.B > 1
    a_mask = "" if g.K % bk == 0 else ", mask=(k + rk)[None, :] < K, other=0.0"
    b_mask = "" if g.K % bk == 0 else ", mask=(k + rk)[:, None] < K, other=0.0"
    def address(ptr, offset, sb, rows, sr, cols, sc):   # ptr + (offset + idx_b*sb + rows*sr + cols*sc)
        terms = [str(offset)] * bool(offset) + [f"idx_b * {sb}"] * (batch and sb != 0) \
            + [f"{v} * {s}" if s != 1 else v for v, s in ((rows, sr), (cols, sc))]   # (a 0 keeps the tile's shape)
        return f"{ptr} + ({' + '.join(terms)})"
    a_load = ("a_desc.load([pid_m * XBLOCK, k])" if sak == 1 else "a_desc.load([k, pid_m * XBLOCK]).T") \
        if persistent == "tma" else \
        f"tl.load({address(a_ptr, g.a_offset, sab, 'ram[:, None]', sam, '(k + rk)[None, :]', sak)}{a_mask})"
    b_load = ("b_desc.load([k, pid_n * RBLOCK])" if sbn == 1 else "b_desc.load([pid_n * RBLOCK, k]).T") \
        if persistent == "tma" else \
        f"tl.load({address(b_ptr, g.b_offset, sbb, '(k + rk)[:, None]', sbk, 'rbn[None, :]', sbn)}{b_mask})"
    return a_load, b_load


def launch_meta(config: dict) -> dict:
    """The launch's keywords: the tile as XBLOCK/RBLOCK, warps and stages."""
    return {"XBLOCK": config["BLOCK_M"], "RBLOCK": config["BLOCK_N"], "num_warps": config["num_warps"],
            "num_stages": config["num_stages"]}


def grid(g: Gemm, config: dict) -> tuple:
    if config.get("persistent"):
        return (config["programs"], g.B)
    return (cdiv(g.M, config["BLOCK_M"]) * cdiv(g.N, config["BLOCK_N"]), g.B)


class TritonTemplateKernel(TritonKernel):
    """The kernel of a fused group that holds a TemplateBuffer: the template's main loop,
    then the group's other nodes (pointwise, over the template's output ranges) as its
    epilogue, on the tile's block. Named `triton_tem_fused_..._N` as Inductor names them."""

    def __init__(self, group, config=None, removed_buffers=()):
        node = next(n for n in group.nodes if is_template(n))
        self.template = node.node
        # the group's loops, cut where the last sizes make up the N columns of a tile
        split = next(k for k in range(len(group.R) + 1) if math.prod(group.R[k:]) == self.template.get_size()[-1])
        super().__init__(group.kernel_name, group.R[:split] or [1], group.R[split:] or [1], config, removed_buffers,
                         tiled=True)
        (a_name, a), (b_name, b) = map(operand, self.template.inputs)
        self.gemm = Gemm.of(a, b)
        self.a_ptr, self.b_ptr = self.args.input(a_name), self.args.input(b_name)

    def name_prefix(self) -> str:
        return "triton_tem"

    def block_kind(self, node) -> str:
        return "loop"

    def starts_new_block(self, kind, reads) -> bool:
        return False   # one tile, one block: the fusion rule lets only pointwise nodes in

    def reads_out_of_scope(self, nodes) -> set[str]:
        """Nothing: the epilogue reads the product at the tile's own index (the fusion rule
        checks it), in the one block that holds every store; a read elsewhere would still
        trip `_stored`'s assertion."""
        return set()

    def _tile_vars(self):
        """The kernel's loop variables of the non-1 dims: the scheduler's canonical order."""
        pick = lambda vs, ns: [v for v, n in zip(vs, ns) if n != 1]  # noqa: E731
        return pick(self.itervars, self.ranges), pick(self.reduction_vars, self.reduction_ranges)

    def codegen_node(self, node):
        if self.block is None:
            self._open_block("loop")
        outer, inner = self._tile_vars()
        if is_template(node):   # the template's "store": its value is the accumulator
            buf = self.template
            index = node.write_index([n for n in self.ranges + self.reduction_ranges if n != 1]).subs(
                dict(zip(canonical_vars(len(outer + inner)), outer + inner)), simultaneous=True)
            low = buf.get_dtype() in (torch.float16, torch.bfloat16)
            value = self._gen(f"acc.to({TRITON_TYPE[buf.get_dtype()]}).to(tl.float32)" if low else "acc",
                              torch.float32, "xr")
            self._note_store(buf.get_name(), self.index(index)[0], value,
                             lambda: self._store_line(buf.get_name(), index, value, frozenset("xr")))
        else:
            index, rindex = node.index_for(outer, inner)
            with V.set_ops_handler(self):
                node.node.store_body(index, rindex)
        self.block.written.add(node.get_name())

    def block_sizes(self) -> dict:
        return launch_meta(self.template.config)

    def _codegen_program(self, code: IndentedBuffer):
        config = self.template.config
        code.writelines(gemm_source(self.gemm, config, config["precision"],
                                    self.template.get_device().type == "cpu", self.a_ptr, self.b_ptr))
        with code.indent(1 if config.get("persistent") else 0):   # a persistent kernel: inside its tile loop
            code.writelines(self._var_definitions(self._x_dims, "xindex") + self._var_definitions(self._r_dims, "rindex"))
            for block in self.blocks:
                for part in (block.prefix, block.body, block.suffix):
                    code.splice(part)

    def _launcher(self) -> list[str]:
        ptrs = self.pointer_names()
        lines = [f"def {self.launcher_name()}({', '.join(ptrs)}):",
                 f'    """GEMM template {self.gemm}, {self._tile_text()}; takes the tensors of {self.args.call_names()}"""']
        return self._launch_lines(lines, grid(self.gemm, self.template.config), ptrs, self.block_sizes(),
                                  [V.graph.get_dtype(n) for n in self.args.call_names()])

    def _tile_text(self) -> str:
        return config_text(self.template.config)


def config_text(config: dict) -> str:
    if config.get("backend") == "cutlass":
        return config["name"]
    text = ", ".join(f"{k}={config[k]}" for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    return text + (f", persistent={config['persistent']} x{config['programs']}" if config.get("persistent") else "")


def kernel_for_template_group(group, config) -> TritonTemplateKernel | None:
    """The template kernel of a fused group that holds a TemplateBuffer, else None."""
    if any(map(is_template, group.nodes)):
        return TritonTemplateKernel(group, config)
    return None

