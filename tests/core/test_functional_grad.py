"""Gradient sweep over `torch.nn.functional` entry points as models call them, where the
OpInfo sweep (tests/core/test_opinfo_grad.py, at most 2 samples an op) does not reach: functions
with no OpInfo at all (fold, lp_pool, max_pool with indices, affine_grid, upsample,
multi-head attention), and the arguments real models pass that the first samples do not
(attention masks, GQA, label smoothing, ignore_index, padding_idx, align_corners, ...).

Each case compiles one call, takes the gradient of every floating input outside the compiled
call (as training does) and compares outputs and gradients with eager. Tolerances: the
float32 ones of the OpInfo gradient sweep (rtol 1e-4, atol 1e-5): every case sums at most a
few hundred products of magnitude ~1 per gradient element.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import check_grads, randint, randn, randpos

pytestmark = [pytest.mark.sweep,
              pytest.mark.filterwarnings("ignore:`nn.functional.upsample` is deprecated:UserWarning")]
RTOL, ATOL = 1e-4, 1e-5


def g(*shape):
    return randn(*shape, requires_grad=True)


def _mha(query, key, value, key_padding_mask, need_weights):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    out, weights = mha(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights)
    return out if weights is None else (out, weights)


def _padding_mask():
    m = torch.zeros(2, 7, dtype=torch.bool)
    m[0, 5:] = True                                  # the first sequence is 5 long
    return m


#: name -> (function, inputs)
CASES = {
    # attention: what every transformers model and nn.Transformer* layer calls
    "sdpa_bool_mask_gqa": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
                           lambda: (g(2, 4, 6, 8), g(2, 2, 6, 8), g(2, 2, 6, 8), torch.rand(6, 6) > 0.2)),
    "sdpa_float_mask_scale": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5),
                              lambda: (g(2, 3, 5, 8), g(2, 3, 7, 8), g(2, 3, 7, 8), randn(2, 1, 5, 7))),
    "sdpa_causal_3d": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                       lambda: (g(3, 6, 8), g(3, 6, 8), g(3, 6, 8))),
    "mha_padding_mask": (lambda q, k, v: _mha(q, k, v, _padding_mask(), False), lambda: (g(2, 7, 16), g(2, 7, 16), g(2, 7, 16))),
    "mha_need_weights": (lambda q, k, v: _mha(q, k, v, None, True), lambda: (g(2, 5, 16), g(2, 7, 16), g(2, 7, 16))),
    # no OpInfo
    "fold": (lambda x: F.fold(x, output_size=(6, 6), kernel_size=3, padding=1), lambda: (g(2, 4 * 9, 36),)),
    "lp_pool1d": (lambda x: F.lp_pool1d(x, 2, 3, stride=2), lambda: (randpos(2, 3, 10).requires_grad_(),)),
    "lp_pool2d": (lambda x: F.lp_pool2d(x, 3, 2), lambda: (randpos(2, 3, 6, 6).requires_grad_(),)),
    "max_pool2d_with_indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[0], lambda: (g(2, 3, 9, 9),)),
    "max_pool1d_with_indices": (lambda x: F.max_pool1d(x, 2, return_indices=True)[0], lambda: (g(2, 3, 10),)),
    "adaptive_max_pool2d_with_indices": (lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True)[0],
                                         lambda: (g(2, 3, 7, 5),)),
    "affine_grid_grid_sample": (lambda t, x: F.grid_sample(x, F.affine_grid(t, [2, 3, 5, 5], align_corners=False),
                                                            align_corners=False),
                                lambda: (g(2, 2, 3), g(2, 3, 6, 6))),
    "upsample_bilinear": (lambda x: F.upsample(x, scale_factor=2, mode="bilinear", align_corners=True), lambda: (g(2, 3, 4, 5),)),
    # arguments the first OpInfo samples do not pass
    "cross_entropy_label_smoothing_ignore": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, ignore_index=2),
                                             lambda: (g(6, 5), randint(6, low=0, high=5))),
    "cross_entropy_probabilities": (lambda x, t: F.cross_entropy(x, t.softmax(-1)), lambda: (g(4, 5), g(4, 5))),
    "cross_entropy_3d_weight": (lambda x, w, t: F.cross_entropy(x, t, weight=w), lambda: (g(2, 5, 3), randpos(5), randint(2, 3, low=0, high=5))),
    "embedding_padding_idx": (lambda w, i: F.embedding(i, w, padding_idx=1), lambda: (g(10, 4), randint(3, 5, low=0, high=10))),
    "layer_norm_no_affine": (lambda x: F.layer_norm(x, (8,)), lambda: (g(3, 5, 8),)),
    "rms_norm": (lambda x, w: F.rms_norm(x, (8,), w, eps=1e-6), lambda: (g(3, 5, 8), g(8))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda: (g(2, 4, 3, 3), g(4), g(4))),
    "instance_norm": (lambda x: F.instance_norm(x), lambda: (g(2, 3, 5, 5),)),
    "batch_norm_training": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), lambda: (g(4, 3, 5), g(3), g(3))),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3), lambda: (g(2, 5, 4, 4),)),
    "interpolate_bicubic_align": (lambda x: F.interpolate(x, size=(7, 9), mode="bicubic", align_corners=True), lambda: (g(1, 2, 4, 5),)),
    "pad_reflect_circular": (lambda x: F.pad(F.pad(x, (1, 2, 2, 1), mode="reflect"), (1, 1, 1, 1), mode="circular"),
                             lambda: (g(2, 3, 5, 5),)),
    "kl_div_log_target": (lambda x, t: F.kl_div(x, t, reduction="batchmean", log_target=True), lambda: (g(4, 6), g(4, 6))),
    "cosine_similarity_pairwise_distance": (lambda a, b: F.cosine_similarity(a, b, dim=-1) + F.pairwise_distance(a, b),
                                            lambda: (g(5, 8), g(5, 8))),
    "normalize": (lambda x: F.normalize(x, dim=1), lambda: (g(4, 6),)),
    "glu_silu_mish_hardswish": (lambda x: F.hardswish(F.mish(F.silu(F.glu(x)))), lambda: (g(3, 8),)),
    "pixel_shuffle_unshuffle": (lambda x: F.pixel_unshuffle(F.pixel_shuffle(x, 2) * 2, 2), lambda: (g(1, 8, 3, 3),)),
    "dropout_p0_training": (lambda x: F.dropout(x, p=0.0, training=True) * 2, lambda: (g(4, 4),)),
    "softmin_log_softmax_dtype": (lambda x: F.softmin(x, -1) + F.log_softmax(x, 0, dtype=torch.float64).float(),
                                  lambda: (g(4, 5),)),
    "ctc_loss": (lambda lp, t: F.ctc_loss(lp.log_softmax(-1), t, [6, 6], [3, 2]),
                 lambda: (g(6, 2, 5), torch.tensor([[1, 2, 3], [2, 4, 0]]))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_functional_gradients(name):
    fn, make_inputs = CASES[name]
    check_grads(fn, *make_inputs(), rtol=RTOL, atol=ATOL)
