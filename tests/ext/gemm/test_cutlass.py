"""CUTLASS GEMM choices (ext/gemm/cutlass): what they emit, on any machine (the autotuner's
choice forced, the library never built); what nvcc makes of it, where nvcc exists; and the
kernels run against eager, on a GPU of compute capability 9.0 with CUTLASS installed."""
from __future__ import annotations

import re
import subprocess

import pytest
import torch
from torch import nn

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.ext.gemm import autotune
from miniinductor.ext.gemm import lowering as gemm_lowering
from miniinductor.ext.gemm.cutlass import build, choices
from miniinductor.ext.gemm.cutlass.emit import CutlassConfig, gemm_source
from miniinductor.ext.gemm.cutlass.epilogue import bare_epilogue

CONFIG = CutlassConfig(128, 256, 64, 2, 1)


class NotBuilt:
    """Stands for CutlassLibrary where nothing is compiled: records the source."""
    sources: list[str] = []

    def __init__(self, source):
        NotBuilt.sources.append(source)

    ints = staticmethod(lambda values: values)

    def run(self, *args):
        raise AssertionError("a CUTLASS kernel ran on a machine that cannot run it")


@pytest.fixture
def forced_cutlass(monkeypatch):
    """The autotuner picks CUTLASS for every matmul, on the CPU's Triton policy; libraries are not built."""
    monkeypatch.setattr(build, "missing", lambda device=None: None)
    monkeypatch.setattr(choices, "missing", lambda device=None: None)
    monkeypatch.setattr(build, "CutlassLibrary", NotBuilt)
    pick = lambda *args, **kwargs: autotune.GemmSelection(CONFIG.as_dict(), [[None, CONFIG.as_dict()]])  # noqa: E731
    monkeypatch.setattr(gemm_lowering, "select_gemm", pick)
    NotBuilt.sources = []


def compiled_graphs(model, x, train=False, **options):
    """The graphs of one call (stopped before their first run: the kernels cannot run here)."""
    graphs = []

    def stop(graph):
        graphs.append(graph)
        raise StopCompile
    with collect_compiled(stop), pytest.raises(StopCompile):
        with torch.set_grad_enabled(train):
            miniinductor.compile(model, cpu_backend="triton", max_autotune=True, max_autotune_gemm_backends="CUTLASS",
                                 **options)(x)
    return graphs


class StopCompile(BaseException):
    """Ends a compile once its graph is collected (a BaseException: Dynamo wraps Exceptions)."""


def cuda_source(kernel_source: str) -> str:
    return re.search(r'CUDA_SOURCE = r"""(.*?)"""', kernel_source, re.S).group(1)


def test_source_of_one_configuration():
    source = gemm_source(torch.bfloat16, "RowMajor", "ColumnMajor", CONFIG,
                         bare_epilogue("buf0", torch.bfloat16, 256, 512))
    for text in ("using TileShape = Shape<_128, _256, _64>;", "using ClusterShape = Shape<_2, _1, _1>;",
                 "cutlass::gemm::KernelTmaWarpSpecializedCooperative", "cutlass::epilogue::TmaWarpSpecializedCooperative",
                 "cutlass::bfloat16_t, cutlass::layout::RowMajor, 8,", "cutlass::bfloat16_t, cutlass::layout::ColumnMajor, 8,",
                 "Sm90AccFetch", "StageCountAutoCarveout", 'extern "C" int mi_cutlass_run('):
        assert text in source, text
    # A row-major (rows stride dynamic), B column-major read as (N, K): K contiguous
    assert "dA = cute::make_stride(ints[4], cute::Int<1>{}, ints[6]);" in source
    assert "dB = cute::make_stride(ints[8], cute::Int<1>{}, ints[9]);" in source
    assert "void, cutlass::layout::RowMajor" in source   # no source tensor C


def test_linear_gelu_fuses_into_cutlass_kernels(forced_cutlass):
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64)).to(torch.bfloat16).eval()
    (graph,) = compiled_graphs(model, torch.randn(32, 64, dtype=torch.bfloat16))
    assert sorted(graph.kernels) == ["cutlass_fused_add_gelu_mm_0", "cutlass_fused_addmm_1"], sorted(graph.kernels)
    first = cuda_source(graph.kernels["cutlass_fused_add_gelu_mm_0"].source)
    assert "erff(" in first and "Sm90RowBroadcast<0, TileShape, cutlass::bfloat16_t" in first   # GELU, the bias
    assert "Sm90AuxStore" not in first   # inference: only the GELU's result is stored
    assert "float(cutlass::bfloat16_t(in0[i]))" in first   # the product rounded as eager's mm rounds it
    assert "aten.mm" not in graph.wrapper_source and "aten.addmm" not in graph.wrapper_source
    assert len(NotBuilt.sources) == 2   # each library starts compiling as the wrapper imports its module


