"""F.scaled_dot_product_attention through every CUDA backend, compiled vs eager gradients.

    python benchmarks/sdpa_backends_gpu.py            # needs a GPU

For each of the flash, memory-efficient, cuDNN and math backends (where the GPU supports it),
each case (plain, causal, boolean and float masks, GQA, q/k/v cut from one projection by
split + view + transpose) runs eagerly and through `torch.compile(backend="miniinductor")`;
the outputs and the gradients of q, k and v (or of the projection's input and weight) are
compared. float32 for math and efficient, TF32 off; bfloat16 for flash and cuDNN, which
take no float32: both sides call the same attention kernel, so the tolerance is bf16's
rounding of the ops around it (2 ulp, 1.6e-2 relative). Each case also runs through
PyTorch's own capture executed eagerly (backend="aot_eager"): where that differs from eager as
much as we do, the difference is upstream's (cuDNN's backward given a grad_out strided like
its output, torch 2.11: aot_eager, Inductor and miniinductor all 1.3 off, docs/benchmarks_gpu.md).
Prints one line a case and exits 1 if any fails.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import miniinductor  # noqa: E402

BACKENDS = {"flash": (SDPBackend.FLASH_ATTENTION, torch.bfloat16), "efficient": (SDPBackend.EFFICIENT_ATTENTION, torch.float32),
            "cudnn": (SDPBackend.CUDNN_ATTENTION, torch.bfloat16), "math": (SDPBackend.MATH, torch.float32)}
TOL = {torch.float32: 1e-4, torch.bfloat16: 1.6e-2}


def cases(dtype):
    def t(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=True)
    mask_b = torch.rand(16, 16, device="cuda") > 0.3
    mask_b[:, 0] = True
    return {
        "plain": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (t(2, 4, 16, 64), t(2, 4, 16, 64), t(2, 4, 16, 64))),
        "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                   (t(2, 4, 16, 64), t(2, 4, 16, 64), t(2, 4, 16, 64))),
        "bool_mask": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask_b),
                      (t(2, 4, 16, 64), t(2, 4, 16, 64), t(2, 4, 16, 64))),
        "float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       (t(2, 4, 16, 64), t(2, 4, 16, 64), t(2, 4, 16, 64), t(2, 1, 16, 16))),
        "gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                (t(2, 8, 16, 64), t(2, 2, 16, 64), t(2, 2, 16, 64))),
        "views": (lambda x, w: F.scaled_dot_product_attention(
            *[p.view(2, 16, 4, 64).transpose(1, 2) for p in (x @ w).split(256, -1)], is_causal=True),
            (t(2, 16, 256), t(256, 768))),
    }


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)).item()


def run_case(backend, dtype, fn, inputs, compiler="miniinductor"):
    def attention(*args):
        with sdpa_kernel([backend]):
            return fn(*args)
    torch._dynamo.reset()          # a fresh compile per case (past 8 recompiles Dynamo runs eagerly)
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        if compiler == "aot_eager":
            return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)
        return miniinductor.backend(gm, example_inputs)
    eager_in = [i.detach().clone().requires_grad_(i.requires_grad) for i in inputs]
    comp_in = [i.detach().clone().requires_grad_(i.requires_grad) for i in inputs]
    expected = attention(*eager_in)
    actual = torch.compile(attention, backend=counting_backend, dynamic=False)(*comp_in)
    assert graphs, f"{compiler} compiled nothing: the case ran eagerly"
    grad_out = torch.randn_like(expected)
    expected.backward(grad_out)
    actual.backward(grad_out)
    errors = [rel(actual, expected)] + [rel(c.grad, e.grad) for c, e in zip(comp_in, eager_in) if e.grad is not None]
    return max(errors)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    failed = 0
    for name, (backend, dtype) in BACKENDS.items():
        for case, (fn, inputs) in cases(dtype).items():
            try:
                err = run_case(backend, dtype, fn, inputs)
                aot = run_case(backend, dtype, fn, inputs, compiler="aot_eager")
            except RuntimeError as e:
                if "No available kernel" in str(e) or "not supported" in str(e).lower():
                    print(f"{name:9} {case:10} not supported by this backend here: {str(e).splitlines()[0][:80]}")
                    continue
                raise
            # PyTorch's own capture run eagerly (aot_eager) is the floor: where it differs from
            # eager as much, the difference is upstream's, not the compiler's
            ok = err <= TOL[dtype] or err <= 1.01 * aot
            failed += not ok
            verdict = "ok" if err <= TOL[dtype] else "ok (upstream: aot_eager differs as much)" if ok else "FAIL"
            print(f"{name:9} {case:10} {str(dtype)[6:]:8} max relative error (output, gradients) {err:.2e}, "
                  f"aot_eager {aot:.2e} {verdict}")
    print(f"{failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
