"""A model zoo: small configs of the architecture families a compiler must get right.

Plain ``torch.nn`` with random initialisation (no downloads), written like their
Hugging Face / torchvision namesakes but a few layers deep and 32-64 wide, so a few
training steps run in seconds on a CPU. ``ZOO[name]`` is a ``ZooEntry``:
``make_model(cfg)``, ``make_inputs(cfg, gen) -> (args, target)`` and
``loss_fn(output, target)``; ``compare_training`` trains a compiled copy and an eager
copy side by side and reports every loss, every parameter's gradient error and an
eval-mode forward (tests/test_zoo.py, benchmarks/zoo_gpu.py).

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

from .models import GPT2Block


# ---------------------------------------------------------------------------- pieces
class RMSNorm(nn.Module):
    """Llama's RMSNorm, also T5's LayerNorm: no mean subtraction, no bias."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)                              # 2 x [..., D/2]
    return torch.cat([-x2, x1], dim=-1)                      # [..., D]


def rope_tables(head_dim: int, max_seq: int, base: float = 10000.0):
    """cos and sin of the rotary angles, each [max_seq, D] (the D/2 frequencies twice)."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)  # [D/2]
    freqs = torch.outer(torch.arange(max_seq).float(), inv_freq)  # [max_seq, D/2]
    emb = torch.cat([freqs, freqs], dim=-1)                  # [max_seq, D]
    return emb.cos(), emb.sin()


class Attention(nn.Module):
    """Multi-head attention, softmax written out: self- or cross-attention, optional
    causal mask, additive bias (padding mask, relative positions), rotary embeddings and
    grouped-query attention (``n_kv_head`` < ``n_head`` key/value heads, repeated)."""

    def __init__(self, d_model, n_head, n_kv_head=None, bias=True, scale=True):
        super().__init__()
        self.n_head, self.n_kv_head = n_head, n_kv_head or n_head
        self.head_dim, self.scale = d_model // n_head, scale
        self.q = nn.Linear(d_model, n_head * self.head_dim, bias=bias)
        self.k = nn.Linear(d_model, self.n_kv_head * self.head_dim, bias=bias)
        self.v = nn.Linear(d_model, self.n_kv_head * self.head_dim, bias=bias)
        self.o = nn.Linear(n_head * self.head_dim, d_model, bias=bias)

    def forward(self, x, kv=None, causal=False, bias=None, rope=None):
        kv = x if kv is None else kv
        B, T, _ = x.shape
        S = kv.shape[1]
        H, Hkv, D = self.n_head, self.n_kv_head, self.head_dim
        q = self.q(x).reshape(B, T, H, D).transpose(1, 2)    # [B, H, T, D]
        k = self.k(kv).reshape(B, S, Hkv, D).transpose(1, 2)  # [B, Hkv, S, D]
        v = self.v(kv).reshape(B, S, Hkv, D).transpose(1, 2)  # [B, Hkv, S, D]
        if rope is not None:
            cos, sin = rope[0][:T], rope[1][:T]              # 2 x [T, D]
            q = q * cos + rotate_half(q) * sin               # [B, H, T, D]
            k = k * cos + rotate_half(k) * sin               # [B, Hkv, S, D]
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, dim=1)         # [B, H, S, D]
            v = v.repeat_interleave(H // Hkv, dim=1)         # [B, H, S, D]
        att = q @ k.transpose(-2, -1)                        # [B, H, T, S]
        if self.scale:
            att = att * (1.0 / math.sqrt(D))
        if bias is not None:
            att = att + bias                                 # bias broadcasts to [B, H, T, S]
        if causal:
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).triu(1)  # [T, S]
            att = att.masked_fill(mask, float("-inf"))
        att = att.softmax(dim=-1)                            # [B, H, T, S]
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)   # [B, T, H, D] -> [B, T, H*D]
        return self.o(y)                                     # [B, T, C]


class TransformerBlock(nn.Module):
    """Pre-LayerNorm block (ViT, Whisper): self-attention, optional cross-attention,
    GELU MLP, each on a residual branch."""

    def __init__(self, d_model, n_head, cross=False):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d_model), Attention(d_model, n_head)
        self.ln_cross = nn.LayerNorm(d_model) if cross else None
        self.cross = Attention(d_model, n_head) if cross else None
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, memory=None, causal=False):        # x: [B, T, C], memory: [B, S, C]
        x = x + self.attn(self.ln1(x), causal=causal)
        if self.cross is not None:
            x = x + self.cross(self.ln_cross(x), kv=memory)
        return x + self.mlp(self.ln2(x))                     # [B, T, C]


def _tokens(cfg, gen, n=None):
    return torch.randint(0, cfg["vocab"], (cfg["batch"], n or cfg["seq"]), generator=gen)


def _lm_loss(logits, target):                                # logits [B, T, V], target [B, T]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))  # [B*T, V]


# ---------------------------------------------------------------------------- gpt2
class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.wte, self.wpe = nn.Embedding(cfg["vocab"], d), nn.Embedding(cfg["seq"], d)
        self.blocks = nn.ModuleList(GPT2Block(d, cfg["n_head"], cfg["seq"]) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, cfg["vocab"], bias=False)
        self.lm_head.weight = self.wte.weight                # tied input/output embeddings

    def forward(self, idx):                                  # idx: [B, T]
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # [B, T, C]
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))                    # [B, T, V]


def _lm_inputs(cfg, gen):
    tokens = _tokens(cfg, gen, cfg["seq"] + 1)               # [B, T+1]: targets are shifted by one
    return (tokens[:, :-1],), tokens[:, 1:]


# ---------------------------------------------------------------------------- llama
class LlamaBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.attn_norm, self.ffn_norm = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, cfg["n_head"], cfg["n_kv_head"], bias=False)
        hidden = cfg["ffn"]
        self.w1 = nn.Linear(d, hidden, bias=False)            # gate
        self.w3 = nn.Linear(d, hidden, bias=False)            # up
        self.w2 = nn.Linear(hidden, d, bias=False)            # down

    def forward(self, x, rope):                              # x: [B, T, C]
        x = x + self.attn(self.attn_norm(x), causal=True, rope=rope)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))  # SwiGLU, [B, T, C]


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.embed = nn.Embedding(cfg["vocab"], d)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg["n_layer"]))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, cfg["vocab"], bias=False)
        cos, sin = rope_tables(d // cfg["n_head"], cfg["seq"])
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, idx):                                  # idx: [B, T]
        x = self.embed(idx)                                  # [B, T, C]
        for block in self.blocks:
            x = block(x, (self.rope_cos, self.rope_sin))
        return self.lm_head(self.norm(x))                    # [B, T, V]


# ---------------------------------------------------------------------------- bert
class BertLayer(nn.Module):
    """Post-LayerNorm encoder layer."""

    def __init__(self, d_model, n_head):
        super().__init__()
        self.attn, self.ln1 = Attention(d_model, n_head), nn.LayerNorm(d_model, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.ln2 = nn.LayerNorm(d_model, eps=1e-12)

    def forward(self, x, bias):                              # x: [B, T, C], bias: [B, 1, 1, T]
        x = self.ln1(x + self.attn(x, bias=bias))
        return self.ln2(x + self.ff(x))


class Bert(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.word = nn.Embedding(cfg["vocab"], d, padding_idx=0)
        self.position = nn.Embedding(cfg["seq"], d)
        self.token_type = nn.Embedding(2, d)
        self.emb_ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, cfg["n_head"]) for _ in range(cfg["n_layer"]))
        self.pooler = nn.Linear(d, d)
        self.classifier = nn.Linear(d, cfg["n_classes"])

    def forward(self, input_ids, token_type_ids, attention_mask):  # each [B, T]
        T = input_ids.shape[1]
        x = self.word(input_ids) + self.position(torch.arange(T, device=input_ids.device)) \
            + self.token_type(token_type_ids)                # [B, T, C]
        x = self.emb_ln(x)
        # padding keys get the most negative float added to their scores
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min  # [B, 1, 1, T]
        for layer in self.layers:
            x = layer(x, bias)
        return self.classifier(torch.tanh(self.pooler(x[:, 0])))  # [B, C] -> [B, n_classes]


def _bert_inputs(cfg, gen):
    B, T = cfg["batch"], cfg["seq"]
    lengths = torch.randint(T // 2, T + 1, (B, 1), generator=gen)  # [B, 1]
    attention_mask = (torch.arange(T) < lengths).long()     # [B, T]: 1 on real tokens
    input_ids = _tokens(cfg, gen) * attention_mask           # padding is token 0
    token_type_ids = (torch.arange(T) >= lengths // 2).long() * attention_mask  # [B, T]: sentence A, B
    labels = torch.randint(0, cfg["n_classes"], (B,), generator=gen)
    return (input_ids, token_type_ids, attention_mask), labels


# ---------------------------------------------------------------------------- t5
class RelativePositionBias(nn.Module):
    """T5's bucketed relative position bias: exact buckets for small distances,
    logarithmic ones up to ``max_distance``; one learned scalar per bucket and head."""

    def __init__(self, n_head, bidirectional, num_buckets=32, max_distance=128):
        super().__init__()
        self.bidirectional, self.num_buckets, self.max_distance = bidirectional, num_buckets, max_distance
        self.embed = nn.Embedding(num_buckets, n_head)

    def bucket(self, relative_position):                     # [T, S] int64
        num_buckets, ret = self.num_buckets, 0
        if self.bidirectional:
            num_buckets //= 2
            ret = (relative_position > 0).long() * num_buckets
            n = relative_position.abs()
        else:
            n = -torch.clamp(relative_position, max=0)
        max_exact = num_buckets // 2
        large = max_exact + (torch.log(n.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (num_buckets - max_exact)).long()
        large = torch.clamp(large, max=num_buckets - 1)
        return ret + torch.where(n < max_exact, n, large)

    def forward(self, T, S, device):
        context = torch.arange(T, device=device)[:, None]   # [T, 1]
        memory = torch.arange(S, device=device)[None, :]    # [1, S]
        buckets = self.bucket(memory - context)              # [T, S]
        return self.embed(buckets).permute(2, 0, 1).unsqueeze(0)  # [T, S, H] -> [1, H, T, S]


class T5Layer(nn.Module):
    def __init__(self, cfg, cross):
        super().__init__()
        d, H = cfg["d_model"], cfg["n_head"]
        self.norm1, self.attn = RMSNorm(d), Attention(d, H, bias=False, scale=False)
        self.norm_cross = RMSNorm(d) if cross else None
        self.cross = Attention(d, H, bias=False, scale=False) if cross else None
        self.norm2 = RMSNorm(d)
        self.wi = nn.Linear(d, cfg["ffn"], bias=False)
        self.wo = nn.Linear(cfg["ffn"], d, bias=False)

    def forward(self, x, bias, memory=None, causal=False):  # x: [B, T, C], bias: [1, H, T, T]
        x = x + self.attn(self.norm1(x), bias=bias, causal=causal)
        if self.cross is not None:
            x = x + self.cross(self.norm_cross(x), kv=memory)
        return x + self.wo(F.relu(self.wi(self.norm2(x))))


class T5(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.shared = nn.Embedding(cfg["vocab"], d)         # encoder, decoder and lm_head
        self.enc_bias = RelativePositionBias(cfg["n_head"], bidirectional=True)
        self.dec_bias = RelativePositionBias(cfg["n_head"], bidirectional=False)
        self.encoder = nn.ModuleList(T5Layer(cfg, cross=False) for _ in range(cfg["n_layer"]))
        self.decoder = nn.ModuleList(T5Layer(cfg, cross=True) for _ in range(cfg["n_layer"]))
        self.enc_norm, self.dec_norm = RMSNorm(d), RMSNorm(d)

    def forward(self, input_ids, decoder_input_ids):         # [B, S], [B, T]
        S, T = input_ids.shape[1], decoder_input_ids.shape[1]
        x = self.shared(input_ids)                           # [B, S, C]
        bias = self.enc_bias(S, S, x.device)                 # [1, H, S, S]
        for layer in self.encoder:
            x = layer(x, bias)
        memory = self.enc_norm(x)
        y = self.shared(decoder_input_ids)                   # [B, T, C]
        bias = self.dec_bias(T, T, y.device)                 # [1, H, T, T]
        for layer in self.decoder:
            y = layer(y, bias, memory=memory, causal=True)
        y = self.dec_norm(y) * self.shared.embedding_dim ** -0.5  # tied lm_head is rescaled
        return y @ self.shared.weight.t()                    # [B, T, V]


def _seq2seq_inputs(cfg, gen):
    target = _tokens(cfg, gen)                               # [B, T]
    start = torch.zeros_like(target[:, :1])                  # [B, 1]: decoder start token 0
    return (_tokens(cfg, gen), torch.cat([start, target[:, :-1]], dim=1)), target


# ---------------------------------------------------------------------------- vit
class ViT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, p = cfg["d_model"], cfg["patch"]
        n_patches = (cfg["image"] // p) ** 2
        self.patch = nn.Conv2d(3, d, kernel_size=p, stride=p)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n_patches + 1, d) * 0.02)
        self.blocks = nn.ModuleList(TransformerBlock(d, cfg["n_head"]) for _ in range(cfg["n_layer"]))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg["n_classes"])

    def forward(self, img):                                  # img: [B, 3, image, image]
        x = self.patch(img)                                  # [B, C, image/p, image/p]
        x = x.flatten(2).transpose(1, 2)                     # [B, N, C]
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos  # [B, N+1, C]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))                 # [B, n_classes]


def _image_inputs(cfg, gen):
    img = torch.randn(cfg["batch"], 3, cfg["image"], cfg["image"], generator=gen)
    return (img,), torch.randint(0, cfg["n_classes"], (cfg["batch"],), generator=gen)


# ---------------------------------------------------------------------------- whisper
class Whisper(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, H = cfg["d_model"], cfg["n_head"]
        self.conv1 = nn.Conv1d(cfg["n_mels"], d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.enc_pos = nn.Parameter(torch.randn(cfg["frames"] // 2, d) * 0.02)
        self.encoder = nn.ModuleList(TransformerBlock(d, H) for _ in range(cfg["n_layer"]))
        self.enc_ln = nn.LayerNorm(d)
        self.embed = nn.Embedding(cfg["vocab"], d)
        self.dec_pos = nn.Parameter(torch.randn(cfg["seq"], d) * 0.02)
        self.decoder = nn.ModuleList(TransformerBlock(d, H, cross=True) for _ in range(cfg["n_layer"]))
        self.dec_ln = nn.LayerNorm(d)

    def forward(self, mel, tokens):                          # mel: [B, n_mels, frames], tokens: [B, T]
        x = F.gelu(self.conv1(mel))                          # [B, C, frames]
        x = F.gelu(self.conv2(x))                            # [B, C, frames/2]
        x = x.transpose(1, 2) + self.enc_pos                 # [B, frames/2, C]
        for block in self.encoder:
            x = block(x)
        memory = self.enc_ln(x)
        T = tokens.shape[1]
        y = self.embed(tokens) + self.dec_pos[:T]           # [B, T, C]
        for block in self.decoder:
            y = block(y, memory=memory, causal=True)
        return self.dec_ln(y) @ self.embed.weight.t()       # tied output, [B, T, V]


def _whisper_inputs(cfg, gen):
    mel = torch.randn(cfg["batch"], cfg["n_mels"], cfg["frames"], generator=gen)
    tokens = _tokens(cfg, gen, cfg["seq"] + 1)               # [B, T+1]
    return (mel, tokens[:, :-1]), tokens[:, 1:]


# ---------------------------------------------------------------------------- resnet
class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(c_out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


class ResNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        w = cfg["width"]
        self.stem = nn.Sequential(nn.Conv2d(3, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        self.layer1 = BasicBlock(w, w)
        self.layer2 = BasicBlock(w, 2 * w, stride=2)
        self.fc = nn.Linear(2 * w, cfg["n_classes"])

    def forward(self, img):                                  # img: [B, 3, image, image]
        x = self.layer2(self.layer1(self.stem(img)))         # [B, 2w, image/4, image/4]
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)           # [B, 2w, 1, 1] -> [B, 2w]
        return self.fc(x)                                    # [B, n_classes]


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
