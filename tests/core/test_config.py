"""Options, modes and presets (config.py): each option reaches the compiled graph's Config
by both routes (`torch.compile(..., options=)` and `miniinductor.compile`), bad names and
values are rejected with the valid ones named, the documented precedence holds, and
`list_options()` / `list_mode_options()` show every field and mode.
"""
from __future__ import annotations

import shutil

import pytest
import torch
import torch.nn as nn
from conftest import DEFAULT_TOLERANCES

import miniinductor
import miniinductor.config as config_module
from miniinductor.compile_fx import collect_compiled
from miniinductor.config import MODES, PRESETS, Config, list_mode_options, list_options
from miniinductor.ext.gemm import options as gemm_options
from miniinductor.ext.gemm.cutlass import build as cutlass_build

BF16_TOL = dict(zip(("rtol", "atol"), DEFAULT_TOLERANCES[torch.bfloat16]))


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):                     # [N, 8] -> [N, 8]
        return torch.relu(self.lin(x)) * 2 + 1


def non_default_options(tmp_path) -> dict:
    """A value other than the default for every field."""
    values = {
        "cpu_backend": "triton",
        "cxx": shutil.which("g++") or shutil.which("c++"),
        "cudagraphs": True,
        "max_autotune": True,
        "max_autotune_gemm_backends": "ATEN",
        "coordinate_descent_tuning": True,
        "gemm_fp32_precision": "tf32x3",
        "trace": str(tmp_path / "trace"),
        "pass_snapshots": True,
        "fallback_all": True,
        "fallback_ops": ("aten.mul.Tensor",),
        "fusion": False,
        "mix_order_reduction": False,
        "mix_order_min_numel": 0,
        "combo_kernels": False,
        "max_fusion_size": 2,
        "realize_reads_threshold": 1,
        "realize_opcount_threshold": 1,
        "layout_optimization": False,
        "winograd": False,
        "parallel_min_numel": 1,
        "onednn_linear": False,
        "freezing": True,
        "autocast_enabled": True,
        "autocast_dtype": "float16",
        "enable_persistent_tma_matmul": True,
        "cpp_wrapper": True,
        "fx_graph_cache": True,   # off by default in the tests (conftest.py), on for users
        "extensions": ("gemm", "cpu_conv", "layout", "mix_order", "combo", "cpp_wrapper", "cudagraphs", "freezing"),
    }
    assert set(values) == set(config_module.OPTIONS), "a new option needs a value here"
    defaults = Config()
    assert all(values[k] != getattr(defaults, k) for k in values)
    return values


def compiled_config(compiled, x) -> Config:
    """Run once under no_grad and return the Config the (only) compiled graph was built with."""
    torch._dynamo.reset()
    with torch.no_grad(), collect_compiled() as graphs:
        out = compiled(x)
    assert len(graphs) == 1
    return graphs[0].graph.config, out


@pytest.mark.parametrize("route", ["torch.compile", "miniinductor.compile"])
def test_every_option_reaches_the_compiled_graph(route, tmp_path):
    pytest.importorskip("triton")
    options = non_default_options(tmp_path)
    model, x = Tiny().eval(), torch.randn(4, 8)
    if route == "torch.compile":
        compiled = torch.compile(model, backend="miniinductor", options=options)
    else:
        compiled = miniinductor.compile(model, **options)
    config, out = compiled_config(compiled, x)
    assert config.as_dict() == options
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
        expected = model(x)
    assert out.dtype == expected.dtype == torch.float16
    torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-3)   # fp16: ~one ulp (2**-10)
    assert any((tmp_path / "trace").iterdir()), "the trace option wrote nothing"


@pytest.mark.parametrize("name", list(config_module.OPTIONS))
def test_each_option_alone_reaches_the_compiled_graph(name, tmp_path):
    value = non_default_options(tmp_path)[name]
    if name == "cpu_backend":
        pytest.importorskip("triton")
    model, x = Tiny().eval(), torch.randn(4, 8)
    config, out = compiled_config(miniinductor.compile(model, **{name: value}), x)
    assert config == Config().replace(**{name: value})
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "autocast_enabled"):
        expected = model(x)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, **(BF16_TOL if name == "autocast_enabled" else {}))


