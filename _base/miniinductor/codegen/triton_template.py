"""Triton GEMM templates: a matmul kernel with a hole where its epilogue goes, and the
autotuner that picks between it and ATen.

Mirrors `torch/_inductor/kernel/mm.py` (`mm_template`, `mm_configs`),
`select_algorithm.py` (`TritonTemplateKernel` and its `store_output`,
`autotune_select_algorithm` and the "AUTOTUNE mm(...)" table) in small. The template is
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

The autotuner (`select_gemm`, called by lowering/matmul.py): on the GPU, ATen and each
template config are timed on random operands of the real shapes and strides, optionally
followed by a coordinate descent from the fastest config; the table is logged under
`autotune` and the winner kept on disk (runtime/triton_runtime.py, `AutotuneCache`).
Under the interpreter nothing is timed: the first template config is taken. These are the
bare templates; once fused, a template is timed again with its epilogue, per config, and
kept apart from it where that is faster (codegen/epilogue_tuning.py).

Precision as eager: float32 operands multiply in IEEE float32 unless
`torch.backends.cuda.matmul.allow_tf32` (read at compile time) asks for TF32; float16 and
bfloat16 operands accumulate in float32 and round once at the store. The option
`gemm_fp32_precision="tf32x3"` asks instead for Triton's three-product TF32 dot (each operand
split into a TF32 part and a TF32 remainder, the remainders' product dropped): tensor cores,
about 1.8x cuBLAS's IEEE float32 on an H100 where an IEEE `tl.dot` reaches 0.5x, and closer to
a float64 product than either IEEE result on the data measured (docs/benchmarks_gpu.md), but
not the same bits as eager. The `precision` argument below is Triton's `input_precision`. Under Triton's
interpreter a bfloat16 `tl.dot` is wrong (Triton 3.9: NumPy has no bfloat16), so there the
operands are widened to float32 first: the same products, exactly, in the same accumulator.

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
import json
import logging
import math
import time

import torch

from ..ir.indexing import canonical_vars
from ..ir.nodes import Layout, ReinterpretView
from ..ir.sizevars import is_static
from ..logs import get_logger
from ..runtime.triton_runtime import AutotuneCache, Launcher, benchmark, cdiv, load_module, next_power_of_2, precompile_all, set_tma_allocator
from ..virtualized import V
from .common import IndentedBuffer
from .triton import TritonKernel
from .triton_overrides import TRITON_TYPE
from .triton_program import interpreter_range

log = get_logger("autotune")
#: operand dtypes the template computes
TEMPLATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: the tile configurations tried (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), first
#: the one taken untimed; a subset of Inductor's mm_configs
GEMM_CONFIGS = [(64, 64, 32, 4, 4), (128, 128, 32, 4, 3), (128, 128, 64, 8, 3), (64, 128, 32, 4, 4),
                (128, 64, 32, 4, 4), (128, 256, 64, 8, 3), (32, 32, 32, 2, 2)]
GROUP_M = 8
#: the largest BLOCK_M * BLOCK_N tried for an IEEE float32 dot: on an H100 the 128x256 tile
#: came last of 8 choices in every float32 GEMM of the GPT-2 block (at 10-16% of the winner's
#: speed) and was the slowest to compile (docs/benchmarks_gpu.md, 2026-11-26 later)
FMA_MAX_TILE = 128 * 128


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


def gemm_configs(g: Gemm, persistent: str | None = None, programs: int = 0, fma: bool = False) -> list[dict]:
    """GEMM_CONFIGS with blocks shrunk to the problem (at least 16: tl.dot's minimum),
    deduplicated. `persistent` ("tma" or "plain"): the persistent form of each, `programs`
    programs looping over the tiles (one per SM on a GPU). `fma` (an IEEE float32 dot, which
    runs on the FMA units, not tensor cores): without tiles over FMA_MAX_TILE elements."""
    found = []
    for bm, bn, bk, warps, stages in GEMM_CONFIGS:
        if fma and bm * bn > FMA_MAX_TILE:
            continue
        config = {"BLOCK_M": min(bm, max(16, next_power_of_2(g.M))), "BLOCK_N": min(bn, max(16, next_power_of_2(g.N))),
                  "BLOCK_K": min(bk, max(16, next_power_of_2(g.K))), "GROUP_M": GROUP_M,
                  "num_warps": warps, "num_stages": stages}
        if persistent:
            tiles = cdiv(g.M, config["BLOCK_M"]) * cdiv(g.N, config["BLOCK_N"])
            config |= {"persistent": persistent, "programs": min(programs, tiles)}
        if config not in found:
            found.append(config)
    return found


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
    (sab, sam, sak), (sbb, sbk, sbn) = g.a_stride, g.b_stride
    batch = g.B > 1
    a_mask = "" if g.K % bk == 0 else ", mask=(k + rk)[None, :] < K, other=0.0"
    b_mask = "" if g.K % bk == 0 else ", mask=(k + rk)[:, None] < K, other=0.0"
    hint = lambda v, n, block: (f"tl.max_contiguous(tl.multiple_of({v} % {n}, {block}), {block})"  # noqa: E731
                                if n % block == 0 else f"{v} % {n}")   # (a wrapped tile is not contiguous)
    if g.dtype == torch.float32:
        dot = f"tl.dot(a, b, input_precision={precision!r})"
    elif g.dtype == torch.bfloat16 and interpret:   # see the module docstring
        dot = "tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision='ieee')"
    else:
        dot = "tl.dot(a, b)"   # float16/bfloat16 products, float32 accumulator
    def address(ptr, offset, sb, rows, sr, cols, sc):   # ptr + (offset + idx_b*sb + rows*sr + cols*sc)
        terms = [str(offset)] * bool(offset) + [f"idx_b * {sb}"] * (batch and sb != 0) \
            + [f"{v} * {s}" if s != 1 else v for v, s in ((rows, sr), (cols, sc))]   # (a 0 keeps the tile's shape)
        return f"{ptr} + ({' + '.join(terms)})"
    pid = "tile" if persistent else "pid"
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
    a_load = ("a_desc.load([pid_m * XBLOCK, k])" if sak == 1 else "a_desc.load([k, pid_m * XBLOCK]).T") \
        if persistent == "tma" else \
        f"tl.load({address(a_ptr, g.a_offset, sab, 'ram[:, None]', sam, '(k + rk)[None, :]', sak)}{a_mask})"
    b_load = ("b_desc.load([k, pid_n * RBLOCK])" if sbn == 1 else "b_desc.load([pid_n * RBLOCK, k]).T") \
        if persistent == "tma" else \
        f"tl.load({address(b_ptr, g.b_offset, sbb, '(k + rk)[:, None]', sbk, 'rbn[None, :]', sbn)}{b_mask})"
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
        node = next(n for n in group.nodes if n.is_template)
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
        if node.is_template:   # the template's "store": its value is the accumulator
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
    text = ", ".join(f"{k}={config[k]}" for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    return text + (f", persistent={config['persistent']} x{config['programs']}" if config.get("persistent") else "")


# --------------------------------------------------------------------------- the autotuner
def bare_template_module(g: Gemm, config: dict, precision: str, interpret: bool):
    """The template alone (its tile stored as is): what the autotuner times."""
    code = IndentedBuffer()
    code.writelines(["import triton", "import triton.language as tl", "", "",
                     "@triton.jit", "def gemm(in_ptr0, in_ptr1, out_ptr0, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):"])
    with code.indent():
        code.writelines(gemm_source(g, config, precision, interpret, "in_ptr0", "in_ptr1"))
        code.writeline(("    " if config.get("persistent") else "")
                       + f"tl.store(out_ptr0 + ({g.N} * xindex + rindex), acc.to({TRITON_TYPE[g.dtype]}), xmask & rmask)")
    return load_module(code.getvalue() + "\n", "gemm")


def _operand_tensor(layout: Layout) -> torch.Tensor:
    storage = torch.randn(layout.storage_numel(), device=layout.device, dtype=torch.float32).to(layout.dtype)
    return storage.as_strided(layout.size, layout.stride, layout.offset)


@dataclasses.dataclass
class GemmSelection:
    """The autotuner's answer: the winning template config (None: ATen) and the table it came
    from, `[ms, choice]` pairs fastest first (a choice is a config or "ATEN"; ms None where
    nothing was timed: every config, in order). The epilogue benchmark starts from the table
    (codegen/epilogue_tuning.py)."""
    config: dict | None
    timings: list


def template_configs(g: Gemm, backends: tuple, precision: str, device: torch.device,
                     persistent: str | None = None) -> list[dict]:
    """The template configs the autotuner times for `g` ([] unless TRITON is a backend)."""
    if "TRITON" not in backends:
        return []
    programs = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    fma = g.dtype == torch.float32 and precision == "ieee"
    return (gemm_configs(g, persistent, programs, fma) if persistent else []) + gemm_configs(g, fma=fma)


def bare_launchers(g: Gemm, configs, precision: str) -> list[Launcher]:
    """A `Launcher` of the bare template per config (what `precompile_all` compiles)."""
    return [Launcher(bare_template_module(g, c, precision, False).gemm, grid(g, c), (g.dtype,) * 3, **launch_meta(c))
            for c in configs]


def prefetch_gemm(g: Gemm, backends: tuple, precision: str, device: torch.device):
    """Start compiling `g`'s template configs in the compile threads and return at once:
    lowering then goes on, and `select_gemm`, when it reaches this matmul, waits for these
    compiles instead of starting its own. Inductor gets the same overlap by compiling every
    matmul's choices before any is timed (`MultiTemplateBuffer`)."""
    precompile_all(bare_launchers(g, template_configs(g, backends, precision, device), precision), device, wait=False)


def select_gemm(g: Gemm, layouts, backends: tuple, precision: str, device: torch.device,
                descend: bool = False, persistent: str | None = None) -> GemmSelection:
    """The autotuner: the winning template config (None: ATen) and its table. Choices: ATen (when
    in `backends`) and `gemm_configs(g)` (when TRITON is), and before those, with
    `persistent` ("tma" or "plain"), the persistent form of each. On the GPU each is timed on
    random operands of the real shapes and strides, then (`descend`: the option
    coordinate_descent_tuning) `coordinate_descent` walks from the fastest template config;
    the table is logged (`autotune`) and the winner kept in the on-disk cache under
    (problem, device, precision, backends, descent). Under the interpreter nothing is timed:
    the first template config is taken."""
    configs = template_configs(g, backends, precision, device, persistent)
    if not configs:
        return GemmSelection(None, [])
    if persistent == "tma" and device.type == "cuda":
        set_tma_allocator()
    if device.type != "cuda":
        log.info("AUTOTUNE %s on the CPU (Triton's interpreter): timings mean nothing there, so nothing is "
                 "timed%s; took the first template config (%s)", g, " (nor coordinate descent)" * descend,
                 config_text(configs[0]))
        return GemmSelection(configs[0], [[None, c] for c in configs])
    cache = AutotuneCache(json.dumps([str(g), g.a_stride, g.b_stride, g.a_offset, g.b_offset,
                                      torch.cuda.get_device_name(device), precision, backends, configs, descend]))
    if (winner := cache.get()) is not None:
        return GemmSelection(None if winner == "ATEN" else winner, cache.timings())
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    start = time.perf_counter()
    timings = {}   # name → (ms, config or "ATEN")
    with unset_fake_temporarily():
        a, b = (_operand_tensor(layout) for layout in layouts)
        out = torch.empty((g.B, g.M, g.N) if g.op == "bmm" else (g.M, g.N), device=device, dtype=g.dtype)

        def time_config(config) -> float:
            name = f"triton_{g.op} {config_text(config)}"
            if name not in timings:
                try:
                    kernel = bare_template_module(g, config, precision, False).gemm
                    timings[name] = (benchmark(lambda: kernel[grid(g, config)](a, b, out, **launch_meta(config))),
                                     config)
                except Exception as exc:  # noqa: BLE001 -- e.g. out of shared memory: not a choice
                    logging.getLogger("miniinductor").debug("GEMM config %s failed: %s", config, exc)
                    timings[name] = (math.inf, config)
            return timings[name][0]
        # every config compiled at once, in threads (ptxas and LLVM run outside the GIL), before any is timed
        compile_s = precompile_all(bare_launchers(g, configs, precision), device)
        aten = torch.bmm if g.op == "bmm" else torch.mm
        run_aten = lambda: aten(a, b, out=out)  # noqa: E731
        aten_ms = benchmark(run_aten) if "ATEN" in backends else None
        first = min(configs, key=time_config)
        if descend and time_config(first) < math.inf:
            coordinate_descent(time_config, first, g)
        # ATen timed again after the configs, the better of the two kept: timed once, first, right
        # after the configs' compiles, bfloat16 4096x4096x1024 read 0.0678 ms on an H100 (0.048 on
        # its own, and again when timed last), and the template (0.059) won where cuBLAS is faster
        if aten_ms is not None:
            timings[f"aten.{g.op}"] = (min(aten_ms, benchmark(run_aten)), "ATEN")
    ranked = sorted((ms, name, choice) for name, (ms, choice) in timings.items() if ms < math.inf)
    if not ranked:
        raise RuntimeError(f"max_autotune: no choice for {g} could run (backends {','.join(backends)})")
    best = ranked[0][0]
    log.info("AUTOTUNE %s\n%s\nAUTOTUNE compiling and benchmarking took %.2f s (compiling %.2f s)", g,
             "\n".join(f"  {name:70s} {ms:.4f} ms {100 * best / ms:5.1f}%" for ms, name, _ in ranked),
             time.perf_counter() - start, compile_s)
    table = [[ms, choice] for ms, _, choice in ranked]
    cache.put(ranked[0][2], table)
    return GemmSelection(None if ranked[0][2] == "ATEN" else ranked[0][2], table)


#: what coordinate descent varies, and within which bounds
COORDINATES = {"BLOCK_M": (16, 256), "BLOCK_N": (16, 256), "BLOCK_K": (16, 128), "num_warps": (1, 16),
               "num_stages": (1, 6)}


def coordinate_descent(time_config, config: dict, g: Gemm, threshold: float = 0.01) -> dict:
    """Inductor's coordinate descent (`runtime/coordinate_descent_tuner.py`), on a template's
    tile: from `config`, try each coordinate doubled and halved (blocks no larger than the
    problem needs); move to the first neighbour faster by more than `threshold`, and repeat
    until no neighbour is. `time_config(config)` → ms (inf where it cannot run)."""
    caps = {"BLOCK_M": max(16, next_power_of_2(g.M)), "BLOCK_N": max(16, next_power_of_2(g.N)),
            "BLOCK_K": max(16, next_power_of_2(g.K))}
    best, best_ms = config, time_config(config)
    moved = True
    while moved:
        moved = False
        for field, (low, high) in COORDINATES.items():
            for value in (best[field] * 2, best[field] // 2):
                if not low <= value <= min(high, caps.get(field, high)):
                    continue
                candidate = dict(best, **{field: value})
                ms = time_config(candidate)
                if ms < best_ms * (1 - threshold):
                    best, best_ms, moved = candidate, ms, True
    return best


def kernel_for_template_group(group, config) -> TritonTemplateKernel | None:
    """The template kernel of a fused group that holds a TemplateBuffer, else None."""
    if any(getattr(n, "is_template", False) for n in group.nodes):
        return TritonTemplateKernel(group, config)
    return None

