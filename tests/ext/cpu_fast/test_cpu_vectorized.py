"""The vectorised paths of the C++ kernels (ext/cpu_fast): row max/min reductions folded
by `omp simd` with a NaN flag, softmax and cross-entropy built on them, at lengths that are
not multiples of the vector width (the loops' scalar tails), with NaN and infinities placed
first, inside and in the tail, and in the dtypes that do not fill a float vector (integers,
bool, float16, bfloat16). Rows of at least 2 * LANES (64) elements fold each reduction into
32 lane accumulators (reduction.codegen_lane_loops) and the rest of the row into the
accumulator itself: lengths 64 (no tail), 65 and 1031 (tails), symbolic lengths, reductions
over two dims. Every case is compared with eager (conftest.check)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import USING_MINIINDUCTOR, check, check_grads, compile_fn, extension_on

# AVX2 holds 8 floats, AVX-512 16: below, at, above a vector and a long row with a tail
LENGTHS = [1, 7, 8, 9, 17, 33, 1031]
# float32 sums of up to ~1000 values in another order than eager's
SUM_TOL = dict(rtol=1e-4, atol=1e-5)


def with_specials(x: torch.Tensor) -> torch.Tensor:
    """`x` (float, [rows, n]) with NaN first / in the last (tail) element / inside, +inf,
    a row of -inf and a row of +inf, where the row length allows."""
    x = x.clone()
    n = x.shape[1]
    x[0, 0] = float("nan")
    x[1, n - 1] = float("nan")
    x[2, n // 2] = float("inf")
    x[3, n - 1] = -float("inf")
    x[4] = -float("inf")
    x[5] = float("inf")
    x[6, n // 3] = float("nan")
    x[6, n - 1] = float("inf")
    return x


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_row_max_min_propagate_nan_and_inf_at_any_position(op, n):
    def fn(x):
        return getattr(x, op)(-1), getattr(x, op)(-1).neg()   # the result stored and read again
    check(fn, with_specials(torch.randn(9, n)))


@pytest.mark.parametrize("n", [9, 1031])
def test_max_and_min_of_one_row_in_one_kernel(n):
    def fn(x):
        return x.amax(-1) - x.amin(-1), x.max()
    check(fn, with_specials(torch.randn(9, n)))
    check(fn, torch.randn(9, n))   # no specials: the flag must not fire


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("n", [7, 1031])
def test_integer_and_bool_row_max_min(dtype, n):
    def fn(x):
        return x.amax(-1), x.amin(-1)
    if dtype is torch.bool:
        x = torch.rand(5, n) < 0.5
        x[0], x[1] = True, False
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (5, n), dtype=dtype)
        x[0, n - 1], x[1, 0] = info.max, info.min   # extremes in the tail and the head
    check(fn, x)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [9, 1031])
def test_low_precision_row_max_min_and_softmax(dtype, n):
    def fn(x):
        return x.amax(-1), x.amin(-1), torch.softmax(x, -1)
    check(fn, with_specials(torch.randn(9, n)).to(dtype))


@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_with_nan_inf_and_masked_rows(n):
    def fn(x):
        return torch.softmax(x, -1), torch.log_softmax(x, -1)
    check(fn, with_specials(torch.randn(9, n)), **SUM_TOL)
    check(fn, torch.randn(9, n) * 30, **SUM_TOL)   # large logits: exp overflows without the max


@pytest.mark.parametrize("n", [9, 1031])
def test_softmax_and_cross_entropy_gradients(n):
    def fn(x, target):
        return torch.softmax(x, -1).square().sum() + F.cross_entropy(x, target)
    x = torch.randn(17, n, requires_grad=True)
    check_grads(fn, x, torch.randint(0, n, (17,)), **SUM_TOL)


@pytest.mark.parametrize("n", [1, 9, 64, 1031])
def test_layer_norm_forward_and_backward_with_tails(n):
    def fn(x, w, b):
        return F.layer_norm(x, (n,), w, b)
    x = (torch.randn(13, n) * 3 + 5).requires_grad_()   # a large mean: the variance's two passes
    w, b = torch.randn(n, requires_grad=True), torch.randn(n, requires_grad=True)
    # a row of one: x - mean is exactly 0 here, eager's Welford leaves round-off (~1e-6 on a
    # mean of ~5) that rstd = 1/sqrt(1e-5) scales by 316 in the gradients
    check_grads(fn, x, w, b, **(SUM_TOL if n > 1 else dict(rtol=1e-4, atol=2e-3)))


def lane_reductions(x, flags):
    """sum, mean, prod, amax (NaN-flagged), any and a sum over the last two dims, of rows."""
    return (x.sum(-1), x.mean(-1), (1 + x / 64).prod(-1), x.amax(-1), flags.any(-1),
            x.view(x.shape[0], 2, -1).sum((1, 2)))


@pytest.mark.parametrize("n", [64, 66, 1030])
def test_lane_reductions_with_tails_and_specials(n):
    flags = torch.zeros(9, n, dtype=torch.bool)
    flags[0, n - 1], flags[1, 0] = True, True   # a flag in the tail and one in the first lane
    check(lane_reductions, torch.randn(9, n), flags, **SUM_TOL)
    check(lane_reductions, with_specials(torch.randn(9, n)), flags, **SUM_TOL)


def test_lane_reductions_symbolic_length():
    """One kernel generic in the row length: its tail starts at the last multiple of 32."""
    compiled = compile_fn(lane_reductions, dynamic=True)
    for n in (130, 96, 1030):
        flags = torch.rand(5, n) < 0.01
        check(lane_reductions, torch.randn(5, n), flags, compiled=compiled, **SUM_TOL)


@pytest.mark.skipif(not extension_on("cpu_fast"), reason="lane accumulators: extension cpu_fast")
def test_lanes_only_for_long_rows():
    import miniinductor
    for n, lanes in ((63, False), (64, True), (1031, True)):
        (kernel,) = miniinductor.explain(lambda x: x.sum(-1), torch.randn(4, n)).kernels
        if kernel.language == "cpp":
            assert ("acc0_lanes[32]" in kernel.source) == lanes, kernel.source


@pytest.mark.skipif(not USING_MINIINDUCTOR, reason="reads miniinductor's build flags")
def test_vector_width_follows_aten(monkeypatch):
    """g++ may use 512-bit vectors exactly where ATen's kernels run their AVX-512 versions."""
    from miniinductor.runtime import cpp_builder
    try:
        for capability, width in (("AVX512", 512), ("AVX2", 256), ("DEFAULT", 256)):
            cpp_builder.vector_width_flags.cache_clear()
            cpp_builder.vector_lanes.cache_clear()
            monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
            assert cpp_builder.vector_width_flags() == [f"-mprefer-vector-width={width}", f"-DMI_VEC_LANES={width // 32}"]
    finally:
        cpp_builder.vector_width_flags.cache_clear()
        cpp_builder.vector_lanes.cache_clear()


