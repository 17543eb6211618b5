"""Scatters on the GPU (ext/scatter): eager vs Inductor (torch.compile default) vs ours.

    python benchmarks/scatter_gpu.py                 # CUDA, full sizes
    python benchmarks/scatter_gpu.py --device cpu    # dry run: small sizes, C++ kernels, wall clock

Workloads:
  - token embedding + LayerNorm, forward and backward: nn.Embedding(50257, 768) (GPT-2's
    vocabulary) then nn.LayerNorm(768) on a batch of 8x1024 tokens; the backward of a given
    output gradient (the weight's gradient is embedding_dense_backward: a zero fill and an
    atomic-add scatter in ours and in Inductor);
  - scatter_add: rows of a [8192, 768] source added into a [50257, 768] tensor along dim 0
    (an index of the source's shape, values in [0, 50257));
  - index_add: the same rows by one index vector of 8192 rows (dim 0).

Each row: the median ms per call (`triton.testing.do_bench` on CUDA; on the CPU the median of
timed calls, C++ kernels, no Inductor: only to check that the script works), then ours / Inductor and ours / eager
(below 1: ours is faster). Every compiled result is checked against eager first. Float32
throughout; the atomic adds make the sums' order vary from run to run (as Inductor's and
eager CUDA's do), hence the tolerances of the check.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("MINIINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mi_cache_"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind_cache_"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import miniinductor  # noqa: E402

SIZES = {"cuda": dict(vocab=50257, dim=768, batch=8, seq=1024),
         "cpu": dict(vocab=1000, dim=64, batch=2, seq=128)}


class EmbeddingLayerNorm(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb, self.norm = nn.Embedding(vocab, dim), nn.LayerNorm(dim)

    def forward(self, tokens):
        return self.norm(self.emb(tokens))


def bench(fn, device) -> float:
    """Median ms per call."""
    if device.type == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn, return_mode="median")
    fn()
    times = []
    for _ in range(10):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def embedding_layernorm(device, s):
    torch.manual_seed(0)
    model = EmbeddingLayerNorm(s["vocab"], s["dim"]).to(device)
    tokens = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), device=device)
    grad = torch.randn(s["batch"], s["seq"], s["dim"], device=device)

    def make(run):
        def step():
            model.zero_grad(set_to_none=True)
            run(tokens).backward(grad)
            return model.emb.weight.grad
        return step
    return model, make


def scatter_like(op, device, s):
    torch.manual_seed(0)
    rows = s["batch"] * s["seq"]
    x = torch.randn(s["vocab"], s["dim"], device=device)
    src = torch.randn(rows, s["dim"], device=device)
    if op == "scatter_add":
        index = torch.randint(0, s["vocab"], (rows, 1), device=device).expand(rows, s["dim"]).contiguous()
        fn = lambda x, i, v: torch.scatter_add(x, 0, i, v)  # noqa: E731
    else:
        index = torch.randint(0, s["vocab"], (rows,), device=device)
        fn = lambda x, i, v: x.index_add(0, i, v)  # noqa: E731
    return fn, (x, index, src)


def rows_of(device, s):
    """(name, {backend: a call}) for each workload."""
    model, make = embedding_layernorm(device, s)
    yield "embedding+layernorm fwd+bwd", {
        "eager": make(model),
        "inductor": make(torch.compile(model)) if device.type == "cuda" else None,
        "ours": make(miniinductor.compile(model)),
    }
    for op in ("scatter_add", "index_add"):
        fn, args = scatter_like(op, device, s)
        yield op, {
            "eager": _caller(fn, args),
            "inductor": _caller(torch.compile(fn), args) if device.type == "cuda" else None,
            "ours": _caller(miniinductor.compile(fn), args),
        }


def _caller(fn, args):
    return lambda: fn(*args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    device = torch.device(parser.parse_args().device)
    s = SIZES[device.type]
    print(f"{device}: {s}")
    print(f"{'workload':30s} {'eager ms':>9s} {'inductor ms':>12s} {'ours ms':>9s} {'ours/ind':>9s} {'ours/eager':>10s}")
    for name, calls in rows_of(device, s):
        expected = calls["eager"]().clone()
        for backend in ("ours", "inductor"):
            if calls[backend] is not None:
                torch.testing.assert_close(calls[backend](), expected, rtol=1e-4, atol=1e-4,
                                           msg=lambda m, b=backend: f"{name}, {b}: {m}")
        ms = {b: bench(call, device) if call is not None else None for b, call in calls.items()}
        ratio_ind = f"{ms['ours'] / ms['inductor']:9.2f}" if ms["inductor"] else f"{'-':>9s}"
        ind = f"{ms['inductor']:12.3f}" if ms["inductor"] else f"{'-':>12s}"
        print(f"{name:30s} {ms['eager']:9.3f} {ind} {ms['ours']:9.3f} {ratio_ind} {ms['ours'] / ms['eager']:10.2f}")


if __name__ == "__main__":
    main()