def test_presets_reach_the_compiled_graph():
    model, x = Tiny().eval(), torch.randn(4, 8)
    config, _ = compiled_config(torch.compile(model, backend="miniinductor", options={"preset": "no_fusion"}), x)
    assert config.fusion is False
    config, _ = compiled_config(miniinductor.compile(model, preset="freezing"), x)
    assert config.freezing is True
    for name, settings in PRESETS.items():
        assert {k: getattr(Config.build(preset=name), k) for k in settings} == settings


def test_graphnet_presets_reach_the_compiled_graph():
    for name in ("triton", "cpp_wrapper", "cutlass", "aten", "cudagraphs", "max_autotune", "freezing", "tma"):
        assert name in PRESETS
    config, _ = compiled_config(miniinductor.compile(Tiny(), preset="tma"), torch.randn(2, 8))
    assert config.enable_persistent_tma_matmul is True and config.max_autotune is True


# ------------------------------------------------------------------ Inductor's names, GraphNet's dict
def test_inductor_spellings_name_our_fields():
    config = Config.build(options={"triton.enable_persistent_tma_matmul": True, "triton.cudagraphs": True,
                                   "cpp_wrapper": True, "max_autotune_gemm_backends": "TRITON",
                                   "coordinate_descent_tuning": True})
    assert (config.enable_persistent_tma_matmul, config.cudagraphs, config.cpp_wrapper) == (True, True, True)
    assert (config.max_autotune_gemm_backends, config.coordinate_descent_tuning) == ("TRITON", True)
    rows = {line.split()[0] for line in list_options().splitlines()[1:]}
    assert {"triton.enable_persistent_tma_matmul", "enable_persistent_tma_matmul",
            "triton.cudagraphs", "cudagraphs", "template", "inductor_config"} <= rows
    with pytest.raises(ValueError, match="did you mean triton.enable_persistent_tma_matmul"):
        Config.build(options={"triton.enable_persistent_tma_matmu": True})


GRAPHNET = {"template": "freezing", "mode": "max-autotune-no-cudagraphs", "freezing": False,
            "inductor_config": {"triton.cudagraphs": True, "coordinate_descent_tuning": True}}


@pytest.mark.parametrize("route", ["torch.compile", "miniinductor.compile"])
def test_graphnet_config_dict(route):
    model, x = Tiny().eval(), torch.randn(4, 8)
    if route == "torch.compile":   # torch.compile refuses mode= beside options=: the dict carries it
        compiled = torch.compile(model, backend="miniinductor", options=dict(GRAPHNET))
    else:
        compiled = miniinductor.compile(model, **GRAPHNET)
    config, out = compiled_config(compiled, x)
    assert config.freezing is False            # freezing over the template
    assert config.max_autotune is True          # from mode
    assert config.cudagraphs is True and config.coordinate_descent_tuning is True   # inductor_config
    with torch.no_grad():
        torch.testing.assert_close(out, model(x))


def test_graphnet_precedence():
    assert Config.build(options={"template": "freezing"}).freezing is True
    assert Config.build(options={"template": "freezing", "freezing": False}).freezing is False
    config = Config.build(options={"template": "freezing", "inductor_config": {"freezing": False}},
                          flags={"freezing": True})
    assert config.freezing is False                                   # inductor_config over freezing
    config = Config.build("reduce-overhead", options={"inductor_config": {"triton.cudagraphs": False}})
    assert config.cudagraphs is False                                 # ... and over the mode
    with pytest.raises(ValueError, match="preset is given twice"):
        Config.build(preset="tma", options={"template": "cutlass"})