@pytest.mark.skipif(not USING_MINIINDUCTOR, reason="reads miniinductor's build")
def test_softmax_exp_is_inline():
    """The softmax kernel's exp is the prelude's (`mi_expf`), inlined into the vector loop: it
    calls neither libm's expf nor libmvec's (`_ZGVeN16v_expf`, slow for -inf)."""
    import miniinductor
    from miniinductor.runtime import cpp_builder
    x = torch.randn(64, 1024)
    check(lambda x: torch.softmax(x, -1), x)
    (kernel,) = miniinductor.explain(lambda x: torch.softmax(x, -1), x).kernels
    assert b"expf" not in cpp_builder.build(kernel.source).read_bytes()


@pytest.mark.parametrize("n", [128, 130])
def test_attention_mask_loaded_as_bytes(n):
    """A bool mask is read through its byte (`!= 0`): g++ left the softmax's lane loops that
    loaded `bool` scalar. Rows of -inf, a tail (130), and a mask stored by the kernel too."""
    def fn(scores, mask):
        return torch.softmax((scores * 0.125).masked_fill(mask, float("-inf")), -1), ~mask
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    check(fn, torch.randn(2, 3, n, n), mask, **SUM_TOL)
    if USING_MINIINDUCTOR:
        import miniinductor
        sources = "".join(k.source for k in miniinductor.explain(fn, torch.randn(2, 3, n, n), mask).kernels)
        assert "reinterpret_cast<const uint8_t*>(in_ptr" in sources, sources


@pytest.mark.parametrize("n", [9, 1031])
def test_division_by_a_row_reduction_multiplies_by_its_reciprocal(n):
    """Softmax's exp / sum, inside the row's loop, is exp * (1 / sum) (one divide per row, as
    ATen's softmax); a division once per row (outside the loop) stays a division."""
    def fn(x):
        return torch.softmax(x, -1), x / x.abs().sum(-1, keepdim=True), x.sum(-1) / x.amax(-1)
    check(fn, with_specials(torch.randn(9, n)), **SUM_TOL)
    check(fn, torch.randn(9, n), **SUM_TOL)
    if USING_MINIINDUCTOR:
        import miniinductor
        sources = [k.source for k in miniinductor.explain(fn, torch.randn(9, n)).kernels if k.language == "cpp"]
        if sources:
            assert any("mi_mul(tmp" in s and ", 1 / acc" in s for s in sources), sources
            assert any("mi_div(acc" in s for s in sources), sources   # sum / amax: once per row
