"""A model zoo: small configs of the architecture families a compiler must get right.

Plain ``torch.nn`` with random initialisation (no downloads), written like their
Hugging Face / torchvision namesakes but a few layers deep and 32-64 wide, so a few
training steps run in seconds on a CPU. ``ZOO[name]`` is a ``ZooEntry``:
``make_model(cfg)``, ``make_inputs(cfg, gen) -> (args, target)`` and
``loss_fn(output, target)``; ``compare_training`` trains a compiled copy and an eager
copy side by side and reports every loss, every parameter's gradient error and an
eval-mode forward (tests/core/test_zoo.py, benchmarks/zoo_gpu.py). The architectures, their
input makers and losses are in models.py; the registry and the comparison are here.

    gpt2     decoder-only, learned positions, tied input/output embeddings
    llama    RMSNorm, rotary embeddings, SwiGLU MLP, grouped-query attention
    bert     post-LN encoder, token-type embeddings, a padding attention mask
    t5       encoder-decoder, bucketed relative position bias, cross-attention
    vit      patch convolution, class token, pre-LN encoder
    whisper  Conv1d+GELU front-end (stride 2), learned positions, encoder-decoder
    resnet   BatchNorm, residual basic blocks, max and average pooling

    B = batch, T = target/sequence length, S = key length, C = d_model, H = heads,
    D = C // H, V = vocabulary
"""
from __future__ import annotations

import copy
import dataclasses
import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from .models import (  # noqa: F401  (every name the zoo had before its split stays importable from here)
    GPT2,
    T5,
    Attention,
    BasicBlock,
    Bert,
    BertLayer,
    GPT2Block,
    Llama,
    LlamaBlock,
    RelativePositionBias,
    ResNet,
    RMSNorm,
    T5Layer,
    TransformerBlock,
    ViT,
    Whisper,
    _bert_inputs,
    _image_inputs,
    _lm_inputs,
    _lm_loss,
    _seq2seq_inputs,
    _tokens,
    _whisper_inputs,
    rope_tables,
    rotate_half,
)


# ---------------------------------------------------------------------------- registry
@dataclasses.dataclass
class ZooEntry:
    make_model: Callable[[dict], nn.Module]
    make_inputs: Callable[[dict, torch.Generator], tuple]   # -> (args, target)
    loss_fn: Callable
    config: dict


_LM = dict(batch=2, seq=16, d_model=32, n_head=4, n_layer=2, vocab=64)
ZOO: dict[str, ZooEntry] = {
    "gpt2": ZooEntry(GPT2, _lm_inputs, _lm_loss, dict(_LM)),
    "llama": ZooEntry(Llama, _lm_inputs, _lm_loss, dict(_LM, n_kv_head=2, ffn=96)),
    "bert": ZooEntry(Bert, _bert_inputs, F.cross_entropy, dict(_LM, n_classes=3)),
    "t5": ZooEntry(T5, _seq2seq_inputs, _lm_loss, dict(_LM, ffn=64)),
    "vit": ZooEntry(ViT, _image_inputs, F.cross_entropy,
                    dict(batch=2, image=16, patch=4, d_model=32, n_head=4, n_layer=2, n_classes=10)),
    "whisper": ZooEntry(Whisper, _whisper_inputs, _lm_loss, dict(_LM, n_mels=16, frames=32)),
    "resnet": ZooEntry(ResNet, _image_inputs, F.cross_entropy,
                       dict(batch=4, image=16, width=8, n_classes=10)),
}
# The GPU issue's T5 encoder-decoder size (batch 4, seq 128, width 256, 4 layers).
CONFIGS = {"t5-large-ish": ("t5", dict(batch=4, seq=128, d_model=256, n_head=4, n_layer=4, ffn=1024,
                                       vocab=512))}


# ---------------------------------------------------------------------------- comparing
class WithLoss(nn.Module):
    """model(*args) then loss_fn(output, target), so the loss is compiled too."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, target, *args):
        return self.loss_fn(self.model(*args), target)


def _error(actual, expected):
    """[max |actual - expected|, max |expected|, max error outside the worst row]. A row
    is a slice along dim 0 (a weight's output unit). An error confined to one row is the
    signature of one activation mask flipped (a ReLU whose input was within rounding of 0
    for one token), not of a wrong kernel."""
    err = (actual - expected).abs().reshape(expected.shape[0] if expected.dim() else 1, -1)  # [rows, rest]
    rows = err.amax(dim=1).sort(descending=True).values
    return [float(rows[0]), float(expected.abs().max()), float(rows[1]) if len(rows) > 1 else 0.0]


def compare_training(name, compile, *, device="cpu", steps=3, lr=0.05, seed=0, **overrides):
    """Train `compile(WithLoss(model))` and an eager deepcopy for `steps` SGD steps on the
    same inputs; then an eval-mode forward of `compile(model)` under no_grad.

    Returns a JSON-able dict: ``losses`` [[eager, compiled]] per step, ``grads`` per step
    {parameter: [max abs error, max |eager grad|, max error outside the worst row]}
    (before the step changes them), ``buffers`` {name: [error, scale, rest]} after the
    last step (BatchNorm running stats) and ``eval`` [error, scale, rest] of the eval
    output (see `_error`)."""
    entry = ZOO[name]
    cfg = {**entry.config, **overrides}
    torch.manual_seed(seed)
    model = entry.make_model(cfg).to(device)
    eager = copy.deepcopy(model)
    compiled = compile(WithLoss(model, entry.loss_fn))
    optimizers = [torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9) for m in (model, eager)]
    gen = torch.Generator().manual_seed(seed + 1)
    params = dict(model.named_parameters())
    result = {"losses": [], "grads": [], "config": cfg}
    for _ in range(steps):
        args, target = entry.make_inputs(cfg, gen)
        args, target = [a.to(device) for a in args], target.to(device)
        loss_e = entry.loss_fn(eager(*args), target)
        loss_e.backward()
        loss_c = compiled(target, *args)
        loss_c.backward()
        result["losses"].append([loss_e.item(), loss_c.item()])
        result["grads"].append({n: (_error(params[n].grad, p.grad) if params[n].grad is not None
                                    else [math.inf, float(p.grad.abs().max()), math.inf])
                                for n, p in eager.named_parameters()})
        for opt in optimizers:
            opt.step()
            opt.zero_grad()
    result["buffers"] = {n: _error(dict(model.named_buffers())[n], b)
                         for n, b in eager.named_buffers() if b.is_floating_point()}
    model.eval()
    eager.eval()
    args, _ = entry.make_inputs(cfg, gen)
    args = [a.to(device) for a in args]
    with torch.no_grad():
        result["eval"] = _error(compile(model)(*args), eager(*args))
    return result


def relative_grad_errors(grads) -> dict:
    """{parameter: max error / max |eager gradient|} for one step's ``grads``, that max
    floored at 1% of the step's largest gradient: a gradient that is mathematically zero
    (the attention key bias: softmax ignores a per-row constant) holds rounding noise on
    both sides, and its error relative to its own max (~1e-9) would mean nothing."""
    floor = 1e-2 * max(scale for _, scale, _ in grads.values())
    return {n: err / max(scale, floor) if scale or floor else err for n, (err, scale, _) in grads.items()}


def worst_grads(result, k=5):
    """The k parameters with the largest relative gradient error (`relative_grad_errors`)
    over all steps: [(relative error, step, name)]."""
    rows = [(rel, step, n) for step, grads in enumerate(result["grads"])
            for n, rel in relative_grad_errors(grads).items()]
    return sorted(rows, reverse=True)[:k]
