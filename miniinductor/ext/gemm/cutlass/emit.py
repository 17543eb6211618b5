"""The CUDA C++ source of one CUTLASS GEMM: a tile configuration and an epilogue, written out.

Mirrors Inductor's `codegen/cuda/gemm_template.py` (`CUTLASS3xGemmTemplate`) and the
instance text that `cutlass_library`'s `gemm_operation.py` emits, in our own words and in
small: one CUTLASS 3.x kernel for Hopper (sm90), built by CUTLASS's collective builders
from a few choices.

  - the **tile** (`tile_m x tile_n x tile_k`): the block of C one thread-block cluster's CTA
    computes, K consumed `tile_k` at a time through shared memory;
  - the **cluster** (`cluster_m x cluster_n`): CTAs that share each A/B tile they load
    through TMA multicast;
  - the **schedule**: `cooperative` (two consumer warp groups split one tile) or `pingpong`
    (two consumer warp groups alternate between tiles, one computing while the other runs
    its epilogue); both have a producer warp group feeding them through TMA;
  - the **stages**: how many K-steps of A and B sit in shared memory at once; CUTLASS picks
    the most that fit beside the epilogue's buffers (`StageCountAutoCarveout`).

The epilogue is an epilogue visitor tree (EVT, epilogue.py): its leaves fetch the
accumulator, a source tensor C, a bias row or column, further tensors; one compute node
evaluates the fused pointwise code on them; auxiliary stores write the extra outputs.

The library is compiled for runtime sizes and strides (one library serves every shape of
its dtypes, layouts, tile and epilogue) and exports one C function, `mi_cutlass_run(ptrs,
ints, stream)`: the pointers of A, B, D and the epilogue's tensors, then M, N, K, L and the
strides of A, B and D (rows, columns, batch).
"""
from __future__ import annotations

import dataclasses

import torch

#: the CUTLASS element type of each dtype
CUTLASS_TYPE = {torch.float32: "float", torch.float16: "cutlass::half_t", torch.bfloat16: "cutlass::bfloat16_t"}


@dataclasses.dataclass(frozen=True)
class CutlassConfig:
    """One CUTLASS kernel choice: tile, cluster and schedule (the stages are CUTLASS's)."""
    tile_m: int
    tile_n: int
    tile_k: int
    cluster_m: int = 1
    cluster_n: int = 1
    schedule: str = "cooperative"   # or "pingpong"

    def name(self) -> str:
        """As cutlass_library names its instances: tile, cluster, schedule."""
        return (f"cutlass3x_sm90_{self.tile_m}x{self.tile_n}x{self.tile_k}_"
                f"{self.cluster_m}x{self.cluster_n}x1_{self.schedule}")

    def as_dict(self) -> dict:
        """As a template's config: its fields, the backend and the name (what logs print)."""
        return {"backend": "cutlass", "name": self.name(), **dataclasses.asdict(self)}

    @classmethod
    def of(cls, config: dict) -> "CutlassConfig":
        return cls(**{k: v for k, v in config.items() if k not in ("backend", "name", "precision")})


SCHEDULES = {"cooperative": ("cutlass::gemm::KernelTmaWarpSpecializedCooperative",
                             "cutlass::epilogue::TmaWarpSpecializedCooperative"),
             "pingpong": ("cutlass::gemm::KernelTmaWarpSpecializedPingpong", "cutlass::epilogue::TmaWarpSpecialized")}


def cutlass_configs(dtype: torch.dtype) -> list[CutlassConfig]:
    """The configurations the autotuner times, a few of those cutlass_library generates for
    sm90: 128-byte K-steps (tile_k 64 in 16-bit types, 32 in TF32), pingpong tiles of 64
    rows (one warp group's), and clusters of two along M or N."""
    k = 32 if dtype == torch.float32 else 64
    return [CutlassConfig(128, 128, k), CutlassConfig(128, 256, k), CutlassConfig(256, 128, k, 2, 1),
            CutlassConfig(64, 128, k, 1, 1, "pingpong"), CutlassConfig(128, 128, k, 2, 1),
            CutlassConfig(64, 256, k, 1, 1, "pingpong"), CutlassConfig(128, 256, k, 1, 2)]


def operand_layout(rows_stride: int, cols_stride: int) -> str | None:
    """The CUTLASS layout tag of a matrix with these strides ("RowMajor": columns
    contiguous), or None where neither dim is contiguous."""
    if cols_stride == 1:
        return "RowMajor"
    if rows_stride == 1:
        return "ColumnMajor"
    return None


def stride_text(tag: str, role: str) -> str:
    """The C++ expression of an operand's stride tuple, from the `ints` array: the unit
    stride static (`cute::Int<1>`), the others runtime values. CUTLASS views A as (M, K, L),
    B as (N, K, L) and D as (M, N, L); `ints` holds each one's (rows, columns, batch) strides."""
    base = {"A": 4, "B": 7, "D": 10}[role]   # ints: M N K L, then A's, B's and D's strides
    rows, cols, batch = (f"ints[{base + k}]" for k in range(3))
    one = "cute::Int<1>{}"
    if role == "B":   # B's columns (N) come first in CUTLASS's view
        return (f"cute::make_stride({one}, {rows}, {batch})" if tag == "RowMajor" else
                f"cute::make_stride({cols}, {one}, {batch})")
    return (f"cute::make_stride({rows}, {one}, {batch})" if tag == "RowMajor" else
            f"cute::make_stride({one}, {cols}, {batch})")


