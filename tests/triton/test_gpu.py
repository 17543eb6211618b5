"""GPU-only checks (run on a lent GPU by benchmarks/gpu_suite.sh; skipped without CUDA):
the model tests and the modes -- reduce-overhead (CUDA graphs) and max-autotune."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import miniinductor
from miniinductor.tools.models import GPT2Block

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TOL = dict(rtol=1e-4, atol=1e-4)  # fp32; reductions may sum in another order than cuBLAS/ATen


def mlp(width=256, depth=6):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers).cuda()


def test_gpt2_block_forward_and_backward_on_gpu():
    torch.manual_seed(0)
    block = GPT2Block(128, 4).cuda()
    x = torch.randn(2, 32, 128, device="cuda", requires_grad=True)
    out = miniinductor.compile(block)(x)
    out.sum().backward()
    grads = [p.grad.clone() for p in block.parameters()] + [x.grad.clone()]
    block.zero_grad()
    x.grad = None
    expected = block(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected, **TOL)
    for got, want in zip(grads, [p.grad for p in block.parameters()] + [x.grad]):
        torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_modes_match_eager(mode):
    model = mlp().eval()
    compiled = miniinductor.compile(model, mode=mode)
    with torch.no_grad():
        for _ in range(3):  # record, then replay with new inputs at new addresses
            x = torch.randn(4, 256, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), **TOL)


def test_cudagraph_outputs_are_not_overwritten_by_a_later_replay():
    model = mlp(depth=2).eval()
    compiled = miniinductor.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        x1, x2 = torch.randn(1, 256, device="cuda"), torch.randn(1, 256, device="cuda")
        first = compiled(x1)
        kept = first.clone()
        second = compiled(x2)
        torch.testing.assert_close(first, kept)           # still the first result
        torch.testing.assert_close(second, model(x2), **TOL)
        assert first.data_ptr() != second.data_ptr()


def test_cudagraph_training_step_matches():
    torch.manual_seed(0)
    model = mlp(width=64, depth=3)
    reference = mlp(width=64, depth=3)
    reference.load_state_dict(model.state_dict())
    compiled = miniinductor.compile(model, mode="reduce-overhead")
    for _ in range(2):
        x = torch.randn(8, 64, device="cuda")
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a.grad, b.grad, **TOL)


def test_cudagraph_input_mutations():
    """Graphs that write into their inputs under CUDA graphs: the first call mutates once
    (its warm-up run is the call), a later call with a tensor at another address gets the
    new value copied back, one at the recorded address is written in place; a compiled Adam
    step and BatchNorm training steps keep eager's parameters, state and running stats."""
    def add_(x, y):
        x.add_(y)
        return x.sum()
    compiled = miniinductor.compile(add_, mode="reduce-overhead")
    same = torch.randn(64, device="cuda")
    for x in (same, torch.randn(64, device="cuda"), same):
        y = torch.randn(64, device="cuda")
        expected_x = x + y
        torch.testing.assert_close(compiled(x, y), expected_x.sum(), **TOL)
        torch.testing.assert_close(x, expected_x)

    torch.manual_seed(0)
    # (no bias before the BatchNorm: its gradient is round-off, which Adam scales up to +-lr)
    models = [nn.Sequential(nn.Linear(16, 32, bias=False), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4)).cuda()
              for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in models]
    run_c = miniinductor.compile(models[1], mode="reduce-overhead")
    step_c = miniinductor.compile(opts[1].step, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(8, 16, device="cuda")
        for run, opt, step in ((models[0], opts[0], opts[0].step), (run_c, opts[1], step_c)):
            opt.zero_grad()
            run(x).square().mean().backward()
            step()
    for (name, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values()):
        torch.testing.assert_close(b, a, **TOL, msg=lambda m: f"{name}: {m}")
    for p_e, p_c in zip(models[0].parameters(), models[1].parameters()):
        for key, value in opts[0].state[p_e].items():
            # (a compiled Adam keeps its step count on the parameter's device, eager on the CPU)
            torch.testing.assert_close(opts[1].state[p_c][key], value, **TOL, check_device=False,
                                       msg=lambda m: f"{key}: {m}")


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_adam_after_an_eager_step_keeps_cpu_step_counts(mode):
    """Adam's step counts made by an eager first step are CPU tensors; the compiled steps after
    it (under CUDA graphs too) must still advance them and the parameters as eager does."""
    torch.manual_seed(0)
    params = [[torch.randn(n, device="cuda", requires_grad=True) for n in (7, 33)] for _ in range(2)]
    with torch.no_grad():
        for a, b in zip(*params):
            b.copy_(a)
    opts = [torch.optim.Adam(p, lr=1e-2) for p in params]
    for step in range(4):
        grads = [torch.randn(n, device="cuda") for n in (7, 33)]
        for k, (ps, opt) in enumerate(zip(params, opts)):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            if k == 1 and step > 0:
                compiled = getattr(opts[1], "_compiled", None) or miniinductor.compile(opts[1].step, mode=mode)
                opts[1]._compiled = compiled
                compiled()
            else:
                opt.step()
    for a, b in zip(*params):
        torch.testing.assert_close(b, a, **TOL)
    for a, b in zip(opts[0].state.values(), opts[1].state.values()):   # (the compiled step may move them)
        torch.testing.assert_close(b["step"], a["step"], check_device=False)


# --------------------------------------------------------------------------- graphs with no tensor inputs
# Their device comes from their nodes (lowering/graph.py graph_device): taken from the inputs,
# it defaulted to the CPU and C++ kernels wrote CUDA memory, a segfault, so each case runs in
# its own process (all started together: each pays for importing torch).
_NO_INPUT_SCRIPT = """
import sys
import torch
sys.path.insert(0, {tests!r})
from conftest import check
from test_layout import NO_INPUT_GRAPHS
name = sys.argv[1]
if name == "mixed_devices":   # a CPU input copied to the GPU: the graph runs eagerly, warned
    check(lambda x: (x * 2).to("cuda") + torch.arange(4, device="cuda"), torch.randn(4))
else:
    check(lambda: NO_INPUT_GRAPHS[name]("cuda"))
print("checked", name)
"""


def _no_input_names():
    import test_layout
    return [*test_layout.NO_INPUT_GRAPHS, "mixed_devices"]


@pytest.fixture(scope="module")
def no_input_runs():
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), str(tests.parent / "core"),
                                                        os.environ.get("PYTHONPATH", "")])}
    script = _NO_INPUT_SCRIPT.format(tests=str(tests))
    procs = {name: subprocess.Popen([sys.executable, "-c", script, name], env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for name in _no_input_names()}
    outputs = {name: p.communicate(timeout=600)[0] for name, p in procs.items()}
    return {name: (procs[name].returncode, outputs[name]) for name in procs}


@pytest.mark.parametrize("name", _no_input_names())
def test_no_input_graph_on_gpu(name, no_input_runs):
    returncode, output = no_input_runs[name]
    assert returncode == 0 and f"checked {name}" in output, f"exit code {returncode}:\n{output[-3000:]}"


# --------------------------------------------------------------------------- the accuracy debugger on CUDA
# Its IR interpreter runs on the graph's device; a constant index or value is a CPU tensor,
# which once crashed every CUDA run ("found at least two devices, cuda:0 and cpu").
def test_debug_accuracy_on_gpu_clean_and_planted():
    from miniinductor.tools.debug import planted_bugs

    def layer_norm_affine(x, w):
        return torch.nn.functional.layer_norm(x, (16,)) * w + 1

    x = torch.randn(8, 16, device="cuda", requires_grad=True)
    w = torch.randn(16, device="cuda", requires_grad=True)
    report = miniinductor.debug_accuracy(layer_norm_affine, x, w)
    assert report.clean, str(report)
    assert [cg.graph.name for cg in report.graphs] == ["forward", "backward"]
    assert all(c.kernel_vs_ir is not None for c in report.checks if not c.in_registers)
    with planted_bugs.wrong_lowering(torch.ops.aten.rsqrt):
        report = miniinductor.debug_accuracy(layer_norm_affine, x, w, levels=("fallback",))
    assert report.culprit is not None and report.kind == "lowering", str(report)
    assert report.culprit.aten.startswith("rsqrt")
    assert abs(report.culprit.vs_eager.max_abs - 1.0) < 1e-5   # the planted +1


def test_conv_bn_relu_inference_runs_channels_last_on_gpu(monkeypatch):
    """An eval conv-BN-ReLU on the GPU, where the timing says channels-last pays (forced here:
    at this size either layout may win): the convolution takes a channels-last input (a tiled
    Triton copy) as Inductor's layout optimisation does; the output keeps eager's NCHW strides.
    cuDNN's float32 convolutions round to TF32 by default, differently per layout: 1e-2."""
    from miniinductor.ext.layout import channels_last
    monkeypatch.setattr(channels_last, "channels_last_pays", lambda convs, value=None: True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()).cuda().eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(4, 16, 20, 24, device="cuda")
    with torch.no_grad():
        explained = miniinductor.explain(model, x)
        (cg,) = explained.graphs
        got, want = miniinductor.compile(model)(x), model(x)
    assert cg.graph.layout_opt
    assert "(7680, 1, 384, 16)" in cg.wrapper_source, cg.wrapper_source   # the conv's input, NHWC
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def test_layout_is_decided_by_timing_the_convolutions():
    """The GPU layout decision times each convolution of the graph in both layouts (ext/layout/
    timing.py): the real timings agree with the decision, and a transposed 3-D convolution
    is one of those timed."""
    from miniinductor.ext.layout import timing
    timing._conv_time.cache_clear()
    model = nn.Sequential(nn.ConvTranspose3d(8, 16, 3, stride=2), nn.ReLU()).cuda().eval()
    x = torch.randn(2, 8, 6, 10, 10, device="cuda")
    with torch.no_grad():
        (cg,) = miniinductor.explain(model, x).graphs
        torch.testing.assert_close(miniinductor.compile(model)(x), model(x), rtol=1e-2, atol=1e-2)
    (nchw, channels_last) = [timing._conv_time((2, 8, 6, 10, 10), (8, 16, 3, 3, 3), True,
                                               ((2, 2, 2), (0, 0, 0), (1, 1, 1), True, (0, 0, 0), 1),
                                               torch.float32, "cuda", channels_last=k) for k in (False, True)]
    assert timing._conv_time.cache_info().hits >= 2   # the decision had timed exactly these
    assert cg.graph.layout_opt == (channels_last < nchw)
