"""Mix-order reductions: one Triton kernel reduces the rows *and* the columns of an input.

Mirrors the mix-order reduction of newer Inductor (`MixOrderReduction` in
`torch/_inductor/scheduler.py` and its Triton codegen). Summing the columns of an [M, N]
input and taking each row's max are two reductions in transposed roles: as two kernels,
the input crosses memory twice. Here each program takes a *band* of rows, reduces every
row whole (a persistent reduction, as usual) and folds the band's column partials into an
accumulator of one row; the launcher then combines the bands' partial rows:

    @triton.jit
    def triton_per_fused_amax_sum_0(in_ptr0, out_ptr0, out_ptr1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
        rnumel = 4096
        rbase = tl.arange(0, RBLOCK)[None, :]
        rindex = rbase
        rmask = rindex < rnumel
        _acc0 = tl.full([1, RBLOCK], 0.0, tl.float32)        <- this band's column sums
        for band_row in range(0, 32, 2):                     <- a band of 32 rows, XBLOCK at a time
            xnumel = 16384
            xoffset = tl.program_id(0) * 32 + band_row
            ...                                              <- the row group's code, unchanged
            tmp0 = tl.load(in_ptr0 + (rindex + 4096*xindex), xmask & rmask, other=0)
            _acc0 = _acc0 + tl.reduce(tl.where(xmask & rmask, tmp0, 0.0), 0, _sum_combine)[None, :]
        tl.store(out_ptr1 + (4096*tl.program_id(0) + rindex), _acc0, rmask)  <- one partial row

    def launch_triton_per_fused_amax_sum_0(in_ptr0, out_ptr0, out_ptr1):
        out_ptr1_partial = torch.empty((512, 4096), dtype=torch.float32, device=in_ptr0.device)
        triton_per_fused_amax_sum_0[(512,)](in_ptr0, out_ptr0, out_ptr1_partial, XBLOCK=2, RBLOCK=4096, num_warps=8)
        torch.sum(out_ptr1_partial, 0, out=out_ptr1.view(-1))   <- 512 partial rows → the column sums

A column node's body runs with its loop variables swapped (its rows are our reduction
dims and its reduction our rows), so its loads print the same index as the row nodes' and
CSE shares them. The scheduler (fusion.py, `mix_order_problem`) only pairs groups this can
finish: sum/max/min column reductions into contiguous outputs, rows short enough to be
persistent, and no data flowing between the two groups.

(The launcher as printed here; the generated one goes through a `Launcher`, as in triton.py.)

Simplified: the partial rows are combined by one ATen reduction in the launcher (Inductor
generates a second kernel), and the band size comes from a fixed heuristic, not autotuning.
"""
from __future__ import annotations

import torch

from ..runtime.triton_runtime import cdiv, next_power_of_2
from ..virtualized import V
from .common import CSEVariable, compute_dtype
from .policy import MIX_ORDER_KINDS
from .triton import TritonKernel
from .triton_overrides import COMBINE, TRITON_TYPE, accumulator_dtype, reduction_init

#: bands (programs) per streaming multiprocessor of the GPU: enough to keep loads in flight
#: (on an H100, 528 bands ran at 76% of copy bandwidth, 132 at 37-55%, for 16384 x 4096)
BANDS_PER_SM = 4
#: at least this many rows in a band, so the partial rows stay small next to the input
MIN_BAND_ROWS = 16
#: elements one step of the band loop reads (XBLOCK rows of RBLOCK)
STEP_NUMEL = 8192