@pytest.mark.parametrize("preset, backend, expected", [
    ("tma", "cpp", "enable_persistent_tma_matmul ignored: the C++ backend has no GEMM templates"),
    ("cutlass", "triton", "no CUTLASS choices (using ATEN,TRITON): the nvidia-cutlass package and nvcc not found: "
                          "`pip install nvidia-cutlass`"),
])
def test_unavailable_hardware_features_are_accepted_with_one_line(preset, backend, expected, caplog, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # as on a CPU-only machine
    monkeypatch.setattr(cutlass_build, "include_dir", lambda: None)   # neither CUTLASS's headers ...
    monkeypatch.setattr(cutlass_build, "nvcc", lambda: None)          # ... nor nvcc
    model, x = Tiny().eval(), torch.randn(4, 8)
    with caplog.at_level("INFO", logger="miniinductor"):
        compiled = miniinductor.compile(model, preset=preset, cpu_backend=backend)
        _, out = compiled_config(compiled, x)   # (the compile, where lowering says its part, runs here)
    assert [r.getMessage() for r in caplog.records if expected in r.getMessage()] != []
    assert len([r for r in caplog.records if any(w in r.getMessage() for w in ("ignored", "CUTLASS"))]) == 1
    with torch.no_grad():
        torch.testing.assert_close(out, model(x))


def test_cutlass_alone_without_cutlass_is_an_error_naming_the_fix(monkeypatch):
    monkeypatch.setattr(cutlass_build, "nvcc", lambda: None)
    config = Config.build(options={"max_autotune_gemm_backends": "cutlass"})
    with pytest.raises(RuntimeError, match="no CUTLASS kernel can be built here: .*nvcc not found.*CUDA toolkit.*"
                                           "or list other backends too"):
        gemm_options.gemm_backends(config)
    assert gemm_options.gemm_backends(Config.build(preset="cutlass")) == ("ATEN", "TRITON")
    with pytest.raises(RuntimeError, match="max_autotune_gemm_backends='CUTLASS'"):   # at compile time too
        miniinductor.compile(Tiny(), max_autotune=True, max_autotune_gemm_backends="CUTLASS")(torch.randn(4, 8))


# ------------------------------------------------------------------ errors
def test_unknown_option_lists_close_matches():
    with pytest.raises(ValueError, match="did you mean freezing") as info:
        miniinductor.compile(Tiny(), freezng=True)
    assert "Valid options:" in str(info.value) and "autocast_dtype" in str(info.value)
    with pytest.raises(ValueError, match="did you mean autocast_enabled"):
        Config.build(options={"autocast_enable": True})
    # through torch.compile the backend raises when it compiles (Dynamo wraps the error)
    compiled = torch.compile(Tiny(), backend="miniinductor", options={"fusoin": False})
    with pytest.raises(Exception, match="did you mean fusion"):
        compiled(torch.randn(2, 8))


@pytest.mark.parametrize("kwargs, valid", [
    ({"mode": "fast"}, list(MODES)),
    ({"preset": "freeze"}, list(PRESETS)),
    ({"cpu_backend": "cuda"}, ["'cpp'", "'triton'"]),
    ({"autocast_dtype": "float32"}, ["'bfloat16'", "'float16'"]),
    ({"autocast_dtype": "bf16"}, ["'bfloat16'", "'float16'"]),
])
def test_bad_values_name_the_valid_ones(kwargs, valid):
    with pytest.raises(ValueError) as info:
        miniinductor.compile(Tiny(), **kwargs)
    message = str(info.value)
    assert repr(next(iter(kwargs.values()))) in message
    assert all(v in message for v in valid), message


BAD_VALUES = [   # (option, value, what the message says is allowed)
    ("max_fusion_size", "big", "an int >= 1"),
    ("max_fusion_size", -3, "an int >= 1"),
    ("max_fusion_size", 0, "an int >= 1"),
    ("max_fusion_size", 2.5, "an int >= 1"),
    ("fusion", "no", "True or False"),
]


@pytest.mark.parametrize("name, value, allowed", BAD_VALUES)
def test_bad_value_fails_inside_compile(name, value, allowed):
    calls = []

    def f(x):
        calls.append(1)
        return x + 1

    with pytest.raises(ValueError) as info:
        miniinductor.compile(f, **{name: value})
    assert str(info.value) == f"option {name}={value!r}: expected {allowed}"
    assert calls == []   # before any call of the compiled function


@pytest.mark.parametrize("name, value, allowed", BAD_VALUES)
def test_bad_value_fails_at_torch_compiles_first_call(name, value, allowed):
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x + 1, backend="miniinductor", options={name: value})
    with pytest.raises(Exception) as info:   # Dynamo wraps it: BackendCompilerFailed
        compiled(torch.randn(3))
    assert f"option {name}={value!r}: expected {allowed}" in str(info.value)


