"""`torch.ops.miniinductor.winograd_conv3x3(x, w, b)`: a 3x3, stride-1, padding-1 convolution by
Winograd F(2x2, 3x3) on the CPU (float32), the op lowering/winograd.py puts in place of ATen's.

    V = Bt d B   each 4x4 tile d of the padded input, tiles 2 apart     [16, tiles, C]   (C++)
    U = G g Gt   each 3x3 filter g                                       [16, C, K]       (C++)
    M = V @ U    the 16 products, one batched matmul                     [16, tiles, K]   (ATen bmm: MKL)
    y = At M A   each 2x2 output tile, plus the bias                     [N, K, H, W]     (C++)

The bmm does 16 multiply-adds per tile, channel in and channel out where the direct convolution
does 36 (2.25x fewer). The three transforms are written by hand here (a small C++ template, as
Inductor's `cpp_gemm_template.py` is for GEMMs): each tile element is a vector of 16 channels,
so `x` must be channels-last (lowering gives it that layout; anything else is copied first) and
the output is channels-last. Height and width must be even (no partial tiles). The tiles go
through in blocks (`BLOCK_BYTES`), so that a block's V and M are still in cache when the bmm
and the output transform read them.
"""
from __future__ import annotations

import functools
import threading

import torch

from .cpp_builder import load_kernels

