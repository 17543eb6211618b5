"""The `autocast_enabled` option (capture/aot.py): the trace runs under `torch.autocast`,
so the ATen graphs hold autocast's casts and the compiled code matches eager run under
autocast, forward and backward.

Tolerances: bfloat16 results use conftest's bf16 tolerance (two bf16 ulps, rtol 1.6e-2):
the matmuls see the same bf16 operands as eager under autocast, but our fused pointwise
kernels compute in float32 and round once where eager may round between ops.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from conftest import DEFAULT_TOLERANCES, check

import miniinductor
from miniinductor.compile_fx import collect_compiled

BF16_TOL = dict(zip(("rtol", "atol"), DEFAULT_TOLERANCES[torch.bfloat16]))


def compile_once(model, x, **options):
    """Compile and run under no_grad; (compiled callable, its one CompiledGraph)."""
    torch._dynamo.reset()
    compiled = miniinductor.compile(model, **options)
    with torch.no_grad(), collect_compiled() as graphs:
        compiled(x)
    assert len(graphs) == 1, [g.graph.name for g in graphs]
    return compiled, graphs[0]


def aten_code(cg) -> str:
    """The Python code of the ATen graph that was lowered (after freezing, where it ran)."""
    return cg.graph.module.code


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16)).eval()


def under_autocast(model, dtype=torch.bfloat16):
    def run(x):
        with torch.autocast("cpu", dtype=dtype):
            return model(x)
    return run


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_matches_eager_autocast(dtype):
    model = mlp()
    x = torch.randn(8, 32)
    name = str(dtype).removeprefix("torch.")
    compiled, cg = compile_once(model, x, autocast_enabled=True, autocast_dtype=name)
    _, plain = compile_once(model, x)
    # the casts are in the ATen graph: x, both weights and both biases go to low precision
    assert aten_code(cg).count("_to_copy.default(") >= 5 and f"dtype = torch.{name}" in aten_code(cg)
    assert "_to_copy" not in aten_code(plain)
    with torch.no_grad():
        out = check(under_autocast(model, dtype), torch.randn(8, 32), compiled=compiled,
                    **(BF16_TOL if dtype == torch.bfloat16 else {}))
    assert out.dtype == dtype          # check() also compared it with eager-autocast's dtype


def test_autocast_through_torch_compile_options():
    model = mlp()
    compiled = torch.compile(model, backend="miniinductor", options={"autocast_enabled": True})
    with torch.no_grad():
        out = check(under_autocast(model), torch.randn(8, 32), compiled=compiled, **BF16_TOL)
    assert out.dtype == torch.bfloat16


def test_autocast_with_gradients_matches_eager_autocast():
    """The joint graph is traced under autocast too: forward and backward see its casts."""
    model = mlp()
    reference = copy.deepcopy(model)
    x = torch.randn(8, 32)
    out = miniinductor.compile(model, autocast_enabled=True)(x)
    out.float().sum().backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = reference(x)
    ref.float().sum().backward()
    assert out.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(out, ref, **BF16_TOL)
    for p, q in zip(model.parameters(), reference.parameters()):
        assert p.grad.dtype == q.grad.dtype == torch.float32
        torch.testing.assert_close(p.grad, q.grad, **BF16_TOL)   # grads of bf16 matmuls
