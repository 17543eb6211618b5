"""Built-in models for the demo, the benchmarks and the tests.

Plain ``torch.nn`` modules with random initialisation (no downloaded weights), so
every run is self-contained. They are written to exercise a compiler: the
GPT-2 block mixes matmuls (extern kernels), pointwise chains (fusion), reductions
(LayerNorm, softmax) and views (reshape/transpose become index remapping).

    B = batch, T = sequence length, C = d_model, H = heads, D = C // H
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with the softmax written out explicitly."""

    def __init__(self, d_model: int = 768, n_head: int = 12, max_seq: int = 1024):
        super().__init__()
        assert d_model % n_head == 0, "d_model must be divisible by n_head"
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)  # fused Q, K, V projection
        self.proj = nn.Linear(d_model, d_model)
        # mask[i, j] is True where position i may NOT look at j (j > i): [max_seq, max_seq]
        mask = torch.triu(torch.ones(max_seq, max_seq, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        H, D = self.n_head, C // self.n_head
        qkv = self.qkv(x)                                  # [B, T, 3C]
        q, k, v = qkv.split(C, dim=2)                      # 3 x [B, T, C]
        q = q.reshape(B, T, H, D).transpose(1, 2)          # [B, H, T, D]
        k = k.reshape(B, T, H, D).transpose(1, 2)          # [B, H, T, D]
        v = v.reshape(B, T, H, D).transpose(1, 2)          # [B, H, T, D]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))  # [B, H, T, T]
        att = att.masked_fill(self.causal_mask[:T, :T], float("-inf"))  # [B, H, T, T]
        att = torch.softmax(att, dim=-1)                   # [B, H, T, T]
        y = att @ v                                        # [B, H, T, D]
        y = y.transpose(1, 2).reshape(B, T, C)             # [B, T, H, D] -> [B, T, C]
        return self.proj(y)                                # [B, T, C]


class GPT2Block(nn.Module):
    """One pre-LayerNorm GPT-2 transformer block (dropout-free).

    x -> x + Attn(LN1(x)) -> x + MLP(LN2(x)), with a tanh-approximate GELU.
    """

    def __init__(self, d_model: int = 768, n_head: int = 12, max_seq: int = 1024):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, max_seq)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.fc_proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # x: [B, T, C]
        x = x + self.attn(self.ln1(x))                     # [B, T, C]
        h = self.fc(self.ln2(x))                           # [B, T, 4C]
        h = F.gelu(h, approximate="tanh")                  # [B, T, 4C]
        return x + self.fc_proj(h)                         # [B, T, C]


class MLP(nn.Module):
    """A plain multilayer perceptron: Linear -> ReLU -> ... -> Linear.

    ``MLP([784, 256, 10])`` has two Linear layers and one ReLU between them.
    """

    def __init__(self, sizes: list[int] | tuple[int, ...] = (64, 128, 10)):
        super().__init__()
        assert len(sizes) >= 2, "need at least an input and an output size"
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # [N, sizes[0]] -> [N, sizes[-1]]
        return self.net(x)


def make_demo_inputs(batch: int = 2, seq: int = 64, d_model: int = 128,
                     seed: int = 0) -> torch.Tensor:
    """A reproducible activation tensor of shape [batch, seq, d_model]."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, seq, d_model, generator=gen)
