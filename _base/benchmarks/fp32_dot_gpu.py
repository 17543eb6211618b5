"""Float32 matmuls in Triton: which `tl.dot` precision reaches cuBLAS's IEEE float32, at what error.

    python benchmarks/fp32_dot_gpu.py            # GPU: the MLP's two shapes, x @ W.t()
    python benchmarks/fp32_dot_gpu.py --smoke    # CPU, Triton's interpreter, tiny: does it run?

A plain Triton matmul (no template, no epilogue) of `x @ W.t()` -- a Linear's weight, K
contiguous -- with each `input_precision`: "ieee" (FMA units), "tf32x3" (each operand split
into a TF32 number and a TF32 remainder; big*big + big*small + small*big on the tensor cores)
and "tf32" (one TF32 product). For each, the fastest of a few tile configs against cuBLAS with
TF32 off (`torch.backends.cuda.matmul.allow_tf32 = False`, eager's default), and the error of
both against a float64 product: max |C - C64| / max |C64| and the median relative error.
Then inf, NaN, a near-overflow and a subnormal operand through "ieee" and "tf32x3": the
result's inf/NaN pattern against cuBLAS's. This is the measurement behind the option
`gemm_fp32_precision` (codegen/triton_template.py); figures in docs/benchmarks_gpu.md.
"""
from __future__ import annotations

import os
import sys
import time

if "--smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

SMOKE = "--smoke" in sys.argv
DEVICE = "cpu" if SMOKE else "cuda"
PRECISIONS = ("ieee", "tf32x3", "tf32")
#: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
CONFIGS = [(16, 16, 16, 1, 1)] if SMOKE else [
    (128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (128, 128, 64, 8, 3), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (256, 128, 32, 8, 3), (128, 128, 32, 4, 4), (64, 64, 32, 4, 4), (128, 256, 64, 8, 2), (64, 256, 32, 8, 3)]


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, PRECISION: tl.constexpr,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """C[M, N] = A @ B, one BM x BN tile a program, grouped along M; M, N, K multiples of the blocks."""
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pm = first_m + (pid % (GROUP_M * tiles_n)) % group_m
    pn = (pid % (GROUP_M * tiles_n)) // group_m
    rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)   # [BM, BK]
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)   # [BK, BN]
        acc += tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


def launcher(a, b, precision, config):
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty(M, N, device=a.device)
    bm, bn, bk, warps, stages = config
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    return (lambda: matmul[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), precision, bm, bn, bk, 8,
                                 num_warps=warps, num_stages=stages)), c


def ms(fn) -> float:
    if SMOKE:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    from triton.testing import do_bench
    return do_bench(fn, warmup=10, rep=50)


def error(c, c64) -> tuple[float, float]:
    """(max |c - c64| / max |c64|, median |c - c64| / max(|c64|, 1e-3))"""
    d = (c.double() - c64).abs()
    return (d.max() / c64.abs().max()).item(), (d / c64.abs().clamp_min(1e-3)).median().item()


def speed_and_error():
    torch.backends.cuda.matmul.allow_tf32 = False
    for M, K, N in [(32, 32, 32)] if SMOKE else [(4096, 1024, 4096), (4096, 4096, 1024)]:
        torch.manual_seed(0)
        x, w = torch.randn(M, K, device=DEVICE), torch.randn(N, K, device=DEVICE) / K ** 0.5   # w: a Linear's [N, K]
        c64 = x.double() @ w.double().t()
        cublas_ms, (cublas_max, cublas_median) = ms(lambda: x @ w.t()), error(x @ w.t(), c64)
        print(f"x[{M}, {K}] @ W.t() (W [{N}, {K}]): {'torch' if SMOKE else 'cuBLAS'} float32 {cublas_ms:.4f} ms, "
              f"error max {cublas_max:.2e}, median {cublas_median:.2e}")
        for precision in PRECISIONS:
            runs = []
            for config in CONFIGS:
                fn, c = launcher(x, w.t(), precision, config)
                fn()
                runs.append((ms(fn), config, error(c, c64)))
            best_ms, config, (err_max, err_median) = min(runs)
            print(f"  {precision:7s} {best_ms:.4f} ms {config}: {cublas_ms / best_ms:.2f}x cuBLAS, "
                  f"error max {err_max:.2e}, median {err_median:.2e}")


def special_values():
    for label, value in (("inf", float("inf")), ("nan", float("nan")), ("3e38", 3e38), ("1e-40", 1e-40)):
        torch.manual_seed(1)
        a, b = torch.randn(16, 16, device=DEVICE), torch.randn(16, 16, device=DEVICE).abs() + 0.1
        a[2, 5] = value
        reference = a @ b
        for precision in ("ieee", "tf32x3"):
            fn, c = launcher(a, b, precision, (16, 16, 16, 1, 1))
            fn()
            same = all(torch.equal(f(c), f(reference)) for f in (torch.isnan, torch.isinf))
            print(f"  a[2, 5] = {label:6s} {precision:7s} row 2: {[f'{v:.4g}' for v in c[2, :3].tolist()]}, "
                  f"inf/NaN where eager's are: {same}")
            assert same, (label, precision)


if __name__ == "__main__":
    speed_and_error()
    special_values()