def gemm_source(dtype: torch.dtype, a_tag: str, b_tag: str, config: CutlassConfig, epilogue) -> str:
    """The whole .cu file of one kernel: `epilogue` is an `Epilogue` (epilogue.py) that
    gives the EVT's type, its arguments and its tensors."""
    kernel_schedule, epilogue_schedule = SCHEDULES[config.schedule]
    element, out = CUTLASS_TYPE[dtype], CUTLASS_TYPE[epilogue.out_dtype]
    align = 16 // torch.empty((), dtype=dtype).element_size()
    out_align = 16 // torch.empty((), dtype=epilogue.out_dtype).element_size()
    c_type = CUTLASS_TYPE[epilogue.source_dtype] if epilogue.source_dtype is not None else "void"
    c_align = 16 // torch.empty((), dtype=epilogue.source_dtype).element_size() if epilogue.source_dtype else out_align
    return f"""// {config.name()}: D = epilogue(A @ B), {element} operands, {a_tag} A, {b_tag} B
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/numeric_types.h"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"

using namespace cute;
using namespace cutlass::epilogue::fusion;

{epilogue.functors()}
using TileShape = Shape<_{config.tile_m}, _{config.tile_n}, _{config.tile_k}>;
using ClusterShape = Shape<_{config.cluster_m}, _{config.cluster_n}, _1>;
using EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto;
constexpr auto RN = cutlass::FloatRoundStyle::round_to_nearest;

using EVT = {epilogue.evt_type()};

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpilogueTile,
    float, float,                                   // accumulator, compute
    {c_type}, cutlass::layout::RowMajor, {c_align},   // C: the epilogue's source tensor (void: none)
    {out}, cutlass::layout::RowMajor, {out_align},    // D
    {epilogue_schedule}, EVT>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    {element}, cutlass::layout::{a_tag}, {align},
    {element}, cutlass::layout::{b_tag}, {align},
    float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    {kernel_schedule}>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
""" + entry_point(element, out, a_tag, b_tag, epilogue)


def entry_point(element: str, out: str, a_tag: str, b_tag: str, epilogue) -> str:
    """The library's C functions: `mi_cutlass_run` (arguments built, checked, run) and
    `mi_cutlass_error`."""
    return f"""
static char mi_error_text[512];
static void* mi_workspace = nullptr;
static size_t mi_workspace_size = 0;

extern "C" const char* mi_cutlass_error() {{ return mi_error_text; }}

// ptrs: A, B, D, then the epilogue's tensors; ints: M N K L, A's, B's and D's strides
// (rows, columns, batch). Returns 0, or an error code with mi_cutlass_error() saying why.
extern "C" int mi_cutlass_run(void** ptrs, const int64_t* ints, void* stream) {{
  int M = int(ints[0]), N = int(ints[1]), K = int(ints[2]), L = int(ints[3]);
  typename Gemm::GemmKernel::StrideA dA = {stride_text(a_tag, "A")};
  typename Gemm::GemmKernel::StrideB dB = {stride_text(b_tag, "B")};
  typename Gemm::GemmKernel::StrideD dD = {stride_text("RowMajor", "D")};
  typename Gemm::GemmKernel::StrideC dC = dD;
  typename Gemm::Arguments args{{
      L > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm,
      {{M, N, K, L}},
      {{static_cast<{element} const*>(ptrs[0]), dA, static_cast<{element} const*>(ptrs[1]), dB}},
      {{{epilogue.evt_arguments()},
       {epilogue.source_pointer()}, dC, static_cast<{out}*>(ptrs[2]), dD}}}};
  Gemm gemm;
  cutlass::Status status = gemm.can_implement(args);
  if (status != cutlass::Status::kSuccess) {{
    snprintf(mi_error_text, sizeof mi_error_text, "can_implement: %s", cutlassGetStatusString(status));
    return 1;
  }}
  size_t need = Gemm::get_workspace_size(args);
  if (need > mi_workspace_size) {{
    if (mi_workspace) cudaFree(mi_workspace);
    if (cudaMalloc(&mi_workspace, need) != cudaSuccess) {{
      snprintf(mi_error_text, sizeof mi_error_text, "cudaMalloc of a %zu-byte workspace failed", need);
      mi_workspace = nullptr, mi_workspace_size = 0;
      return 2;
    }}
    mi_workspace_size = need;
  }}
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  status = gemm.initialize(args, mi_workspace, s);
  if (status == cutlass::Status::kSuccess) status = gemm.run(s);
  if (status != cutlass::Status::kSuccess) {{
    snprintf(mi_error_text, sizeof mi_error_text, "run: %s (%s)", cutlassGetStatusString(status),
             cudaGetErrorString(cudaGetLastError()));
    return 3;
  }}
  return 0;
}}
"""
