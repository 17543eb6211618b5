"""Data-parallel training under torch.compile(backend="miniinductor"): DDP and FSDP2.

Processes on the CPU (gloo, loopback) train a 3-Block MLP for 3 SGD steps, eager and
compiled, through `benchmarks/ddp_gpu.py` (the GPU benchmark, run with `--device cpu`);
each run is its own subprocess, so a crash or a hang fails one test only. Every rank's
losses and the final full parameters must equal eager DDP's / eager FSDP2's within 1e-4
(relative for the losses of ~400, absolute for parameters of ~0.05: reordered float32 sums
differ by ~1e-7 relative, measured 1.1e-8 on the parameters; eager's updates move them by
~0.04, which the test checks, so a wrong or missing gradient average cannot pass).

DDP: Dynamo's DDPOptimizer splits the forward at DDP's 1 MB buckets (Blocks of 384x384
float32 weights, 0.6 MB each: 2 pieces for 3 Blocks) and, while compiling, has each
compiled piece's first call answered with fake tensors, to get the next piece's example
inputs (capture/aot.py). FSDP2 (`fully_shard`) works on gloo and the CPU in torch 2.13;
Dynamo leaves its hooks out of the graph, so each Block's forward is compiled between them.

Quick suite: DDP in one process (DDPOptimizer splits the same way) and a compiled graph
called under a FakeTensorMode (compile_fx.runtime_call). Sweep: DDP and FSDP2
with two processes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import USING_MINIINDUCTOR, assert_same_values, seed_for
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-4
requires_miniinductor = pytest.mark.skipif(
    not USING_MINIINDUCTOR, reason="compiles with miniinductor itself, not the backend under test")


def run_python(args: list[str], timeout=300, **env_vars) -> subprocess.CompletedProcess:
    """`python *args` in a fresh process that imports this worktree's miniinductor."""
    env = {**os.environ, **env_vars}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "core")] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_benchmark(strategy: str, nproc: int, seed: int, tmp: Path) -> dict:
    out = tmp / "result.json"
    proc = run_python([str(ROOT / "benchmarks" / "ddp_gpu.py"), "--device", "cpu",
                       "--backend", "gloo", "--nproc", str(nproc), "--strategies", strategy,
                       "--modes", "eager,miniinductor", "--dim", "384", "--layers", "3",
                       "--batch", "16", "--bucket-cap-mb", "1", "--steps", "3", "--warmup", "0",
                       "--iters", "0", "--tol", str(TOL), "--seed", str(seed), "--json", str(out)])
    assert out.exists(), f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(out.read_text())


def check_training(result: dict, strategy: str, nproc: int):
    rows = {(r["mode"], r["rank"]): r for r in result["rows"]}
    assert set(rows) == {(m, r) for m in ("eager", "miniinductor") for r in range(nproc)}
    for row in rows.values():
        assert row["status"] == "PASS", row
        assert row["max_loss_err"] <= TOL and row["max_param_err"] <= TOL, row
        assert row["update"] > 100 * TOL, row   # the check could have failed
    compiled = rows["miniinductor", 0]
    if nproc > 1:   # the ranks saw different batches
        assert compiled["losses"] != rows["miniinductor", 1]["losses"]
    if strategy == "ddp":
        assert compiled["graphs"] >= 2, "DDPOptimizer did not split the graph"
    else:
        assert compiled["graphs"] >= 1, "nothing was compiled"


@requires_miniinductor
def test_ddp_one_process(request, tmp_path):
    """DDP in one process (gloo): DDPOptimizer splits and fakes the first call as with two.
    The quick suite's check of the DDPOptimizer protocol (capture/aot.py)."""
    result = run_benchmark("ddp", 1, seed_for(request.node.nodeid) % 10_000, tmp_path)
    check_training(result, "ddp", 1)


@pytest.mark.sweep
@requires_miniinductor
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_data_parallel_training(strategy, request, tmp_path):
    result = run_benchmark(strategy, 2, seed_for(request.node.nodeid) % 10_000, tmp_path)
    check_training(result, strategy, 2)


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):   # a tuple, as Dynamo's graphs return
        return ((torch.nn.functional.gelu(self.a(x)) + 1).softmax(-1) @ self.b.weight.T + self.b.bias,)


@requires_miniinductor
def test_compiled_graph_under_fake_mode():
    """A caller that propagates shapes calls a compiled graph on fake tensors, under a
    FakeTensorMode: the ATen graph must run instead of our kernels, and the real calls
    afterwards must still compute eager's values and gradients. In a subprocess: our
    kernels handed fake tensors' pointers crash the process (segfault)."""
    proc = run_python(["-c", "from test_distributed import fake_mode_check as f; "
                             "f(False, 1); f(True, 2); print('ok')"])
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), \
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


def fake_mode_check(grad: bool, seed: int):
    import miniinductor
    torch.manual_seed(seed)
    model = TwoLayers().requires_grad_(grad)
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 8)
    with torch.set_grad_enabled(grad):
        compiled = miniinductor.backend(gm, [x])
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:   # the parameters stay real
            fake_out, = compiled(mode.from_tensor(x))
        expected, = model(x)
        assert isinstance(fake_out, FakeTensor)
        assert (fake_out.shape, fake_out.stride(), fake_out.dtype) == \
            (expected.shape, expected.stride(), expected.dtype)
        out, = compiled(x)
        assert not isinstance(out, FakeTensor)
        assert_same_values(out, expected)
    if grad:
        out.sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x)[0].sum().backward()
        for g, p in zip(got, model.parameters()):
            assert_same_values(g, p.grad, what="gradient")