SOURCE = r"""
#include <cstdint>
// x: channels-last [n, h, w, c]; V: [16, n*th*tw, c]. Each tile: 16 loads of up to 16 channels
// (zero outside the image: the padding), Bt d B, 16 stores, one per transform.
extern "C" void mi_wino_input(const float* __restrict__ x, float* __restrict__ V,
                              int64_t n, int64_t h, int64_t w, int64_t c, int64_t p0, int64_t p1) {
    const int64_t th = h / 2, tw = w / 2, S = (p1 - p0) * c;
    #pragma omp parallel for
    for (int64_t p = p0; p < p1; ++p) {
        {
            {
                const int64_t b = p / (th * tw), ty = (p / tw) % th, tx = p % tw;
                const float* src[4][4];
                bool ok[4][4], inside = true;
                for (int j = 0; j < 4; ++j)
                    for (int q = 0; q < 4; ++q) {
                        const int64_t y = 2 * ty + j - 1, xx = 2 * tx + q - 1;
                        ok[j][q] = y >= 0 && y < h && xx >= 0 && xx < w;
                        inside = inside && ok[j][q];
                        src[j][q] = x + ((b * h + (ok[j][q] ? y : 0)) * w + (ok[j][q] ? xx : 0)) * c;
                    }
                float* o = V + (p - p0) * c;
                for (int64_t k = 0; k < c; k += 16) {
                    const int64_t kn = c - k < 16 ? c - k : 16;
                    float d[4][4][16];
                    if (inside && kn == 16) {
                        for (int j = 0; j < 4; ++j)
                            for (int q = 0; q < 4; ++q) {
                                #pragma omp simd
                                for (int64_t l = 0; l < 16; ++l) d[j][q][l] = src[j][q][k + l];
                            }
                    } else {
                        for (int j = 0; j < 4; ++j)
                            for (int q = 0; q < 4; ++q)
                                for (int64_t l = 0; l < 16; ++l) d[j][q][l] = (ok[j][q] && l < kn) ? src[j][q][k + l] : 0.0f;
                    }
                    #pragma omp simd
                    for (int64_t l = 0; l < 16; ++l) {
                        float r[4][4], v[16];
                        for (int q = 0; q < 4; ++q) {            // Bt d: rows
                            r[0][q] = d[0][q][l] - d[2][q][l];
                            r[1][q] = d[1][q][l] + d[2][q][l];
                            r[2][q] = d[2][q][l] - d[1][q][l];
                            r[3][q] = d[1][q][l] - d[3][q][l];
                        }
                        for (int i = 0; i < 4; ++i) {            // (Bt d) B: columns
                            v[i * 4 + 0] = r[i][0] - r[i][2];
                            v[i * 4 + 1] = r[i][1] + r[i][2];
                            v[i * 4 + 2] = r[i][2] - r[i][1];
                            v[i * 4 + 3] = r[i][1] - r[i][3];
                        }
                        if (l < kn)
                            for (int t = 0; t < 16; ++t) o[t * S + k + l] = v[t];
                    }
                }
            }
        }
    }
}

// U: [16, c, kk] from the weight [kk, c, 3, 3] (element strides s0..s3).
extern "C" void mi_wino_weight(const float* __restrict__ wt, float* __restrict__ U, int64_t kk, int64_t c,
                               int64_t s0, int64_t s1, int64_t s2, int64_t s3) {
    #pragma omp parallel for collapse(2)
    for (int64_t o = 0; o < kk; ++o) {
        for (int64_t i = 0; i < c; ++i) {
            float g[3][3], t[4][3];
            for (int j = 0; j < 3; ++j)
                for (int q = 0; q < 3; ++q) g[j][q] = wt[o * s0 + i * s1 + j * s2 + q * s3];
            for (int q = 0; q < 3; ++q) {                        // G g: rows
                t[0][q] = g[0][q];
                t[1][q] = 0.5f * (g[0][q] + g[1][q] + g[2][q]);
                t[2][q] = 0.5f * (g[0][q] - g[1][q] + g[2][q]);
                t[3][q] = g[2][q];
            }
            for (int a = 0; a < 4; ++a) {                        // (G g) Gt: columns
                const float u[4] = {t[a][0], 0.5f * (t[a][0] + t[a][1] + t[a][2]),
                                    0.5f * (t[a][0] - t[a][1] + t[a][2]), t[a][2]};
                for (int e = 0; e < 4; ++e) U[((int64_t)(a * 4 + e) * c + i) * kk + o] = u[e];
            }
        }
    }
}

// y: channels-last [n, h, w, kk] from M [16, n*th*tw, kk]: At M A, plus bias[kk] (when not null).
extern "C" void mi_wino_output(const float* __restrict__ M, const float* __restrict__ bias, float* __restrict__ y,
                               int64_t n, int64_t h, int64_t w, int64_t kk, int64_t p0, int64_t p1) {
    const int64_t th = h / 2, tw = w / 2, S = (p1 - p0) * kk;
    #pragma omp parallel for
    for (int64_t p = p0; p < p1; ++p) {
        {
            {
                const int64_t b = p / (th * tw), ty = (p / tw) % th, tx = p % tw;
                const float* m = M + (p - p0) * kk;
                for (int64_t k = 0; k < kk; k += 16) {
                    const int64_t kn = kk - k < 16 ? kk - k : 16;
                    float s[2][4][16];
                    for (int q = 0; q < 4; ++q) {                // At M: rows
                        #pragma omp simd
                        for (int64_t l = 0; l < 16; ++l) {
                            const bool in = l < kn;
                            const float a0 = in ? m[(0 * 4 + q) * S + k + l] : 0.f, a1 = in ? m[(1 * 4 + q) * S + k + l] : 0.f;
                            const float a2 = in ? m[(2 * 4 + q) * S + k + l] : 0.f, a3 = in ? m[(3 * 4 + q) * S + k + l] : 0.f;
                            s[0][q][l] = a0 + a1 + a2;
                            s[1][q][l] = a1 - a2 - a3;
                        }
                    }
                    for (int a = 0; a < 2; ++a) {                // (At M) A: columns, two output pixels
                        float* o0 = y + ((b * h + 2 * ty + a) * w + 2 * tx) * kk + k;
                        float* o1 = o0 + kk;
                        #pragma omp simd
                        for (int64_t l = 0; l < kn; ++l) {
                            const float bb = bias ? bias[k + l] : 0.f;
                            o0[l] = s[a][0][l] + s[a][1][l] + s[a][2][l] + bb;
                            o1[l] = s[a][1][l] - s[a][2][l] - s[a][3][l] + bb;
                        }
                    }
                }
            }
        }
    }
}
"""


@functools.cache
def _kernels() -> dict:
    return load_kernels(SOURCE, {"mi_wino_input": (2, 6), "mi_wino_weight": (2, 6), "mi_wino_output": (3, 6)})


