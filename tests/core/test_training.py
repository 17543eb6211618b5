"""Training: forward + backward through the compiled module, then optimizer steps.

The compiled module shares its parameters with the module it wraps, so the
eager reference is a ``copy.deepcopy`` taken before compiling.  Both get the
same inputs; outputs, input gradients and every parameter's ``.grad`` are
compared.

Tolerances (float32):
  * MLP: rtol/atol 1e-5.  The matmuls are the same ATen calls as eager, but
    bias gradients and the loss are reductions over the batch, which the
    compiler may accumulate in another order (a few float32 ulps).
  * GPT-2 block: rtol/atol 1e-4.  Layer norm, softmax and their backward
    passes are chains of reductions (mean, variance, row sums of
    grad*output) whose accumulation order differs from eager's; the errors
    of several such reductions compound through the block's two residual
    branches, so a few 1e-5-relative differences are expected.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import USING_MINIINDUCTOR, compile_fn, metrics

try:
    from miniinductor.tools.models import MLP, GPT2Block
except Exception:  # pragma: no cover - only while models.py is being written
    import math

    class MLP(nn.Module):
        def __init__(self, sizes):
            super().__init__()
            layers = []
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
                layers.append(nn.Linear(a, b))
                if i < len(sizes) - 2:
                    layers.append(nn.ReLU())
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)

    class GPT2Block(nn.Module):
        def __init__(self, d_model, n_head):
            super().__init__()
            self.n_head = n_head
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
            self.fc, self.fc_proj = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

        def forward(self, x):
            B, T, C = x.shape
            H, D = self.n_head, C // self.n_head
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


MLP_TOL = dict(rtol=1e-5, atol=1e-5)
BLOCK_TOL = dict(rtol=1e-4, atol=1e-4)


def _named_params(model):
    """Parameter names without the ``_orig_mod.`` prefix a compiled wrapper adds."""
    return {n.replace("_orig_mod.", ""): p for n, p in model.named_parameters()}


def _compare_grads(compiled_model, eager_model, tol):
    c_params = _named_params(compiled_model)
    e_params = _named_params(eager_model)
    assert c_params.keys() == e_params.keys()
    assert c_params, "model has no parameters"
    for name, p in e_params.items():
        q = c_params[name]
        assert p.grad is not None, f"eager {name} has no grad"
        assert q.grad is not None, f"compiled {name} has no grad"
        torch.testing.assert_close(q.grad, p.grad, **tol, msg=lambda m: f"grad of {name}: {m}")


def _compare_params(compiled_model, eager_model, tol):
    e_params = _named_params(eager_model)
    assert e_params.keys() == _named_params(compiled_model).keys()
    for name, q in _named_params(compiled_model).items():
        torch.testing.assert_close(q, e_params[name], **tol, msg=lambda m: f"param {name}: {m}")


def _make_pair(model):
    eager = copy.deepcopy(model)
    compiled = compile_fn(model)
    return compiled, eager


def test_mlp_forward_backward():
    model = MLP([16, 32, 4])
    compiled, eager = _make_pair(model)
    x, target = torch.randn(8, 16), torch.randn(8, 4)

    out_e = eager(x)
    loss_e = F.mse_loss(out_e, target)
    loss_e.backward()

    out_c = compiled(x)
    loss_c = F.mse_loss(out_c, target)
    loss_c.backward()

    torch.testing.assert_close(out_c, out_e, **MLP_TOL)
    torch.testing.assert_close(loss_c, loss_e, **MLP_TOL)
    _compare_grads(compiled, eager, MLP_TOL)


def test_mlp_loss_inside_compiled_graph():
    """Loss (log_softmax + nll) inside the graph, and a gradient for the input."""
    model = MLP([16, 32, 4])
    eager = copy.deepcopy(model)

    def step(m, x, y):
        return F.cross_entropy(m(x), y)

    compiled_step = compile_fn(step)
    x = torch.randn(8, 16)
    y = torch.randint(0, 4, (8,))
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()

    loss_e = step(eager, xe, y)
    loss_e.backward()
    loss_c = compiled_step(model, xc, y)
    loss_c.backward()

    torch.testing.assert_close(loss_c, loss_e, **MLP_TOL)
    torch.testing.assert_close(xc.grad, xe.grad, **MLP_TOL)
    _compare_grads(model, eager, MLP_TOL)


@pytest.fixture
def block_setup():
    model = GPT2Block(d_model=64, n_head=4)
    # Non-trivial LayerNorm affine parameters, so their gradients are not all alike.
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.add_(0.1 * torch.randn_like(mod.weight))
                mod.bias.add_(0.1 * torch.randn_like(mod.bias))
    x = torch.randn(2, 16, 64)
    grad_out = torch.randn(2, 16, 64)
    return model, x, grad_out


def test_gpt2_block_forward_backward(block_setup):
    model, x, grad_out = block_setup
    compiled, eager = _make_pair(model)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()

    out_e = eager(xe)
    out_e.backward(grad_out)
    if USING_MINIINDUCTOR:
        metrics().reset()
    out_c = compiled(xc)
    out_c.backward(grad_out)

    torch.testing.assert_close(out_c, out_e, **BLOCK_TOL)
    torch.testing.assert_close(xc.grad, xe.grad, **BLOCK_TOL, msg=lambda m: f"input grad: {m}")
    _compare_grads(compiled, eager, BLOCK_TOL)
    if USING_MINIINDUCTOR:
        # Forward and backward graphs each went through the compiler.
        assert len(metrics().output_code_paths) >= 2, metrics().output_code_paths
        assert metrics().generated_kernel_count >= 2


def test_gpt2_block_inference_no_grad(block_setup):
    model, x, _ = block_setup
    compiled, eager = _make_pair(model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), eager(x), **BLOCK_TOL)


@pytest.mark.parametrize("which", ["mlp", "gpt2_block"])
def test_sgd_two_steps(which, block_setup):
    if which == "mlp":
        model, tol = MLP([16, 32, 4]), MLP_TOL
        x, target = torch.randn(8, 16), torch.randn(8, 4)
    else:
        model, x, target = block_setup
        tol = BLOCK_TOL
    compiled, eager = _make_pair(model)
    opt_c = torch.optim.SGD(compiled.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    before = {n: p.detach().clone() for n, p in eager.named_parameters()}

    for step in range(2):
        losses = []
        for m, opt in ((eager, opt_e), (compiled, opt_c)):
            opt.zero_grad()
            loss = F.mse_loss(m(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], **tol, msg=lambda m: f"loss at step {step}: {m}")
        _compare_params(compiled, eager, tol)

    # The steps really changed the parameters (so the comparison means something).
    moved = [n for n, p in eager.named_parameters() if not torch.equal(p, before[n])]
    assert moved, "SGD steps changed no parameter"
