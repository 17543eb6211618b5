"""Compile time against graph size: a stack of N GPT-2 blocks, cold caches, on the CPU.

    python benchmarks/compile_scaling.py                       # N = 1, 4, 16, 32, 64; ours and Inductor
    python benchmarks/compile_scaling.py --sizes 16 32 64 --backends miniinductor --phases
    python benchmarks/compile_scaling.py --model opt --sizes 4 [--train]   # the OPT-style decoder

Each (N, backend) runs in a fresh process with empty MINIINDUCTOR_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR and times the first call of `torch.compile(blocks)` (Dynamo,
AOTAutograd, lowering, scheduling, codegen, the C++ build, one run) on a [2, 32, 128]
input, width 128, 4 heads, eval, no grad. The table gives seconds and the ratio to the
previous size: a compiler that scales linearly doubles its time when N doubles.
`--model opt`: an OPT-style decoder of N layers instead (width 256, 4 heads, ReLU MLP,
learned positions from the cumsum of the attention mask, additive causal mask, tied LM
head, vocabulary 1000), on [2, 64] token ids; `--train` adds the backward.

`--phases` (ours only) splits our first call into CPU seconds per phase, which other
processes on the machine disturb far less than wall-clock time: dynamo (Dynamo's trace and
what is left over), aot (AOTAutograd with our decompositions), lower, schedule, kernels
(code generation), wrapper (memory plan and wrapper source), g++ (the C++ build, a child
process), load (importing the wrapper, less the build).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def opt_decoder(n_layers: int):
    """A cut-down HuggingFace OPTForCausalLM (pre-LayerNorm, OPT-125m's layout at width 256)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, d=256, h=4):
            super().__init__()
            self.h, self.ln1, self.ln2 = h, nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, mask):
            B, T, C = x.shape
            y = self.ln1(x)
            q, k, v = ((f(y) * s).view(B, T, self.h, -1).transpose(1, 2)
                       for f, s in ((self.q, (C // self.h) ** -0.5), (self.k, 1), (self.v, 1)))
            w = torch.max(q @ k.transpose(2, 3) + mask, torch.tensor(torch.finfo(x.dtype).min))
            x = x + self.out((F.softmax(w, dim=-1) @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.fc2(F.relu(self.fc1(self.ln2(x))))

    class OPT(nn.Module):
        def __init__(self, vocab=1000, d=256):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(512 + 2, d)  # OPT's offset 2
            self.layers = nn.ModuleList(Layer(d) for _ in range(n_layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tokens.weight

        def forward(self, ids, attention_mask):
            T, low = ids.shape[1], torch.finfo(torch.float32).min
            positions = torch.cumsum(attention_mask, dim=1) * attention_mask - 1
            x = self.tokens(ids) + self.positions(positions + 2)
            mask = torch.full((T, T), low, device=ids.device).triu(1) + (1.0 - attention_mask[:, None, None, :].float()) * low
            for layer in self.layers:
                x = layer(x, mask)
            return self.head(self.ln(x))
    ids = torch.randint(0, 1000, (2, 64))
    return OPT(), (ids, torch.ones_like(ids))


PHASES = ["dynamo", "aot", "lower", "schedule", "kernels", "wrapper", "g++", "load"]


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the compiler)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_phases() -> dict:
    """Wrap the driver's passes so that each adds its CPU seconds to the returned dict
    (an outer phase's total excludes the inner phases it calls)."""
    from miniinductor import compile_fx
    from miniinductor.codegen import wrapper
    from miniinductor.runtime import cpp_builder
    spent, stack = dict.fromkeys(PHASES, 0.0), []

    def timed(phase, fn):
        def run(*args, **kwargs):
            stack.append(0.0)
            start = cpu_seconds()
            try:
                return fn(*args, **kwargs)
            finally:
                total, inner = cpu_seconds() - start, stack.pop()
                spent[phase] += total - inner
                if stack:
                    stack[-1] += total
        return run
    for module, name, phase in [(compile_fx, "compile_fx", "aot"), (compile_fx, "lower", "lower"),
                                (compile_fx, "schedule", "schedule"), (compile_fx, "generate_kernels", "kernels"),
                                (wrapper.WrapperCodeGen, "memory_plan", "wrapper"),
                                (wrapper.WrapperCodeGen, "generate", "wrapper"),
                                (compile_fx, "load_wrapper", "load"), (cpp_builder, "build", "g++")]:
        setattr(module, name, timed(phase, getattr(module, name)))
    return spent


def child(n_blocks: int, backend: str, phases: bool, model_name="gpt2", train=False) -> tuple[float, dict]:
    import torch

    import miniinductor  # noqa: F401  (registers the backend)
    from miniinductor.models import GPT2Block
    spent = time_phases() if phases else {}
    torch.manual_seed(0)
    if model_name == "opt":
        model, inputs = opt_decoder(n_blocks)
    else:
        model, inputs = torch.nn.Sequential(*[GPT2Block(128, 4) for _ in range(n_blocks)]), (torch.randn(2, 32, 128),)
    model.train(train)
    compiled = torch.compile(model, backend=backend)
    start, cpu_start = time.perf_counter(), cpu_seconds()
    with torch.set_grad_enabled(train):
        out = compiled(*inputs)
        if train:
            out.sum().backward()
    seconds = time.perf_counter() - start
    if phases:
        spent["dynamo"] = cpu_seconds() - cpu_start - sum(spent.values())
    return seconds, spent


def run(n_blocks: int, backend: str, timeout: float, phases: bool = False, extra=()) -> tuple[float | None, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MINIINDUCTOR_CACHE_DIR": f"{tmp}/mi", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/ind",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, __file__, "--child", str(n_blocks), backend]
                              + ["--phases"] * phases + list(extra), env=env, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        print(f"{backend} N={n_blocks} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None, {}
    seconds, spent = json.loads(lines[-1][len("RESULT "):])
    return seconds, spent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 32, 64])
    parser.add_argument("--backends", nargs="+", default=["miniinductor", "inductor"])
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--phases", action="store_true", help="CPU seconds per phase of our compile")
    parser.add_argument("--model", choices=["gpt2", "opt"], default="gpt2")
    parser.add_argument("--train", action="store_true", help="compile forward and backward (a training step)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT", json.dumps(child(int(args.child[0]), args.child[1], args.phases, args.model, args.train)))
        return
    results = {b: {} for b in args.backends}
    breakdown = {}
    print(f"{'N':>4} " + " ".join(f"{b:>22}" for b in args.backends))
    for n in args.sizes:
        cells = []
        for backend in args.backends:
            seconds, spent = run(n, backend, args.timeout, args.phases and backend == "miniinductor",
                                 ["--model", args.model] + ["--train"] * args.train)
            results[backend][n] = seconds
            if spent:
                breakdown[n] = spent
            previous = [results[backend][m] for m in args.sizes if m < n and results[backend].get(m)]
            ratio = f" (x{seconds / previous[-1]:.2f})" if seconds and previous else ""
            cells.append(f"{seconds:8.1f} s{ratio:>10}" if seconds else f"{'failed':>22}")
        print(f"{n:>4} " + " ".join(f"{c:>22}" for c in cells), flush=True)
    if breakdown:
        print("\nCPU seconds per phase of our compile:\n" + f"{'N':>4} " + " ".join(f"{p:>8}" for p in PHASES)
              + f" {'total':>8}")
        for n, spent in breakdown.items():
            print(f"{n:>4} " + " ".join(f"{spent[p]:8.2f}" for p in PHASES) + f" {sum(spent.values()):8.2f}")
        results["phases"] = breakdown
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
