"""The decomposition table audited against Inductor's, and attention trained through it.

`F.scaled_dot_product_attention` is what every `transformers` model calls by default. On the
CPU its flash kernel has a core-ATen decomposition that PyTorch marks unsafe for compilers:
taking it gave every CPU training step wrong gradients (the backward received attention
probabilities where it expected the logsumexp). These tests pin the table's differences
from Inductor's to the reasons written in capture/decompositions.py, and check SDPA's
outputs and input gradients against eager in every CPU backend, with masks, causal,
GQA and inputs that are views.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import check_grads, compile_fn, randn
from torch._decomp import core_aten_decompositions
from torch.nn.attention import SDPBackend, sdpa_kernel

from miniinductor.capture.decompositions import KEPT_THOUGH_INDUCTOR_EXCLUDES, decomposition_table

aten = torch.ops.aten


def _overloads(op):
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    return [getattr(op, name) for name in op.overloads()]


@pytest.mark.parametrize("training", [True, False])
def test_every_difference_from_inductor_has_its_reason(training):
    """Core-ATen decompositions that Inductor drops and we keep are exactly the ones listed
    with a reason; a torch release that drops another one turns this red until it is read."""
    from torch._inductor.decomposition import decomps_to_exclude

    core, ours = core_aten_decompositions(), decomposition_table(training=training)
    kept = {o.overloadpacket.__name__ for op in decomps_to_exclude for o in _overloads(op)
            if o in core and o in ours}
    assert kept - set(KEPT_THOUGH_INDUCTOR_EXCLUDES) == set(), "kept without a reason"
    assert set(KEPT_THOUGH_INDUCTOR_EXCLUDES) - kept == set(), "a reason for something not kept"


@pytest.mark.parametrize("training", [True, False])
def test_no_decomposition_pytorch_marks_unsafe(training):
    table = decomposition_table(training=training)
    assert aten._scaled_dot_product_flash_attention_for_cpu.default not in table


# -- SDPA: outputs and input gradients against eager ---------------------------------------
# float32 attention over L <= 16 keys: each output and gradient element sums at most a few
# hundred products of magnitude ~1, and the compiled graph calls the same ATen kernels for the
# attention itself, so eager's float32 tolerance for short reductions (1e-4 / 1e-5) holds.
RTOL, ATOL = 1e-4, 1e-5
BACKENDS = {"default": None, "math": SDPBackend.MATH, "flash_cpu": SDPBackend.FLASH_ATTENTION}


def _sdpa(backend, **kwargs):
    def fn(q, k, v, *mask):
        if BACKENDS[backend] is None:
            return F.scaled_dot_product_attention(q, k, v, *mask, **kwargs)
        with sdpa_kernel([BACKENDS[backend]]):
            return F.scaled_dot_product_attention(q, k, v, *mask, **kwargs)
    return fn


CASES = {
    "plain": (dict(), None),
    "causal": (dict(is_causal=True), None),
    "bool_mask": (dict(), "bool"),
    "float_mask": (dict(), "float"),
    "scale": (dict(scale=0.3), None),
    "dropout0": (dict(dropout_p=0.0), None),
}


def _mask(kind, lq, lk):
    if kind == "bool":
        m = torch.rand(1, 1, lq, lk) > 0.3
        m[..., 0] = True                      # no fully masked row (eager's output is NaN there)
        return (m,)
    if kind == "float":
        return (randn(2, 1, lq, lk),)
    return ()


# the default backend in the quick suite; the math and flash backends forced, in the sweeps
@pytest.mark.parametrize("backend", [b if b == "default" else pytest.param(b, marks=pytest.mark.sweep) for b in BACKENDS])
@pytest.mark.parametrize("case", list(CASES))
def test_sdpa_gradients(backend, case):
    kwargs, mask = CASES[case]
    lq, lk = 8, 12 if not kwargs.get("is_causal") else 8
    q = randn(2, 3, lq, 16, requires_grad=True)
    k, v = randn(2, 3, lk, 16, requires_grad=True), randn(2, 3, lk, 16, requires_grad=True)
    check_grads(_sdpa(backend, **kwargs), q, k, v, *_mask(mask, lq, lk), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("backend", ["default", "math"])
def test_sdpa_gqa_gradients(backend):
    """Grouped-query attention (Llama, Mistral, Qwen2): 6 query heads share 2 key/value heads."""
    q = randn(2, 6, 8, 16, requires_grad=True)
    k, v = randn(2, 2, 8, 16, requires_grad=True), randn(2, 2, 8, 16, requires_grad=True)
    check_grads(_sdpa(backend, is_causal=True, enable_gqa=True), q, k, v, rtol=RTOL, atol=ATOL)


def test_sdpa_of_views_gradients():
    """q, k and v cut from one projection by split + view + transpose, as GPT-2 does: the
    case that gave NaN gradients."""
    def attention(x, w):
        qkv = x @ w                                              # [B, L, 3*D]
        q, k, v = qkv.split(32, dim=-1)                          # [B, L, D] each
        q, k, v = (t.view(2, 10, 4, 8).transpose(1, 2) for t in (q, k, v))   # [B, H, L, D/H]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)          # [B, H, L, D/H]
        return y.transpose(1, 2).reshape(2, 10, 32)              # [B, L, D]
    check_grads(attention, randn(2, 10, 32, requires_grad=True), randn(32, 96, requires_grad=True),
                rtol=RTOL, atol=ATOL)


def test_sdpa_training_step_matches_eager_step_after_step():
    """Three SGD steps of a small attention model: the parameters after each step, not only
    one gradient, agree with eager."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    eager = layer
    compiled_layer = copy.deepcopy(layer)
    compiled = compile_fn(compiled_layer)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(compiled_layer.parameters(), lr=0.1)
    for _ in range(3):
        # a random projection of the output (the sum of squares of a layer norm's output is
        # nearly constant: its gradients would be rounding noise)
        x, w = randn(2, 10, 32), randn(2, 10, 32)
        for fn, opt in ((eager, opt_e), (compiled, opt_c)):
            opt.zero_grad()
            (fn(x) * w).sum().backward()
            opt.step()
        for (name, pe), pc in zip(eager.named_parameters(), compiled_layer.parameters()):
            torch.testing.assert_close(pc.grad, pe.grad, rtol=1e-4, atol=1e-5, msg=name)
            torch.testing.assert_close(pc, pe, rtol=1e-4, atol=1e-5, msg=name)
