"""`python -m miniinductor fallbacks` (tools/fallbacks.py) and `explain(...).fallbacks`
(tools/debug/census.py), in-process through `main(argv)`: a zoo model's census in training
(forward and backward graphs) and inference, an op with no lowering counted with its
reason, and the comparison with Inductor's tables."""
from __future__ import annotations

import torch
from conftest import requires_miniinductor

import miniinductor
from miniinductor.tools.cli import main

pytestmark = requires_miniinductor


def run(capsys, *argv, stream="out"):
    code = main(["fallbacks", *argv])
    return code, getattr(capsys.readouterr(), stream)


def test_zoo_resnet_training_has_no_fallbacks_and_lists_its_externs(capsys):
    code, out = run(capsys, "resnet", "--train")
    assert code == 0
    assert "resnet (training), 2 graph(s)" in out
    assert "graph forward: 0 fallbacks" in out and "graph backward: 0 fallbacks" in out
    assert "aten.convolution.default" in out and "aten.convolution_backward.default" in out
    assert "total: 0 fallback call(s) of 0 op(s)" in out


def test_eval_census_has_the_forward_graph_only(capsys):
    code, out = run(capsys, "resnet", "--eval")
    assert code == 0 and "(inference), 1 graph(s)" in out and "backward" not in out


def test_explain_fallbacks_merged_with_reasons():
    x = torch.randn(4, 8)

    def fn(x):
        return torch.nn.functional.relu6(x).sin() + torch.special.erfcx(x).cos()   # erfcx: no lowering
    result = miniinductor.explain(fn, x, extensions=[])
    torch.testing.assert_close(result.outputs, fn(x))
    fallbacks = result.fallbacks
    assert set(fallbacks) == {"aten.hardtanh.default", "aten.special_erfcx.default"}
    assert fallbacks["aten.hardtanh.default"].count == 1
    assert dict(fallbacks["aten.special_erfcx.default"].reasons) == {"no lowering": 1}
    assert result.externs == {}


def test_compare_inductor_prints_counts_and_missing_ops(capsys):
    code, out = run(capsys, "--compare-inductor")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("  Inductor: ") and lines[2].startswith("  ours: ")
    assert "aten ops Inductor lowers or decomposes that we do neither to" in out
    missing = [line.split(":")[0].strip() for line in lines if line.startswith("  aten.")]
    assert "aten.special_erfcx" in missing        # not lowered by us, decomposed by Inductor
    assert "aten.hardtanh" not in missing and "aten.native_group_norm" not in missing   # ext/more_ops


def test_unknown_model_is_one_line_and_exit_2(capsys):
    code, err = run(capsys, "no_such_model", stream="err")
    assert code == 2 and "unknown model 'no_such_model'" in err and len(err.splitlines()) == 1