def test_training_stores_what_the_backward_reads(forced_cutlass):
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64)).to(torch.bfloat16)
    forward = compiled_graphs(model, torch.randn(32, 64, dtype=torch.bfloat16), train=True)[0]
    source = cuda_source(next(k.source for n, k in forward.kernels.items() if "erf" in n))
    assert source.count("Sm90AuxStore<0, void, cutlass::bfloat16_t") == 1   # the biased product, kept for GELU's gradient


def test_an_epilogue_with_no_evt_form_stays_out(forced_cutlass):
    class Transposed(nn.Module):
        def forward(self, x, w):
            y = x @ w
            return y + y.t()   # reads the product at the transposed index
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    graphs = []

    def stop(graph):
        graphs.append(graph)
        raise StopCompile
    saved, torch.backends.cuda.matmul.allow_tf32 = torch.backends.cuda.matmul.allow_tf32, True   # (float32: TF32)
    try:
        with collect_compiled(stop), pytest.raises(StopCompile):
            miniinductor.compile(Transposed(), cpu_backend="triton", max_autotune=True,
                                 max_autotune_gemm_backends="CUTLASS")(x, w)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    refused = [d for d in graphs[0].scheduler.decisions if not d.fused and "a CUTLASS epilogue" in d.reason]
    assert refused and "reads the product at c0 + 64*c1, not its own element" in refused[0].reason, [str(d) for d in graphs[0].scheduler.decisions]
    assert [n for n in graphs[0].kernels if n.startswith("cutlass")] != []


def test_float32_without_tf32_and_cutlass_alone_is_an_error_saying_why(monkeypatch):
    monkeypatch.setattr(build, "missing", lambda device=None: None)     # CUTLASS there, as on a GPU machine
    monkeypatch.setattr(choices, "missing", lambda device=None: None)
    model = nn.Linear(64, 64)
    with pytest.raises(Exception, match="float32 matmul with TF32 off .*allow_tf32"):
        with torch.no_grad():
            miniinductor.compile(model, cpu_backend="triton", max_autotune=True,
                                 max_autotune_gemm_backends="CUTLASS")(torch.randn(8, 64))


def test_a_misaligned_tensor_is_an_error_not_a_fault():
    library = build.CutlassLibrary.__new__(build.CutlassLibrary)   # (never built: the check comes first)
    with pytest.raises(build.CutlassError, match="not 16-byte aligned .*0x1008"):
        library.run([0x1000, 0x1008], [1, 1, 1, 1], 0)


def test_an_input_at_an_odd_offset_is_copied_before_the_kernel_reads_it(forced_cutlass):
    view = torch.randn(40, dtype=torch.bfloat16)[3:35]   # starts 6 bytes into its storage
    copy = build.aligned(view)
    assert copy.data_ptr() % 16 == 0 and torch.equal(copy, view) and build.aligned(copy) is copy
    model = nn.Sequential(nn.Linear(64, 128)).to(torch.bfloat16).eval()
    (graph,) = compiled_graphs(model, torch.randn(32, 64, dtype=torch.bfloat16))
    source = next(iter(graph.kernels.values())).source
    assert all(f"{p} = aligned({p})" in source for p in ("in_ptr0", "in_ptr1", "in_ptr2")), source[-600:]


@pytest.mark.skipif(build.include_dir() is None or build.nvcc() is None, reason="needs nvidia-cutlass and nvcc")
def test_nvcc_compiles_the_fused_kernel(forced_cutlass, tmp_path):
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU()).to(torch.bfloat16)
    forward = compiled_graphs(model, torch.randn(32, 64, dtype=torch.bfloat16), train=True)[0]
    (path := tmp_path / "kernel.cu").write_text(cuda_source(next(iter(forward.kernels.values())).source))
    flags = [f for f in build.NVCC_FLAGS if f != "-shared"]
    done = subprocess.run([build.nvcc(), *flags, f"-I{build.include_dir()}", "-c", str(path), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


needs_sm90 = pytest.mark.skipif(not torch.cuda.is_available() or build.missing(torch.device("cuda")) is not None,
                                reason="needs a GPU of compute capability 9.0, nvcc and nvidia-cutlass")


@needs_sm90
def test_cutlass_alone_matches_eager_on_the_gpu():
    """(Inference: each layout of the operands is another set of nvcc builds, a minute each.)"""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).cuda().to(torch.bfloat16).eval()
    x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    with collect_compiled() as graphs, torch.no_grad():
        out = miniinductor.compile(model, max_autotune=True, max_autotune_gemm_backends="CUTLASS")(x)
        expected = model(x)
    # bfloat16 keeps 8 bits: a few units of its last place, of the output's scale
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2 * expected.abs().max().item())
    names = [n for g in graphs for n in g.kernels]
    assert names == ["cutlass_fused_add_gelu_mm_0", "cutlass_fused_addmm_1"], names
    assert not any("aten.mm" in g.wrapper_source or "aten.addmm" in g.wrapper_source for g in graphs)
