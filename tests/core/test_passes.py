"""The pass registry (passes.py): the pipeline's order, extensions on and off, and the records
each compile keeps of what every pass did."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch

import miniinductor
from miniinductor import passes
from miniinductor.codegen.policy import policy_for
from miniinductor.compile_fx import collect_compiled
from miniinductor.config import EXTENSIONS, Config

#: the default pipeline, stage by stage (a change here is a change of behaviour: say why)
DEFAULT_ORDER = {
    "aten_graph": ["note_unused_tma", "unfuse_addmm", "addmm_activation", "prefetch_gemm_templates",
                   "onednn_linear", "fold_conv_affine", "relu_after_max_pool", "winograd_convolutions",
                   "peel_conv_bias", "decide_layout_opt"],
    "lowering": ["lower"],
    "loop_ir": ["split_reductions"],
    "schedule": ["build_scheduler", "dead_code_elimination", "fuse", "fuse_mix_order", "combine_kernels", "order"],
    "tune": ["benchmark_epilogue_fusion"],
    "codegen": ["generate_kernels"],
    "wrapper": ["generate_cpp_wrapper", "generate_wrapper"],
    "load": ["load_wrapper", "precompile_kernels"],
    "runtime": ["cudagraphs", "runtime_call"],
}


def context(device="cpu", **options) -> passes.Context:
    config = Config.from_options(options)
    return passes.Context(config, policy_for(torch.device(device), config), torch.device(device))


def test_every_stage_runs_its_passes_in_the_documented_order():
    for stage, names in DEFAULT_ORDER.items():
        assert [p.name for p in passes.PASSES if p.stage == stage] == names, stage


def test_with_extensions_off_only_the_core_and_the_backend_run():
    for device in ("cpu", "cuda"):
        ran = {p.name: p.extension for p in passes.PASSES if p.runs(context(device, extensions=()))}
        assert set(ran.values()) <= set(config_built_in()), ran
        assert {"lower", "fuse", "generate_kernels", "generate_wrapper", "runtime_call"} <= set(ran)
    on = {p.name for p in passes.PASSES if p.runs(context("cpu"))}
    assert {"onednn_linear", "winograd_convolutions", "combine_kernels", "decide_layout_opt"} <= on


def config_built_in():
    from miniinductor.config import BUILT_IN
    return BUILT_IN


def test_policy_patches_apply_only_for_extensions_that_are_on():
    core_cpp, fast_cpp = context(extensions=()).policy, context().policy
    assert not core_cpp.explicit_vectors and core_cpp.welford_min is None and core_cpp.vector_matrix_max == 0
    assert fast_cpp.explicit_vectors and fast_cpp.welford_min and fast_cpp.vector_matrix_max
    core_gpu, gpu = context("cuda", extensions=()).policy, context("cuda").policy
    assert not (core_gpu.gemm_templates or core_gpu.mix_order_reduction or core_gpu.channels_last_conv)
    assert gpu.gemm_templates and gpu.mix_order_reduction and gpu.channels_last_conv


def test_an_unknown_extension_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid extensions are .*gemm"):
        Config.from_options({"extensions": ["gemmm"]})
    assert Config.build(preset="core").extensions == ()


def test_each_compile_records_what_every_pass_did():
    def fn(x, w):                                      # [8, 16] @ [16, 4] -> [8]
        return torch.relu(x @ w).sum(1)
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    for options, off in (({}, set()), ({"extensions": []}, set(EXTENSIONS))):
        torch._dynamo.reset()
        with collect_compiled() as graphs:
            out = miniinductor.compile(fn, **options)(x, w)
        torch.testing.assert_close(out, fn(x, w))
        records = graphs[0].passes
        assert [r.name for r in records][:1] == [next(p.name for p in passes.PASSES if p.stage == "aten_graph")]
        lower = next(r for r in records if r.name == "lower")
        assert lower.ran and "buffers" in lower.change
        assert all(not r.ran for r in records if r.extension in off)


def test_a_registered_pass_runs_and_its_change_is_recorded(monkeypatch):
    seen = []

    def count_nodes(gm, ctx):
        seen.append(len(gm.graph.nodes))
        ctx.note(f"saw {seen[-1]} nodes")
    mine = passes.Pass("aten_graph", "count_nodes", count_nodes, "core", doc="a test's pass")
    monkeypatch.setattr(passes, "PASSES", [mine, *passes.PASSES])
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        miniinductor.compile(lambda x: x.sin() + 1)(torch.randn(5))
    assert seen and graphs[0].passes[0] == passes.PassRecord("aten_graph", "count_nodes", "core", True,
                                                               f"saw {seen[0]} nodes")


def test_the_passes_command_lists_every_pass_and_says_which_run():
    out = subprocess.run([sys.executable, "-m", "miniinductor", "passes", "--options", '{"extensions": []}'],
                         capture_output=True, text=True, check=True).stdout
    rows = {line.split()[1]: line.split()[3] for line in out.splitlines()[1:len(passes.PASSES) + 1]}
    assert set(rows) == {p.name for p in passes.PASSES}
    assert rows["winograd_convolutions"] == "no" and rows["lower"] == "yes" and rows["fuse"] == "yes"
    bad = subprocess.run([sys.executable, "-m", "miniinductor", "passes", "--options", '{"fusion": 3}'],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "fusion" in bad.stderr


def test_records_print_one_line_each():
    record = passes.PassRecord("schedule", "fuse", "core", True, "9 -> 4 groups")
    assert "fuse" in str(record) and "9 -> 4 groups" in str(record)
    assert "off" in str(dataclasses.replace(record, ran=False))