class MixOrderKernel(TritonKernel):
    def __init__(self, name, ranges, reduction_ranges, transposed, config=None, removed_buffers=()):
        super().__init__(name, ranges, reduction_ranges, config, removed_buffers)
        assert self.persistent, "a mix-order kernel reduces each row in one block"
        self.transposed = set(transposed)   # the nodes that reduce columns
        self.column_mode = False            # True while such a node's body runs
        self.column_prefix: list[str] = []  # accumulators, before the band loop
        self.column_suffix: list[str] = []  # partial-row stores, after it
        self.partials: dict[str, tuple] = {}   # out pointer → (dtype of its partials, combining torch reduction, output dtype)
        self.pending: dict[CSEVariable, str] = {}   # accumulator → its reduction type
        xblock = self.block_sizes()["XBLOCK"]
        bands = max(1, min(max_bands(), self.xnumel // MIN_BAND_ROWS))
        self.band = cdiv(cdiv(self.xnumel, bands), xblock) * xblock   # rows per program, whole XBLOCKs
        self.bands = cdiv(self.xnumel, self.band)

    def codegen_node(self, node):
        if node.get_name() not in self.transposed:
            return super().codegen_node(node)
        if self.block is None:
            self._open_block("loop")   # persistent: every block is straight-line code
        index, rindex = self.node_indices(node)
        self.column_mode = True
        try:
            with V.set_ops_handler(self):
                node.node.store_body(index, rindex)
        finally:
            self.column_mode = False
        self.block.written.add(node.get_name())

    def node_indices(self, node):
        if node.get_name() in self.transposed:   # its rows are our columns
            return node.index_for(self.reduction_vars, self.itervars)
        return super().node_indices(node)

    def reduction(self, dtype, src_dtype, reduction_type, value):
        """In a column node: fold this step's rows (axis 0) into the band's accumulator."""
        if not self.column_mode:
            return super().reduction(dtype, src_dtype, reduction_type, value)
        text, vdtype, _ = self._info(value)
        vdtype = vdtype or compute_dtype(src_dtype)
        acc_dtype = accumulator_dtype(reduction_type, dtype, vdtype)
        if vdtype != acc_dtype:
            text = f"{text}.to({TRITON_TYPE[acc_dtype]})"
        init = reduction_init(reduction_type, acc_dtype)
        acc = CSEVariable(self._new_acc(), acc_dtype, "r")   # block-shaped [1, RBLOCK]
        self.column_prefix.append(f"{acc} = tl.full([1, RBLOCK], {init}, {TRITON_TYPE[acc_dtype]})")
        masked = self._gen(f"tl.where(xmask & rmask, {text}, {init})", acc_dtype, "xr")
        self.helpers.add(f"_{reduction_type}_combine")
        partial = f"tl.reduce({masked}, 0, _{reduction_type}_combine)[None, :]"
        combined = COMBINE[reduction_type].format(acc=acc, v=partial)
        self._note_helpers(combined)
        self.compute.writeline(f"{acc} = {combined}")
        self.pending[acc] = reduction_type
        return acc

    def store_reduction(self, name, index, value):
        """In a column node: after the band loop, store the band's partial row."""
        if not self.column_mode:
            return super().store_reduction(name, index, value)
        ptr = self.args.output(name)
        text, _ = self.index(index)
        self.column_suffix.append(f"tl.store({ptr} + ({self.rnumel}*{self._program_id()} + {text}), {value}, rmask)")
        self.partials[ptr] = (value.dtype, MIX_ORDER_KINDS[self.pending[value]], V.graph.get_dtype(name))

    def block_sizes(self) -> dict:
        """Steps of STEP_NUMEL elements, 8 warps: on an H100 (16384 x 4096) this ran at 76%
        (float32) and 58% (bfloat16) of copy bandwidth, the best or near it of 36 tried."""
        rblock = next_power_of_2(self.rnumel)
        return {"XBLOCK": max(1, min(64, STEP_NUMEL // rblock)), "RBLOCK": rblock, "num_warps": 8}

    def autotune_candidates(self, blocks) -> list[dict]:
        return [blocks]   # the band is cut in whole XBLOCKs: a fixed XBLOCK

    def _codegen_program(self, code):
        code.writelines(self._r_header())
        code.writelines(self.column_prefix)
        xblock = self.block_sizes()["XBLOCK"]
        code.writeline(f"for band_row in range(0, {self.band}, {xblock}):  # (0, rows in a band, XBLOCK)")
        with code.indent():
            code.writelines([f"xnumel = {self.xnumel}", f"xoffset = {self._program_id()} * {self.band} + band_row"])
            code.writelines(self._x_header())
            self._codegen_blocks(code)
        code.writelines(self.column_suffix)

    def _launcher(self) -> list[str]:
        ptrs, blocks = self.pointer_names(), self.block_sizes()
        lines = [f"def {self.launcher_name()}({', '.join(ptrs)}):",
                 f'    """mix-order reduction: xnumel={self.xnumel}, rnumel={self.rnumel}, {self.bands} bands of '
                 f'{self.band} rows; takes the tensors of {self.args.call_names()}"""']
        args, dtypes = [], [V.graph.get_dtype(n) for n in self.args.call_names()]
        for k, ptr in enumerate(ptrs):
            if ptr in self.partials:
                dtype = self.partials[ptr][0]
                lines.append(f"    {ptr}_partial = torch.empty(({self.bands}, {self.rnumel}), dtype={dtype}, "
                             f"device={ptrs[0]}.device)")
            args.append(f"{ptr}_partial" if ptr in self.partials else ptr)
            dtypes[k] = self.partials[ptr][0] if ptr in self.partials else dtypes[k]
        lines = self._launch_lines(lines, [self.bands], args, blocks, dtypes)
        for ptr, (dtype, combine, out_dtype) in self.partials.items():
            if out_dtype == dtype:   # reduce straight into the output
                lines.append(f"    torch.{combine}({ptr}_partial, 0, out={ptr}.view(-1))  # the bands' partial rows, combined")
            else:
                lines.append(f"    {ptr}.view(-1).copy_({ptr}_partial.{combine}(0))  # the bands' partial rows, combined")
        return lines


def max_bands() -> int:
    """BANDS_PER_SM per multiprocessor of the graph's GPU (256 on the CPU, where it is moot)."""
    device = V.graph.current_device() if V.has_graph() else torch.device("cpu")
    if device.type != "cuda":
        return 256
    return BANDS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