@pytest.mark.parametrize("options, message", [
    ({"fusion": 1}, "option fusion=1: expected True or False"),
    ({"freezing": "true"}, "option freezing='true': expected True or False"),
    ({"parallel_min_numel": True}, "option parallel_min_numel=True: expected an int >= 0"),
    ({"realize_reads_threshold": -1}, "option realize_reads_threshold=-1: expected an int >= 0"),
    ({"trace": 3}, "option trace=3: expected a str or None"),
    ({"cxx": None}, "option cxx=None: expected a str"),
    ({"fallback_ops": [1]}, "option fallback_ops=(1,): expected a tuple of str"),
    ({"max_autotune_gemm_backends": 5}, "option max_autotune_gemm_backends=5: expected a str"),
    ({"gemm_fp32_precision": "tf32"}, "option gemm_fp32_precision='tf32': expected one of 'ieee', 'tf32x3'"),
])
def test_every_kind_of_field_is_checked(options, message):
    with pytest.raises(ValueError) as info:
        Config.build(options=options)
    assert str(info.value) == message
    with pytest.raises(ValueError, match="option"):   # a Config made directly is checked too
        Config(**options)


def test_checks_come_from_the_annotations():
    options = config_module.OPTIONS.values()
    assert all(o.minimum is not None for o in options if o.kind is int)   # every int option has a least value
    assert all(o.kind in (str, tuple) for o in options if o.choices is not None)
    config = Config.build(options={"max_fusion_size": 1, "mix_order_min_numel": 0, "trace": None,
                                   "fallback_ops": ["aten.add.Tensor", torch.ops.aten.mul.Tensor]})
    assert config.max_fusion_size == 1 and config.fallback_ops == ("aten.add.Tensor", "aten.mul.Tensor")


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_builds(preset):
    assert isinstance(Config.build(preset=preset), Config)


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_builds(mode):
    assert isinstance(Config.build(mode), Config)


def test_bad_preset_suggests_the_close_one():
    with pytest.raises(ValueError, match="did you mean 'freezing'"):
        Config.build(preset="freezng")


def test_autocast_dtype_accepts_a_torch_dtype():
    assert Config.build(options={"autocast_dtype": torch.float16}).autocast_dtype == "float16"


# ------------------------------------------------------------------ precedence
def test_explicit_options_win_over_mode():
    config, _ = compiled_config(miniinductor.compile(Tiny(), mode="reduce-overhead", cudagraphs=False),
                                torch.randn(2, 8))
    assert config.cudagraphs is False
    assert Config.build("reduce-overhead").cudagraphs is True


def test_top_level_flags_win_over_preset_and_lose_to_options():
    config, _ = compiled_config(miniinductor.compile(Tiny(), preset="freezing", freezing=False),
                                torch.randn(2, 8))
    assert config.freezing is False
    assert Config.build(preset="freezing", flags={"freezing": None}).freezing is True   # None: not given
    assert Config.build(flags={"freezing": True}, options={"freezing": False}).freezing is False
    assert Config.build(flags={"autocast_dtype": "float16"}, options={"autocast_dtype": "bfloat16"}
                        ).autocast_dtype == "bfloat16"
    # torch.compile has no such flags: there options={"preset": ..., name: ...} sets both
    config, _ = compiled_config(torch.compile(Tiny(), backend="miniinductor",
                                              options={"preset": "freezing", "freezing": False}),
                                torch.randn(2, 8))
    assert config.freezing is False


def test_mode_wins_over_preset(monkeypatch):
    # no shipped preset and mode disagree on a field, so make a preset that does
    monkeypatch.setitem(PRESETS, "no_cudagraphs", {"cudagraphs": False, "fusion": False})
    config = Config.build("reduce-overhead", preset="no_cudagraphs")
    assert config.cudagraphs is True and config.fusion is False


def test_precedence_is_documented_in_the_order_applied():
    doc = config_module.__doc__
    assert doc.index("explicit options") < doc.index("top-level flags") < doc.index("a named preset")
    assert "freezing=" in doc and "autocast_enabled=" in doc


# ------------------------------------------------------------------ listings
def test_list_options_shows_every_field_with_default_and_help():
    table = list_options()
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    for name, (default, help_text) in Config.field_help().items():
        assert help_text, f"Config.{name} has no one-line docstring"
        assert name in rows and repr(default) in rows[name] and help_text in rows[name], name
    assert "may not be seen" in rows["freezing"]   # freezing's caveat is in its help


def test_list_mode_options():
    assert list_mode_options() == MODES
    assert list_mode_options("reduce-overhead") == {"cudagraphs": True}
    assert list_mode_options("max-autotune") == {"max_autotune": True, "cudagraphs": True}
    with pytest.raises(ValueError, match="max-autotune-no-cudagraphs"):
        list_mode_options("max_autotune")