_local = threading.local()
#: V's size for one block of tiles (and M's): transformed, multiplied and transformed back while
#: in cache. [8, 64, 32, 32] by 64 filters, ms a call: all tiles at once (16 MB of V and M) 2.76,
#: 2 MB blocks 2.24-2.35, 1 MB 2.50-2.62, 128 KB 4.4 (each block costs ~30 us of parallel-region
#: and bmm start-up); the direct convolution 2.76-2.86 (scratch `wblock*.py`)
BLOCK_BYTES = 2 << 20


def _workspace(tiles: int, c: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """V, U and M, kept per thread and size between calls, as oneDNN keeps its scratchpads: V
    and M are 16 x tiles x channels (8 MB each for 64 channels of 8 x 32 x 32), and allocated
    anew each call glibc handed them back to the OS and page-faulted them in again (115 to 3686
    faults a call, the op 2.2x slower: docs/benchmarks.md, "Winograd")."""
    cache = _local.__dict__.setdefault("buffers", {})
    key = (tiles, c, k)
    if key not in cache:
        cache[key] = (torch.empty(16, tiles, c), torch.empty(16, c, k), torch.empty(16, tiles, k))
    return cache[key]


def _out_like(x: torch.Tensor, k: int) -> torch.Tensor:
    n, _, h, w = x.shape   # [n, k, h, w], channels-last
    return torch.empty_strided((n, k, h, w), (h * w * k, 1, w * k, k), dtype=x.dtype, device=x.device)


def winograd_conv3x3_out(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
    """conv2d(x, w, b, padding=1) written into `out` ([n, k, h, w], channels-last)."""
    n, c, h, wd = x.shape
    k = w.shape[0]
    if x.dtype != torch.float32 or w.dtype != torch.float32 or x.device.type != "cpu" or h % 2 or wd % 2 or tuple(w.shape[1:]) != (c, 3, 3):
        raise ValueError(f"winograd_conv3x3: float32 CPU [n, c, h, w] with even h, w and a [k, c, 3, 3] weight; "
                         f"got x {tuple(x.shape)} {x.dtype} on {x.device}, w {tuple(w.shape)}")
    if not out.is_contiguous(memory_format=torch.channels_last) or tuple(out.shape) != (n, k, h, wd):
        raise ValueError(f"winograd_conv3x3: out must be channels-last {(n, k, h, wd)}")
    x = x.contiguous(memory_format=torch.channels_last)
    tiles = n * (h // 2) * (wd // 2)
    block = max(1, min(tiles, BLOCK_BYTES // (16 * 4 * max(c, k))))
    V, U, M = _workspace(block, c, k)   # [16, block, c], [16, c, k], [16, block, k]
    kern = _kernels()
    kern["mi_wino_weight"](w.data_ptr(), U.data_ptr(), k, c, *w.stride())
    bias = b.contiguous() if b is not None else None
    for p0 in range(0, tiles, block):     # a block of tiles at a time: V and M stay in cache
        p1 = min(tiles, p0 + block)
        v = V.view(-1)[:16 * (p1 - p0) * c].view(16, p1 - p0, c)   # contiguous: the kernels' layout
        m = M.view(-1)[:16 * (p1 - p0) * k].view(16, p1 - p0, k)
        kern["mi_wino_input"](x.data_ptr(), v.data_ptr(), n, h, wd, c, p0, p1)
        torch.bmm(v, U, out=m)
        kern["mi_wino_output"](m.data_ptr(), bias.data_ptr() if bias is not None else 0, out.data_ptr(), n, h, wd, k, p0, p1)
    return out


@torch.library.custom_op("miniinductor::winograd_conv3x3", mutates_args=())
def winograd_conv3x3(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """conv2d(x, w, b, padding=1) by Winograd F(2x2, 3x3); the output channels-last."""
    return winograd_conv3x3_out(x, w, b, _out_like(x, w.shape[0]))


@winograd_conv3x3.register_fake
def _(x, w, b):
    return _out_like(x, w.shape[0])
