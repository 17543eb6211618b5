"""The T5-style gradient gap against a float64 reference: eager, miniinductor and Inductor.

    python benchmarks/t5_gap_float64.py            # CUDA: batch 4, seq 128, width 256, 4 layers
    python benchmarks/t5_gap_float64.py cpu        # a small CPU version
    python benchmarks/t5_gap_float64.py --gelu     # the control: a smooth activation

A T5-style encoder (RMS-style norm, bucketed relative position bias, attention without
1/sqrt(d), ReLU feed-forward) takes one forward+backward in float64 (the reference) and in
float32 with each compiler; it prints each one's worst parameter gradients against float64
(relative to the gradient's max), then counts the ReLU inputs whose sign differs between
compiled and eager. On an H100 (torch 2.11) eager's worst was 1.42e-6, miniinductor's and
Inductor's both 3.19e-3 (layers.1.wi.weight): a ReLU mask flipped where a pre-activation
lies within float32 rounding of 0, the same for both compilers.
"""
from __future__ import annotations

import argparse
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class T5Norm(nn.Module):
    """RMS norm without a mean or a bias, as in T5."""

    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def bucket(relative, n_buckets=32, max_distance=128):
    """T5's bidirectional relative-position bucket of each (key - query) distance."""
    n_buckets //= 2
    base = (relative > 0).long() * n_buckets
    distance = relative.abs()
    exact = n_buckets // 2
    log_bucket = exact + (torch.log(distance.float() / exact + 1e-9) / math.log(max_distance / exact)
                          * (n_buckets - exact)).long()
    log_bucket = torch.minimum(log_bucket, torch.full_like(log_bucket, n_buckets - 1))
    return base + torch.where(distance < exact, distance, log_bucket)


class Layer(nn.Module):
    def __init__(self, width, heads, ff, activation):
        super().__init__()
        self.heads, self.activation = heads, activation
        self.q, self.k, self.v, self.o = (nn.Linear(width, width, bias=False) for _ in range(4))
        self.n1, self.n2 = T5Norm(width), T5Norm(width)
        self.wi, self.wo = nn.Linear(width, ff, bias=False), nn.Linear(ff, width, bias=False)

    def forward(self, x, position_bias):
        batch, seq, width = x.shape
        head_dim = width // self.heads
        y = self.n1(x)
        # [B, T, C] -> [B, T, H, D] -> [B, H, T, D]
        q, k, v = (proj(y).view(batch, seq, self.heads, head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        attention = (q @ k.transpose(-1, -2) + position_bias).softmax(-1) @ v     # T5: no 1/sqrt(D)
        x = x + self.o(attention.transpose(1, 2).reshape(batch, seq, width))     # [B, H, T, D] -> [B, T, C]
        pre_activation = self.wi(self.n2(x))                                      # [B, T, ff]
        return x + self.wo(self.activation(pre_activation)), pre_activation


class Encoder(nn.Module):
    def __init__(self, activation, vocab=512, width=256, heads=4, ff=1024, n_layers=4):
        super().__init__()
        self.embed, self.rel = nn.Embedding(vocab, width), nn.Embedding(32, heads)
        self.layers = nn.ModuleList(Layer(width, heads, ff, activation) for _ in range(n_layers))
        self.norm, self.head = T5Norm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        seq = ids.shape[1]
        pos = torch.arange(seq, device=ids.device)
        bias = self.rel(bucket(pos[None, :] - pos[:, None])).permute(2, 0, 1)[None]   # [T, T, H] -> [1, H, T, T]
        x = self.embed(ids)
        pre_activations = []
        for layer in self.layers:
            x, pre = layer(x, bias)
            pre_activations.append(pre.detach())
        return self.head(self.norm(x)), pre_activations


def step(model, ids, targets, backend=None):
    """One forward+backward of a copy of `model`: (loss, {name: gradient as float64}, the
    activations' inputs per layer)."""
    model = copy.deepcopy(model)
    run = model if backend is None else torch.compile(model, backend=backend)
    logits, pre_activations = run(ids)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
    loss.backward()
    grads = {name: p.grad.detach().double() for name, p in model.named_parameters()}
    return loss.item(), grads, pre_activations


def relative_errors(grads, reference):
    """The worst five parameters by max |g - ref| / max |ref|."""
    errors = {n: ((grads[n] - reference[n]).abs().max() / reference[n].abs().max()).item() for n in grads}
    return sorted(errors.items(), key=lambda kv: -kv[1])[:5]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("device", nargs="?", default="cuda")
    parser.add_argument("--gelu", action="store_true", help="the control: GELU instead of ReLU")
    args = parser.parse_args()
    activation = F.gelu if args.gelu else F.relu
    device, small = args.device, args.device != "cuda"
    torch.manual_seed(0)
    model = (Encoder(activation, width=64, ff=128, n_layers=2) if small else Encoder(activation)).to(device)
    batch, seq = (2, 16) if small else (4, 128)
    ids = torch.randint(0, 512, (batch, seq), device=device)
    targets = torch.randint(0, 512, (batch, seq), device=device)
    loss64, grads64, _ = step(model.double(), ids, targets)
    model = model.float()
    backends = [("eager", None), ("miniinductor", "miniinductor")] + ([("inductor", "inductor")] if device == "cuda" else [])
    results = {}
    for name, backend in backends:
        results[name] = loss, grads, pre = step(model, ids, targets, backend)
        worst = ", ".join(f"{n} {e:.2e}" for n, e in relative_errors(grads, grads64))
        print(f"{name:13s} loss {loss:.6f} (f64 {loss64:.6f}) worst grads vs float64: {worst}", flush=True)
    print("miniinductor vs eager fp32:", relative_errors(results["miniinductor"][1], results["eager"][1]))
    for name in ("miniinductor", "inductor"):
        if name in results:
            flips = [int(((a > 0) != (b > 0)).sum()) for a, b in zip(results["eager"][2], results[name][2], strict=True)]
            print(f"ReLU inputs whose sign differs, {name} vs eager, per layer:", flips)
    print("activation:", activation.__name__)
    print("tf32 flags", torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
          torch.get_float32_matmul_precision())


if __name__ == "__main__":
    main()
