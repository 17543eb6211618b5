"""The common test template: small functions compiled and compared with eager.

Every case is a ``Case(name, fn, make_inputs)``; ``make_inputs`` is called after
the per-test seed is set, so inputs are fresh random tensors (never all
zeros).  ``check()`` (tests/conftest.py) compares values, shapes, dtypes,
strides, input mutations and aliasing with eager; cases marked
``inductor=True`` are also compared with the real Inductor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from conftest import (
    USING_MINIINDUCTOR,
    check,
    check_grads,
    compile_fn,
    metrics,
    randbool,
    randint,
    randn,
    randpos,
    requires_miniinductor,
)

inf = math.inf
nan = math.nan


@dataclass
class Case:
    name: str
    fn: Callable
    make_inputs: Callable[[], tuple]
    inductor: bool = False          # also compare with torch.compile(backend="inductor")
    rtol: float | None = None
    atol: float | None = None
    marks: list = field(default_factory=list)


CASES: list[Case] = []


def case(name, fn, make_inputs, **kw):
    CASES.append(Case(name, fn, make_inputs, **kw))


def special_values(dtype=torch.float32):
    """Signed zeros, infinities, NaN, halves (rounding), tiny and large values."""
    v = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, inf, -inf, nan,
         1e-30, -1e-30, 80.0, -80.0, 3.7, -3.7, 1e4, -1e4]
    return torch.tensor(v, dtype=dtype)


def with_nans(*shape):
    x = randn(*shape)
    x.view(-1)[:: 3] = nan
    return x


# --------------------------------------------------------------------------
# broadcasting, scalars, 0-d tensors
# --------------------------------------------------------------------------
case("bcast_row", lambda x, y: x + y, lambda: (randn(4, 8), randn(8)), inductor=True)
case("bcast_col_row", lambda x, y: x * y, lambda: (randn(4, 1), randn(1, 8)))
case("bcast_3d", lambda x, y: x - y, lambda: (randn(2, 1, 5), randn(3, 1)))
case("bcast_size1_dims", lambda x, y: x * y + 1, lambda: (randn(1, 5, 1), randn(3, 1, 4)))
case("python_float_scalar", lambda x: x * 2.5 + 1, lambda: (randn(4, 5),))
case("python_int_scalar_on_int", lambda x: x * 3 - 7, lambda: (randint(4, 5),))
case("python_float_scalar_on_int", lambda x: x * 0.5, lambda: (randint(4, 5),))
case("python_scalar_rsub_rdiv", lambda x: 1 - x + 2 / x, lambda: (randpos(6),))
case("zero_dim_float", lambda x, s: x * s + s, lambda: (randn(4, 5), randn(())))
case("zero_dim_int_with_float", lambda x, s: x * s, lambda: (randn(4, 5), torch.tensor(3)))
case("zero_dim_double_keeps_float32", lambda x, s: x + s,
     lambda: (randn(4, 5), torch.tensor(2.0, dtype=torch.float64)))
case("zero_dim_only", lambda a, b: (a * b).exp() + 1, lambda: (randn(()), randn(())))
case("zero_dim_sum_output", lambda x: x.sum(), lambda: (randn(3, 4),))
case("zero_dim_input_and_scalar", lambda s: torch.sigmoid(s) * 3, lambda: (randn(()),))

# --------------------------------------------------------------------------
# non-contiguous inputs
# --------------------------------------------------------------------------
case("input_transposed", lambda x: x * 2 + 1, lambda: (randn(6, 4).t(),), inductor=True)
case("input_transposed_plus_contig", lambda x, y: x + y, lambda: (randn(5, 4).t(), randn(4, 5)))
case("input_slice_step", lambda x: x.sin() * 2, lambda: (randn(8, 10)[::2, 1::3],))
case("input_expanded", lambda x, y: x + y, lambda: (randn(1, 5).expand(4, 5), randn(4, 5)))
case("input_expanded_reduce", lambda x: x.sum(0), lambda: (randn(5, 1).expand(5, 6),))
case("input_permuted_reduce", lambda x: x.sum(1), lambda: (randn(2, 3, 4).permute(2, 0, 1),))
case("input_storage_offset", lambda x: x * x, lambda: (randn(20)[3:15].view(3, 4),))
case("input_channels_last", lambda x: x.relu() + 1,
     lambda: (randn(2, 3, 4, 5).to(memory_format=torch.channels_last),))
case("input_permuted_pointwise_keeps_layout", lambda x: x * 3,
     lambda: (randn(3, 4, 5).permute(2, 0, 1),))

# --------------------------------------------------------------------------
# views inside the compiled function
# --------------------------------------------------------------------------
case("view_merge", lambda x: x.view(6, 4) * 2, lambda: (randn(2, 3, 4),))
case("view_split", lambda x: x.view(2, 3, 4).sum(1), lambda: (randn(6, 4),))
case("view_merge_split", lambda x: (x.view(4, 6) + 1).view(3, 8), lambda: (randn(2, 12),))
case("reshape_of_transposed", lambda x: x.t().reshape(-1) + 1, lambda: (randn(3, 5),))
case("permute", lambda x: x.permute(2, 0, 1) * 3, lambda: (randn(2, 3, 4),))
case("permute_contiguous", lambda x: (x + 1).permute(1, 2, 0).contiguous(), lambda: (randn(2, 3, 4),))
case("expand", lambda x, y: x.expand(4, 6) + y, lambda: (randn(4, 1), randn(4, 6)))
case("slice_steps", lambda x: x[::2, 1:-1:3] * 2, lambda: (randn(8, 11),))
case("slice_negative_end", lambda x: x[:, :-2] + x[:, 2:], lambda: (randn(4, 9),), inductor=True)
case("select", lambda x: x[1] + x[:, 2] + x[-1], lambda: (randn(4, 4),))
case("squeeze_unsqueeze", lambda x: x.squeeze(1).unsqueeze(0) + 1, lambda: (randn(3, 1, 4),))
case("as_strided_windows", lambda x: torch.as_strided(x, (4, 3), (2, 1)) * 2, lambda: (randn(12),))
case("as_strided_offset", lambda x: torch.as_strided(x, (2, 2), (1, 3), 2) + 1, lambda: (randn(12),))
case("t", lambda x, y: x.t() + y, lambda: (randn(3, 5), randn(5, 3)))
case("flatten", lambda x: x.flatten(1) * 2, lambda: (randn(2, 3, 4),))
case("unbind", lambda x: (lambda a, b, c: a * b + c)(*x.unbind(0)), lambda: (randn(3, 4, 5),))
case("split", lambda x: sum(p * (i + 1) for i, p in enumerate(x.split(2, dim=1))),
     lambda: (randn(4, 6),))
case("chunk_uneven", lambda x: tuple(c * 2 for c in x.chunk(3)), lambda: (randn(7, 3),))
case("transpose_contiguous", lambda x: x.transpose(0, 1).contiguous(), lambda: (randn(4, 6),))
case("diagonal", lambda x: x.diagonal() * 2 + x.diagonal(1).sum(), lambda: (randn(5, 5),))
case("narrow", lambda x: x.narrow(1, 1, 3) * 2, lambda: (randn(4, 6),))
case("unfold_view", lambda x: x.unfold(0, 3, 2).sum(-1), lambda: (randn(9),))
case("view_dtype_preserving_chain", lambda x: x.view(-1).view(3, 4).t().reshape(2, 6) * 2,
     lambda: (randn(12),))

# --------------------------------------------------------------------------
# reductions: every dim, with and without keepdim
# --------------------------------------------------------------------------
REDUCTIONS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k),
    "prod": lambda x, d, k: x.prod(d, keepdim=k),
    "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "amax": lambda x, d, k: x.amax(d, keepdim=k),
    "amin": lambda x, d, k: x.amin(d, keepdim=k),
    "argmax": lambda x, d, k: x.argmax(d, keepdim=k),
    "argmin": lambda x, d, k: x.argmin(d, keepdim=k),
    "any": lambda x, d, k: (x > 1.0).any(d, keepdim=k),
    "all": lambda x, d, k: (x > -1.5).all(d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k),
    "var_correction0": lambda x, d, k: x.var(d, keepdim=k, correction=0),
    "std": lambda x, d, k: x.std(d, keepdim=k),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    "norm2": lambda x, d, k: torch.linalg.vector_norm(x, 2, d, keepdim=k),
    "norm1": lambda x, d, k: x.norm(p=1, dim=d, keepdim=k),
    "norm_inf": lambda x, d, k: torch.linalg.vector_norm(x, inf, d, keepdim=k),
}
_IND_RED = {("sum", False), ("var", True), ("argmax", False), ("logsumexp", True)}
for _name, _op in REDUCTIONS.items():
    for _k in (False, True):
        case(f"reduce_{_name}_keepdim{int(_k)}",
             (lambda op, k: lambda x: tuple(op(x, d, k) for d in range(x.dim())))(_op, _k),
             lambda: (randn(3, 4, 5),), inductor=(_name, _k) in _IND_RED)

case("reduce_full_sum_mean_amax", lambda x: (x.sum(), x.mean(), x.amax(), x.amin()),
     lambda: (randn(6, 7),))
case("reduce_full_arg_any_all", lambda x: (x.argmax(), x.argmin(), (x > 2).any(), (x > -3).all()),
     lambda: (randn(6, 7),))
case("reduce_full_var_std_prod", lambda x: (x.var(), x.std(correction=0), x.prod()),
     lambda: (randpos(6, 7) * 0.5 + 0.5,))
case("reduce_multi_dim", lambda x: (x.sum((0, 2)), x.mean((1, 2), keepdim=True), x.amax((0, 1))),
     lambda: (randn(3, 4, 5),))
# 1025-long rows: accumulation order differs from eager's (vectorised, blocked), hence atol.
case("reduce_long_rows", lambda x: (x.sum(1), x.var(1), x.amax(1)), lambda: (randn(37, 1025),),
     rtol=1e-5, atol=1e-4, inductor=True)
case("reduce_full_large", lambda x: (x.sum(), x.mean()), lambda: (randn(100, 100),),
     rtol=1e-5, atol=1e-4)
case("reduce_transposed_input", lambda x: (x.sum(0), x.sum(1), x.amax(0)), lambda: (randn(6, 9).t(),))
case("argmax_ties_first_index", lambda x: (x.argmax(1), x.argmin(0), x.argmax()),
     lambda: (randint(4, 10, low=0, high=3).float(),))
case("amax_argmax_nan", lambda x: (x.amax(1), x.argmax(1), x.sum(1)), lambda: (with_nans(4, 5),))
case("reduce_bool_sum_int", lambda x: ((x > 0).sum(1), x.long().sum(0), x.int().prod(1)),
     lambda: (randint(3, 6, low=-3, high=4),))
case("sum_dtype_arg", lambda x: x.sum(1, dtype=torch.float64), lambda: (randn(4, 5),))
case("softmax_each_dim", lambda x: tuple(torch.softmax(x, d) for d in range(3)),
     lambda: (randn(3, 4, 5),), inductor=True)
case("log_softmax_each_dim", lambda x: tuple(F.log_softmax(x, d) for d in range(3)),
     lambda: (randn(3, 4, 5),))
case("softmax_large_values", lambda x: torch.softmax(x * 50, -1), lambda: (randn(4, 33),))
case("layer_norm_affine", lambda x, w, b: F.layer_norm(x, (5,), w, b),
     lambda: (randn(3, 4, 5), randn(5), randn(5)), inductor=True)
case("layer_norm_two_dims", lambda x: F.layer_norm(x, (4, 5)), lambda: (randn(3, 4, 5),))
case("norm_full", lambda x: (x.norm(), torch.linalg.vector_norm(x, 3.0)), lambda: (randn(5, 6),))

# --------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------
case("int64_plus_float", lambda a, b: a + b, lambda: (randint(4, 5), randn(4, 5)))
case("int32_plus_int64", lambda a, b: a * b + a, lambda: (randint(4, 5, dtype=torch.int32), randint(5)))
case("bool_mask_mul", lambda x, y: x * (y > 0), lambda: (randn(4, 5), randn(4, 5)))
case("bool_plus_bool", lambda a, b: (a + b, a & b, a.float() + b), lambda: (randbool(6), randbool(6)))
case("float64_math", lambda x: (x.sin() * 2).exp() - x.double(), lambda: (randn(4, 5, dtype=torch.float64),))
case("float64_reduce", lambda x: (x.sum(1), x.var(0)), lambda: (randn(4, 5, dtype=torch.float64),))
case("float16_chain", lambda x: (x * 2 + 1).sigmoid() * x, lambda: (randn(4, 8, dtype=torch.float16),),
     inductor=True)
case("float16_reduce", lambda x: (x.sum(1), x.amax(0), torch.softmax(x, -1)),
     lambda: (randn(4, 8, dtype=torch.float16),))
case("bfloat16_chain", lambda x, y: F.gelu(x * y + 1), lambda: (randn(4, 8, dtype=torch.bfloat16),
                                                                  randn(8, dtype=torch.bfloat16)))
case("bfloat16_softmax_layernorm", lambda x: (torch.softmax(x, -1), F.layer_norm(x, (8,))),
     lambda: (randn(4, 8, dtype=torch.bfloat16),))
case("float16_plus_float32_promotes", lambda a, b: a + b,
     lambda: (randn(4, 5, dtype=torch.float16), randn(4, 5)))
case("uint8_wraps", lambda a: (a + 200, a * 3), lambda: (randint(6, low=0, high=255, dtype=torch.uint8),))
case("int8_ops", lambda a, b: (a + b, a * b, -a), lambda: (randint(6, dtype=torch.int8), randint(6, dtype=torch.int8)))
case("int_true_division", lambda a, b: a / b, lambda: (randint(10), randint(10, nonzero=True)))
case("floor_divide_int_negatives", lambda a, b: torch.floor_divide(a, b),
     lambda: (randint(20, low=-20, high=20), randint(20, low=-7, high=7, nonzero=True)))
case("floor_divide_float_negatives", lambda a, b: a // b, lambda: (randn(20) * 5, randn(20)))
case("remainder_int_negatives", lambda a, b: (a % b, torch.remainder(a, -3)),
     lambda: (randint(20, low=-20, high=20), randint(20, low=-7, high=7, nonzero=True)))
case("remainder_float_negatives", lambda a, b: torch.remainder(a, b), lambda: (randn(20) * 5, randn(20)))
case("fmod_negatives", lambda a, b: (torch.fmod(a, b), torch.fmod(a.float(), 2.5)),
     lambda: (randint(20, low=-20, high=20), randint(20, low=-7, high=7, nonzero=True)))
case("div_rounding_modes", lambda a, b: (torch.div(a, b, rounding_mode="trunc"),
                                         torch.div(a, b, rounding_mode="floor"),
                                         torch.div(a.float(), b, rounding_mode="trunc")),
     lambda: (randint(20, low=-20, high=20), randint(20, low=-7, high=7, nonzero=True)))
case("int_floordiv_python", lambda a: (a // 3, a % -3, a // -2), lambda: (randint(20, low=-20, high=20),))
case("casts", lambda x: (x.to(torch.int32), x.long(), x.bool(), x.to(torch.float64),
                         x.half(), (x > 0).float(), x.to(torch.int8)),
     lambda: (randn(4, 5) * 10,))
case("int_to_float_cast_math", lambda a: a.float().sqrt() + a, lambda: (randint(8, low=0, high=100),))

# --------------------------------------------------------------------------
# empty tensors, size-1 dims
# --------------------------------------------------------------------------
case("empty_pointwise", lambda x: x * 2 + 1, lambda: (randn(0, 4),))
case("empty_reduce_to_nonempty", lambda x: (x.sum(0), x.prod(0), x.sum(1), x.amax(1)),
     lambda: (randn(0, 4),))
case("empty_reduce_inner", lambda x: (x.sum(1), x.mean(0)), lambda: (randn(3, 0),))
case("empty_cat", lambda x, y: torch.cat([x, y]) * 2, lambda: (randn(0, 3), randn(2, 3)))
case("size1_dims", lambda x: (x.sum(1), x.squeeze() * 2, x.amax(-1, keepdim=True)), lambda: (randn(3, 1, 1),))
case("all_size1", lambda x: x.exp() + x.sum(), lambda: (randn(1, 1),))

# --------------------------------------------------------------------------
# where / clamp / activations
# --------------------------------------------------------------------------
case("where", lambda c, x, y: torch.where(c, x, y), lambda: (randbool(4, 5), randn(4, 5), randn(4, 5)),
     inductor=True)
case("where_scalar_and_bcast", lambda x, y: torch.where(x > 0, x, 0.0) + torch.where(y > 0, 1.0, y),
     lambda: (randn(4, 5), randn(5)))
case("where_mixed_dtypes", lambda x, i: torch.where(x > 0, x, i), lambda: (randn(4, 5), randint(4, 5)))
case("clamp_scalars", lambda x: (x.clamp(-0.5, 0.5), x.clamp(min=0.1), x.clamp(max=-0.1)),
     lambda: (randn(4, 5),))
case("clamp_tensors", lambda x, lo, hi: torch.clamp(x, lo, hi), lambda: (randn(4, 5), randn(5) - 1, randn(4, 1) + 1))
case("clamp_nan", lambda x: x.clamp(-0.5, 0.5), lambda: (special_values(),))
case("activations", lambda x: (F.hardtanh(x), F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x),
                               F.hardswish(x), F.hardsigmoid(x), F.mish(x), F.relu6(x * 4)),
     lambda: (randn(4, 6) * 3,))

# --------------------------------------------------------------------------
# math functions (one case each)
# --------------------------------------------------------------------------
UNARY = {
    "exp": (torch.exp, randn),
    "log": (torch.log, randpos),
    "sqrt": (torch.sqrt, randpos),
    "rsqrt": (torch.rsqrt, randpos),
    "sin": (torch.sin, randn),
    "cos": (torch.cos, randn),
    "tanh": (torch.tanh, randn),
    "sigmoid": (torch.sigmoid, randn),
    "erf": (torch.erf, randn),
    "gelu_erf": (lambda x: F.gelu(x), randn),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), randn),
    "relu": (torch.relu, randn),
    "silu": (F.silu, randn),
    "abs": (torch.abs, randn),
    "neg": (torch.neg, randn),
    "pow_scalar_2": (lambda x: x ** 2, randn),
    "pow_scalar_3": (lambda x: torch.pow(x, 3), randn),
    "pow_scalar_half": (lambda x: x ** 0.5, randpos),
    "pow_scalar_neg": (lambda x: x ** -1.5, randpos),
    "pow_scalar_base": (lambda x: 2.0 ** x, randn),
    "reciprocal": (torch.reciprocal, randpos),
    "floor": (torch.floor, lambda *s: randn(*s) * 4),
    "ceil": (torch.ceil, lambda *s: randn(*s) * 4),
    "round": (torch.round, lambda *s: randn(*s) * 4),
    "trunc": (torch.trunc, lambda *s: randn(*s) * 4),
    "sign": (torch.sign, randn),
    "log1p": (torch.log1p, randpos),
    "expm1": (torch.expm1, randn),
    "log2_log10": (lambda x: torch.log2(x) + torch.log10(x), randpos),
    "tan_atan_asin": (lambda x: torch.tan(x) + torch.atan(x) + torch.asin(x * 0.5), lambda *s: torch.rand(*s) * 1.8 - 0.9),
    "erfinv": (torch.erfinv, lambda *s: torch.rand(*s) * 1.8 - 0.9),
    "frac": (torch.frac, lambda *s: randn(*s) * 4),
}
_IND_UNARY = {"gelu_erf", "gelu_tanh", "round"}
for _name, (_f, _mk) in UNARY.items():
    case(f"math_{_name}", (lambda f: lambda x: f(x))(_f), (lambda mk: lambda: (mk(5, 7),))(_mk),
         inductor=_name in _IND_UNARY)

case("round_half_to_even", lambda x: (torch.round(x), torch.round(x * 10, decimals=1)), lambda: (special_values(),))
case("round_decimals", lambda x: torch.round(x, decimals=2), lambda: (randn(5, 7),))
case("special_values_unary", lambda x: (torch.relu(x), torch.abs(x), torch.sign(x), torch.exp(x),
                                        torch.sigmoid(x), torch.tanh(x), torch.floor(x), -x),
     lambda: (special_values(),))
case("special_values_binary", lambda x: (x * 0.0, x / 0.0, x - x, torch.maximum(x, torch.zeros_like(x))),
     lambda: (special_values(),))
case("pow_tensor_exponent", lambda x, y: torch.pow(x, y), lambda: (randpos(5, 7), randn(5, 7)))
case("pow_int_tensor", lambda a, b: a ** b, lambda: (randint(8, low=-4, high=5), randint(8, low=0, high=4)))
case("atan2", lambda y, x: torch.atan2(y, x), lambda: (randn(5, 7), randn(5, 7)))
case("maximum_minimum_nan", lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b)),
     lambda: (with_nans(5, 7), randn(5, 7)))
case("lerp_hypot_copysign", lambda a, b: (torch.lerp(a, b, 0.3), torch.hypot(a, b), torch.copysign(a, b)),
     lambda: (randn(6), randn(6)))
case("math_chain_fusion", lambda x: torch.tanh(x.exp().log1p() * 0.5) + x.sin().cos(), lambda: (randn(8, 8),),
     inductor=True)

# --------------------------------------------------------------------------
# comparisons, logical and bitwise ops
# --------------------------------------------------------------------------
case("compare_float", lambda a, b: (a > b, a < b, a >= b, a <= b, a == b, a != b, a > 0.3),
     lambda: (randn(4, 5), randn(4, 5)))
case("compare_int", lambda a, b: (a == b, a != b, a > 2, a.eq(b) & (b > 0)),
     lambda: (randint(20, low=0, high=4), randint(20, low=0, high=4)))
case("logical_ops", lambda a, b: (torch.logical_and(a > 0, b > 0), torch.logical_or(a, b > 0),
                                  torch.logical_xor(a > 0, b), torch.logical_not(a)),
     lambda: (randn(4, 5), randn(4, 5)))
case("bitwise_int", lambda a, b: (a & b, a | b, a ^ b, ~a, a << 2, a >> 1),
     lambda: (randint(10, low=0, high=64), randint(10, low=0, high=64)))
case("bitwise_bool", lambda a, b: (a & b, a | b, a ^ b, ~a), lambda: (randbool(10), randbool(10)))
case("isnan_isinf_isfinite", lambda x: (torch.isnan(x), torch.isinf(x), torch.isfinite(x), torch.nan_to_num(x)),
     lambda: (special_values(),))

# --------------------------------------------------------------------------
# cat / pad / factories
# --------------------------------------------------------------------------
case("cat_dim0", lambda x, y: torch.cat([x, y]), lambda: (randn(2, 3), randn(4, 3)))
case("cat_dim1_computed", lambda x, y: torch.cat([x + 1, y * 2, x.sin()], dim=1),
     lambda: (randn(3, 2), randn(3, 4)), inductor=True)
case("cat_then_reduce", lambda x, y: torch.cat([x, y], -1).softmax(-1), lambda: (randn(3, 2), randn(3, 5)))
case("stack", lambda x, y: torch.stack([x, y * 2], dim=1), lambda: (randn(3, 4), randn(3, 4)))
case("pad_1d", lambda x: F.pad(x, (1, 2)), lambda: (randn(3, 4),))
case("pad_2d_value", lambda x: F.pad(x * 2, (1, 1, 2, 0), value=3.0), lambda: (randn(2, 3, 4),), inductor=True)
case("pad_negative", lambda x: F.pad(x, (-1, 2, 1, -1)), lambda: (randn(4, 5),))
case("pad_reflect_replicate", lambda x: (F.pad(x, (2, 1), mode="reflect"), F.pad(x, (1, 2), mode="replicate")),
     lambda: (randn(2, 3, 5),))
case("full_plus", lambda x: torch.full((3, 4), 2.5) + x, lambda: (randn(3, 4),))
case("arange_int", lambda x: torch.arange(10) * 2 + x, lambda: (randint(10),))
case("arange_float_step", lambda x: torch.arange(0, 1, 0.1) + x, lambda: (randn(10),))
case("arange_index_math", lambda x: x + torch.arange(x.shape[1]) - torch.arange(3, -3, -2).view(-1, 1),
     lambda: (randn(3, 5),))
case("zeros_ones_like", lambda x: torch.zeros_like(x) + torch.ones_like(x) * x + torch.full_like(x, 7),
     lambda: (randn(3, 4),))
case("zeros_ones_factories", lambda x: (torch.zeros(3, 4), torch.ones(2, dtype=torch.int64), x + torch.eye(4)),
     lambda: (randn(4, 4),))
case("linspace_tril_triu", lambda x: (x.tril(), x.triu(1) + torch.linspace(0, 1, 5)), lambda: (randn(5, 5),))

# --------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------
case("gather", lambda x, i: torch.gather(x, 1, i), lambda: (randn(4, 6), torch.randint(0, 6, (4, 3))),
     inductor=True)
case("index_tensor_neg", lambda x, i: x[i] * 2, lambda: (randn(5, 3), torch.tensor([2, 0, -1, 3, -5])))
case("index_two_tensors", lambda x, i, j: x[i, j], lambda: (randn(5, 6), torch.randint(0, 5, (7,)),
                                                            torch.randint(0, 6, (7,))))
case("index_middle_dim", lambda x, i: x[:, i] + 1, lambda: (randn(3, 6, 2), torch.randint(0, 6, (4,))))
case("index_select", lambda x, i: (torch.index_select(x, 0, i), torch.index_select(x, 1, i)),
     lambda: (randn(5, 5), torch.tensor([4, 0, 0, 2])))
case("embedding", lambda i, w: F.embedding(i, w) * 2, lambda: (torch.randint(0, 10, (2, 5)), randn(10, 4)))
case("embedding_padding_idx", lambda i, w: F.embedding(i, w, padding_idx=0),
     lambda: (torch.tensor([[0, 2, 0, 9]]), randn(10, 4)))
case("masked_fill", lambda x: (x.masked_fill(x > 0, -1.0), x.masked_fill(x < 0, float("-inf")).softmax(-1)),
     lambda: (randn(4, 5),))
case("masked_fill_tensor_value", lambda x, m, v: x.masked_fill(m, v), lambda: (randn(4, 5), randbool(4, 5), randn(())))
case("index_put", lambda x, i, v: x.index_put((i,), v), lambda: (randn(6, 3), torch.tensor([4, 0, 2]), randn(3, 3)))
case("index_put_accumulate_dups", lambda x, i, v: x.index_put((i,), v, accumulate=True),
     lambda: (randn(6, 3), torch.tensor([1, 1, 5, 1]), randn(4, 3)))
case("scatter_permutation", lambda x, i, s: torch.scatter(x, 1, i, s),
     lambda: (randn(3, 5), torch.stack([torch.randperm(5)[:3] for _ in range(3)]), randn(3, 3)))
case("scatter_add_dups", lambda x, i, s: torch.scatter_add(x, 0, i, s),
     lambda: (randn(3, 4), torch.randint(0, 3, (5, 4)), randn(5, 4)))
case("slice_scatter_setitem", lambda x: _setitem_slice(x), lambda: (randn(4, 6),))


def _setitem_slice(x):
    y = x.clone()
    y[:, 1::2] = 0.5
    y[-1] = y[0] * 2
    return y


# --------------------------------------------------------------------------
# extern kernels (fallbacks) and their neighbours
# --------------------------------------------------------------------------
case("mm", lambda a, b: a @ b, lambda: (randn(4, 5), randn(5, 3)), rtol=1e-5)
case("mm_epilogue", lambda a, b, c: torch.relu(a @ b + c) * 2, lambda: (randn(4, 5), randn(5, 3), randn(3)),
     rtol=1e-5, inductor=True)
case("mm_transposed_inputs", lambda a, b: a.t() @ b.t(), lambda: (randn(5, 4), randn(3, 5)), rtol=1e-5)
case("linear", lambda x, w, b: F.linear(x, w, b), lambda: (randn(2, 3, 8), randn(4, 8), randn(4)), rtol=1e-5)
case("bmm", lambda a, b: torch.bmm(a.sin(), b), lambda: (randn(2, 3, 4), randn(2, 4, 5)), rtol=1e-5)
case("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), lambda: (randn(3), randn(2, 4), randn(4, 3)),
     rtol=1e-5)
case("matmul_batched_bcast", lambda a, b: torch.matmul(a, b), lambda: (randn(2, 3, 4), randn(4, 2)), rtol=1e-5)
case("cumsum", lambda x: (torch.cumsum(x, 1), torch.cumsum(x.exp(), 0)), lambda: (randn(4, 6),), rtol=1e-5)
case("cumsum_int", lambda a: torch.cumsum(a, 0), lambda: (randint(7),))
case("sort", lambda x: torch.sort(x * 2, dim=1), lambda: (randn(4, 6),))
case("sort_descending", lambda x: torch.sort(x, dim=0, descending=True), lambda: (randn(5, 3),))
case("topk", lambda x: torch.topk(x + 1, 3), lambda: (randn(4, 8),))

# --------------------------------------------------------------------------
# outputs: several, views of inputs, aliasing each other; in-place ops
# --------------------------------------------------------------------------
case("multiple_outputs", lambda x: (x + 1, x * 2, x.sum(), x.amax(0)), lambda: (randn(4, 5),))
case("outputs_views_of_input", lambda x: (x.t(), x[1:], x.view(-1), x[:, ::2]), lambda: (randn(4, 6),))
case("output_view_of_input_and_compute", lambda x: (x[0], x.sin()), lambda: (randn(3, 4),))
case("output_is_input", lambda x: (x, x * 2), lambda: (randn(3, 4),))
case("outputs_alias_each_other", lambda x: (lambda y: (y, y.view(-1), y[1], y.t()))(x + 1), lambda: (randn(3, 4),))
case("same_output_twice", lambda x: (lambda y: (y, y))(x * 2), lambda: (randn(3, 4),))
case("dict_and_list_outputs", lambda x: {"a": x + 1, "b": [x * 2, x.sum()]}, lambda: (randn(3, 4),))


def _inplace_intermediate(x, z):
    y = x * 2
    y.add_(1)
    y.mul_(z)
    y.relu_()
    return y


def _inplace_view_of_intermediate(x):
    y = x.clone()
    y[:, 0].mul_(0.5)
    y[1:].add_(1)
    y[1, 2] = 5.0
    return y


def _mutate_input(x):
    x.add_(1)
    return x * 2


def _mutate_input_view(x, y):
    x[0].mul_(2)
    y[:, 1:].zero_()
    return x.sum() + y.sum()


def _empty_then_copy(x):
    out = torch.empty_like(x)
    out.copy_(x.sin())
    return out


def _new_empty_setitem(x):
    out = x.new_empty(x.shape)
    out[:] = x * 3
    return out


case("inplace_on_intermediate", _inplace_intermediate, lambda: (randn(4, 5), randn(5)))
case("inplace_on_view_of_intermediate", _inplace_view_of_intermediate, lambda: (randn(4, 5),))
case("inplace_relu_functional", lambda x: F.relu(x * 2, inplace=True) + 1, lambda: (randn(4, 5),))
case("mutate_input", _mutate_input, lambda: (randn(4, 5),))
case("mutate_input_through_view", _mutate_input_view, lambda: (randn(4, 5), randn(3, 4)))
case("empty_like_then_copy", _empty_then_copy, lambda: (randn(4, 5),))
case("empty_fill", lambda x: torch.empty(3, 4).fill_(2.0) + x, lambda: (randn(3, 4),))
case("new_empty_setitem", _new_empty_setitem, lambda: (randn(4, 5),))

# --------------------------------------------------------------------------
# small composite patterns
# --------------------------------------------------------------------------


def _ln_softmax_gelu(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    y = (x - mu) * torch.rsqrt(var + 1e-5) * w + b
    return F.gelu(torch.softmax(y, -1) * 4.0)


def _attention_scores(q, k):
    s = (q.unsqueeze(2) * k.unsqueeze(1)).sum(-1) / math.sqrt(q.shape[-1])
    mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
    return s.masked_fill(~mask, float("-inf")).softmax(-1)


case("layernorm_softmax_gelu", _ln_softmax_gelu, lambda: (randn(4, 16), randn(16), randn(16)), inductor=True)
case("causal_attention_scores", _attention_scores, lambda: (randn(2, 5, 8), randn(2, 5, 8)))
case("cross_entropy", lambda x, t: F.cross_entropy(x, t), lambda: (randn(6, 5), torch.randint(0, 5, (6,))))
case("mse_loss", lambda x, y: F.mse_loss(x, y), lambda: (randn(6, 5), randn(6, 5)))
# bool & bool is an int in C++, and ~1 is -2 (true): embedding's backward mask was always
# true, so every CPU embedding gradient came out zero.
case("embedding_dense_backward",
     lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 10, -1, False),
     lambda: (randn(6, 4), torch.tensor([1, 1, 1, 2, 3, 1])), inductor=True)
case("not_of_bool_and", lambda a, b, x: torch.where(~(a & b), x, -x),
     lambda: (randbool(5, 6), randbool(5, 6), randn(5, 6)))
case("bool_xor_or", lambda a, b, c: ((a ^ b) | c).float() + (a | b).to(torch.uint8),
     lambda: (randbool(5, 6), randbool(5, 6), randbool(5, 6)))


# --------------------------------------------------------------------------
# gradients: compiled call, then torch.autograd.grad outside it (check_grads)
# --------------------------------------------------------------------------
GRAD_CASES: list[Case] = []


def grad_case(name, fn, make_inputs, **kw):
    GRAD_CASES.append(Case(name, fn, make_inputs, **kw))


def _spd(n):
    """A well-conditioned symmetric positive definite matrix that requires grad."""
    a = randn(n, n)
    return (a @ a.mT / n + torch.eye(n)).requires_grad_()


# The saved L^T of cholesky(upper=True) is the transpose of an alias realized
# contiguous: the forward returned it transposed against eager's strides, and the
# backward, compiled against eager's strides, misread it (all of cholesky's gradients
# wrong).
grad_case("saved_transpose_of_alias", lambda a: torch.cholesky(a + a.mT, upper=True),
          lambda: (_spd(5),), rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------
# the tests
# --------------------------------------------------------------------------
CASE_BY_NAME = {c.name: c for c in CASES}
assert len(CASE_BY_NAME) == len(CASES), "duplicate case names"


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_case(c: Case):
    check(c.fn, *c.make_inputs(), rtol=c.rtol, atol=c.atol)


@pytest.mark.parametrize("c", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_grad_case(c: Case):
    check_grads(c.fn, *c.make_inputs(), rtol=c.rtol, atol=c.atol)


INDUCTOR_CASES = [c for c in CASES if c.inductor]


@pytest.mark.parametrize("c", INDUCTOR_CASES, ids=[c.name for c in INDUCTOR_CASES])
def test_case_vs_inductor(c: Case):
    check(c.fn, *c.make_inputs(), rtol=c.rtol, atol=c.atol, inductor=True)


# Cases whose kernels write an output only partly per loop, or reuse buffers.
RERUN_CASES = ["pad_2d_value", "cat_dim1_computed", "slice_scatter_setitem", "index_put",
               "scatter_add_dups", "reduce_sum_keepdim0", "softmax_each_dim", "layernorm_softmax_gelu",
               "empty_like_then_copy", "new_empty_setitem", "inplace_on_view_of_intermediate",
               "mm_epilogue", "outputs_alias_each_other", "embedding_padding_idx"]


@pytest.mark.parametrize("name", RERUN_CASES)
def test_rerun_with_new_inputs(name):
    """One compiled function, called on two different input sets.

    Catches outputs that depend on stale memory (a buffer not fully written,
    a reused buffer holding the previous call's values) and outputs that a
    later call overwrites (a buffer kept alive across calls).
    """
    c = CASE_BY_NAME[name]
    compiled = compile_fn(c.fn)
    first_inputs = c.make_inputs()
    first = check(c.fn, *first_inputs, rtol=c.rtol, atol=c.atol, compiled=compiled)
    first_copy = [t.clone() if isinstance(t, torch.Tensor) else t
                  for t in torch.utils._pytree.tree_flatten(first)[0]]
    second_inputs = c.make_inputs()
    check(c.fn, *second_inputs, rtol=c.rtol, atol=c.atol, compiled=compiled)
    # The first call's outputs must be untouched by the second call.
    for i, (now, then) in enumerate(zip(torch.utils._pytree.tree_flatten(first)[0], first_copy)):
        if isinstance(then, torch.Tensor):
            torch.testing.assert_close(now, then, rtol=0, atol=0, equal_nan=True,
                                       msg=lambda m: f"output {i} of call 1 changed by call 2: {m}")


def test_case_count():
    assert len(CASES) >= 90
    assert len(INDUCTOR_CASES) >= 12


# --------------------------------------------------------------------------
# metrics: native lowering vs fallback
# --------------------------------------------------------------------------
@requires_miniinductor
def test_pointwise_and_reductions_need_no_fallback():
    m = metrics()
    m.reset()
    x, w, b = randn(8, 32), randn(32), randn(32)
    check(_ln_softmax_gelu, x, w, b)
    assert m.fallback_count == 0, f"unexpected fallbacks: {dict(m.fallback_ops)}"
    assert m.generated_kernel_count >= 1


@requires_miniinductor
def test_output_code_is_written():
    m = metrics()
    m.reset()
    check(lambda x: (x.sin() + 1).sum(1), randn(4, 5))
    assert m.output_code_paths, "no generated code path recorded"
    import os

    for p in m.output_code_paths:
        assert os.path.exists(p), p


@requires_miniinductor
def test_complex_dtype_falls_back():
    m = metrics()
    m.reset()
    x = torch.randn(4, 5, dtype=torch.complex64)
    check(lambda x: x * 2 + 1, x)
    assert m.fallback_count > 0


@requires_miniinductor
@pytest.mark.parametrize("opname,fn,make_inputs", [
    ("sort", lambda x: torch.sort(x, 1).values + 1, lambda: (randn(4, 6),)),
    ("mm", lambda a, b: torch.mm(a, b).relu(), lambda: (randn(4, 5), randn(5, 3))),
], ids=["sort", "mm"])
def test_unlowered_op_is_counted(opname, fn, make_inputs):
    m = metrics()
    m.reset()
    check(fn, *make_inputs(), rtol=1e-5)
    assert m.fallback_count > 0
    hits = {k: v for k, v in m.fallback_ops.items() if opname in str(k)}
    assert hits, f"{opname} not in fallback_ops {dict(m.fallback_ops)}"
    assert sum(hits.values()) >= 1
    # The pointwise epilogue is still generated code.
    assert m.generated_kernel_count >= 1


def test_default_backend_is_miniinductor():
    """The suite must test miniinductor unless explicitly switched."""
    import os

    if "MINIINDUCTOR_TEST_BACKEND" not in os.environ:
        assert USING_MINIINDUCTOR


@requires_miniinductor
def test_torch_compile_backend_string():
    """``torch.compile(fn, backend="miniinductor")`` finds us through the entry point."""
    m = metrics()
    m.reset()

    def fn(x):
        return torch.relu(x) * 2 + x.sum(0)

    x = randn(4, 5)
    out = torch.compile(fn, backend="miniinductor")(x)
    torch.testing.assert_close(out, fn(x))
    assert m.generated_kernel_count >= 1, "the miniinductor backend did not run"
