// miniinductor C++ kernel prelude: included at the top of every generated CPU module.
// float16 / bfloat16 are stored as uint16_t and computed in float (as Inductor does).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#ifdef MI_USE_MVEC
// glibc's libmvec has SIMD versions of these; declaring them `simd` lets the compiler
// vectorize loops that call them (glibc itself only does so under -ffast-math).
extern "C" {
#define MI_SIMD1(f) __attribute__((simd("notinbranch"))) float f(float) noexcept;
#define MI_SIMD2(f) __attribute__((simd("notinbranch"))) float f(float, float) noexcept;
MI_SIMD1(expf) MI_SIMD1(expm1f) MI_SIMD1(exp2f) MI_SIMD1(logf) MI_SIMD1(log1pf) MI_SIMD1(log2f)
MI_SIMD1(log10f) MI_SIMD1(sinf) MI_SIMD1(cosf) MI_SIMD1(tanf) MI_SIMD1(asinf) MI_SIMD1(acosf)
MI_SIMD1(atanf) MI_SIMD1(sinhf) MI_SIMD1(coshf) MI_SIMD1(tanhf) MI_SIMD1(asinhf) MI_SIMD1(acoshf)
MI_SIMD1(atanhf) MI_SIMD1(erff) MI_SIMD1(erfcf) MI_SIMD2(powf) MI_SIMD2(atan2f) MI_SIMD2(hypotf)
}
#endif

// exp for float32 with no slow path: a loop calling it vectorizes under `omp simd` into
// straight-line code (libmvec's expf leaves its vector path for every input below about -87.3,
// each -inf of an attention mask included: 4.5 cycles an element instead of 0.6). The algorithm
// of Sleef's xexpf (ATen's Vectorized<float>::exp): x = q ln2 + s with q = rint(x / ln2) (adding
// 1.5 * 2^23 rounds it, and leaves q in the low bits) and ln2 in two parts (Cody-Waite), exp(s)
// by a polynomial on |s| <= ln2/2, then times 2^q by adding q to the exponent bits. The
// polynomial is ours, of degree 6 in Horner form (a minimax fit of the relative error, by
// Lawson's iteration, coefficients rounded to float): two operations fewer than Sleef's degree 7,
// and within 1.06 ulp of the exact exp over every float32 input (Sleef's, here: 1.24).
// Simplified as at::vec's exp_u20: results below the normal floats (x < ln FLT_MIN, -87.34)
// are 0, not std::exp's denormals (off by < 1.2e-38): an underflowing multiply would cost a
// ~100-cycle microcode assist on x86 -- the same slow path again. x is clamped to the finite
// range before any arithmetic; x > 88.7228317 (exp overflows) gives inf and NaN NaN.
static inline float mi_expf(float x) {
    const float lo = -87.33654f, hi = 88.72283172607421875f, shifter = 12582912.0f;
    const float c = std::min(std::max(x, lo), hi);      // NaN stays NaN: replaced at the end
    const float t = std::fma(c, 1.442695040888963f, shifter);
    const float q = t - shifter;
    float s = std::fma(q, -0.693145751953125f, c);       // ln2's high part: q times it is exact
    s = std::fma(q, -1.428606765330187045e-06f, s);      // ln2's low part
    float u = 0.0013836842263117433f;                    // exp(s), in [0.7, 1.42]: degree 6
    u = std::fma(u, s, 0.008374815806746483f);
    u = std::fma(u, s, 0.04166822507977486f);
    u = std::fma(u, s, 0.16666419804096222f);
    u = std::fma(u, s, 0.49999991059303284f);
    u = std::fma(u, s, 1.0f);
    u = std::fma(u, s, 1.0f);
    uint32_t t_bits, u_bits;
    std::memcpy(&t_bits, &t, 4);
    std::memcpy(&u_bits, &u, 4);
    u_bits += t_bits << 23;                              // q, in t's low bits, into the exponent
    std::memcpy(&u, &u_bits, 4);
    u = x < lo ? 0.0f : u;
    return x <= hi ? u : x + std::numeric_limits<float>::infinity();  // inf, or NaN
}
template <typename T> static inline auto mi_exp(T x) {
    if constexpr (std::is_same_v<T, float>) return mi_expf(x); else return std::exp(x);
}

static inline float mi_half2float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);            // inf / nan
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal
    else {                                                                // zero / subnormal
        float f = (float)mant * 5.9604644775390625e-8f;                    // mant * 2^-24
        std::memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float out;
    std::memcpy(&out, &bits, 4);
    return out;
}

static inline uint16_t mi_float2half(float f) {  // round to nearest even
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint16_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
    if (ax >= 0x477ff000u) return sign | 0x7c00;                           // >= 65520: inf
    if (ax < 0x38800000u) {                                                 // < 2^-14
        float v;
        std::memcpy(&v, &ax, 4);
        return sign | (uint16_t)std::nearbyint(v * 16777216.0f);            // units of 2^-24
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1);                                   // rebias and round
    return sign | (uint16_t)(ax >> 13);
}

static inline float mi_bf162float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float out;
    std::memcpy(&out, &bits, 4);
    return out;
}

static inline uint16_t mi_float2bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);  // quiet nan
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

// C++ promotes bool and 8/16-bit integers to int before any arithmetic: -x of a uint8 is a
// negative int, int8 * int8 does not wrap, bool + bool is 2. ATen computes in the operands'
// type, so every arithmetic op below returns mi_t<A, B>: the type itself when both operands
// have it (our lowerings cast operands to one dtype), C++'s usual conversion otherwise.
template <typename A, typename B>
using mi_t = std::conditional_t<std::is_same_v<A, B>, A, decltype(std::declval<A>() + std::declval<B>())>;
// Signed overflow is undefined in C++ (-fwrapv aside): the compiler may rewrite -x > 0 as x < 0,
// wrong for INT_MIN. ATen's integers wrap, so integer +, -, * run in mi_wrap_t: the unsigned
// version of the promoted type, where wrapping is defined.
template <typename T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>> struct mi_wrap { using type = T; };
template <typename T> struct mi_wrap<T, true> { using type = std::make_unsigned_t<decltype(+T())>; };
template <typename T> using mi_wrap_t = typename mi_wrap<T>::type;
#define MI_ARITH(name, op) \
template <typename A, typename B> static inline mi_t<A, B> name(A a, B b) { \
    using W = mi_wrap_t<mi_t<A, B>>; return (mi_t<A, B>)((W)a op (W)b); }
MI_ARITH(mi_add, +)
MI_ARITH(mi_sub, -)
MI_ARITH(mi_mul, *)
#undef MI_ARITH
template <typename A, typename B> static inline mi_t<A, B> mi_div(A a, B b) { return (mi_t<A, B>)(a / b); }
template <typename T> static inline T mi_neg(T x) { return (T)(-(mi_wrap_t<T>)x); }
template <typename T> static inline T mi_abs(T x) {  // abs(int8 -128) is -128, as in eager
    if constexpr (std::is_integral_v<T>) return x < 0 ? mi_neg(x) : x; else return std::abs(x);
}

// NaN-propagating max/min, as torch.maximum / amax.
// Min and Max in index expressions (a size's Max(1, s0)), by value; a position moved into
// [0, hi] (ir/indexing.py ClampIndex: a pooling window's read over the padding) in int32
static inline int64_t mi_index_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t mi_index_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int32_t mi_clamp_index(int32_t x, int32_t hi) {   // (this form g++ vectorises; x < 0 ? 0 : ... it did not)
    int32_t y = x > 0 ? x : 0;
    return y < hi ? y : hi;
}
template <typename A, typename B> static inline mi_t<A, B> mi_max(A a, B b) {
    using T = mi_t<A, B>;
    return (a != a || a > b) ? (T)a : (T)b;
}
template <typename A, typename B> static inline mi_t<A, B> mi_min(A a, B b) {
    using T = mi_t<A, B>;
    return (a != a || a < b) ? (T)a : (T)b;
}

// Online softmax (lowering/softmax.py): one more value x into the running max m and sum s of
// exp(. - m); the sum so far is rescaled to the new max. NaN propagates; a max of -inf is
// shifted by 0, not by itself (no exp(-inf - -inf) NaN).
template <typename T> static inline void mi_online_softmax_combine(T& m, T& s, T x) {
    T m_new = (m != m || m > x) ? m : x;
    T shift = m_new == -std::numeric_limits<T>::infinity() ? T(0) : m_new;
    s = s * mi_exp(m - shift) + mi_exp(x - shift);
    m = m_new;
}

// Welford (lowering/reductions.var): one more value x into a running mean and m2 (the sum of
// squared deviations from the mean), given 1/n for the count n with x. The count is kept by
// the loop (mi_welford_step): lanes that each take one element per step share one count and
// one reciprocal, so the update vectorizes without a division.
template <typename T> static inline T mi_welford_step(int64_t& n) { n += 1; return T(1) / T(n); }
template <typename T> static inline void mi_welford_update(T& mean, T& m2, T x, T rweight) {
    T delta = x - mean;
    mean = mean + delta * rweight;
    m2 = m2 + delta * (x - mean);
}
// Chan et al.'s parallel combine: the (mean_b, m2_b) of n_b more values into (mean, m2, n).
template <typename T> static inline void mi_welford_combine(T& mean, T& m2, int64_t& n, T mean_b, T m2_b, int64_t n_b) {
    if (n_b == 0) return;
    if (n == 0) { mean = mean_b; m2 = m2_b; n = n_b; return; }
    T delta = mean_b - mean, w_b = T(n_b) / T(n + n_b);
    mean = mean + delta * w_b;
    m2 = m2 + m2_b + delta * delta * T(n) * w_b;
    n = n + n_b;
}
// L lanes of n_l values each, folded by halves (the combine of two lanes of equal weight w is
// mean (a + b) / 2, m2 m2_a + m2_b + (b - a)^2 w / 2: a few vector ops a level), then
// combined into (mean, m2, n).
template <typename T, int L>
static inline void mi_welford_fold_lanes(T* mean_l, T* m2_l, int64_t n_l, T& mean, T& m2, int64_t& n) {
    T w = T(n_l);
    for (int half = L / 2; half >= 1; half /= 2) {
        #pragma omp simd
        for (int t = 0; t < half; t += 1) {
            T delta = mean_l[t + half] - mean_l[t];
            mean_l[t] = mean_l[t] + T(0.5) * delta;
            m2_l[t] = m2_l[t] + m2_l[t + half] + delta * delta * (T(0.5) * w);
        }
        w = w * 2;
    }
    mi_welford_combine(mean, m2, n, mean_l[0], m2_l[0], n_l * L);
}

// Python-style floor division and modulus (the sign follows the divisor).
template <typename A, typename B> static inline mi_t<A, B> mi_floordiv(A a, B b) {
    using T = mi_t<A, B>;
    if constexpr (std::is_floating_point_v<T>) {
        if (b == 0) return (T)(a / b);
        T mod = std::fmod((T)a, (T)b), div = ((T)a - mod) / (T)b;
        if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
        if (div == 0) return std::copysign((T)0, (T)a / (T)b);
        T floordiv = std::floor(div);
        if (div - floordiv > (T)0.5) floordiv += 1;
        return floordiv;
    } else {
        if (b == 0) return (T)0;  // eager raises ZeroDivisionError; a kernel cannot
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
        return q;
    }
}
template <typename A, typename B> static inline mi_t<A, B> mi_mod(A a, B b) {
    using T = mi_t<A, B>;
    if constexpr (std::is_floating_point_v<T>) {
        T r = std::fmod((T)a, (T)b);
        return (r != 0 && ((r < 0) != (b < 0))) ? r + (T)b : r;
    } else {
        if (b == 0) return (T)0;
        T r = a % b;
        return (r != 0 && ((r < 0) != (b < 0))) ? r + (T)b : r;
    }
}
template <typename A, typename B> static inline mi_t<A, B> mi_fmod(A a, B b) {
    using T = mi_t<A, B>;
    if constexpr (std::is_floating_point_v<T>) return std::fmod((T)a, (T)b);
    else return b == 0 ? (T)0 : (T)(a % b);
}
template <typename T> static inline T mi_sign(T x) {  // sign(nan) is 0, as in eager
    return (T)((T(0) < x) - (x < T(0)));
}
// bool & bool would be an int too, and ~ of that int 1 is -2, which is true: keep bools bool.
#define MI_BITWISE(name, op) \
template <typename A, typename B> static inline mi_t<A, B> name(A a, B b) { return (mi_t<A, B>)(a op b); }
MI_BITWISE(mi_bitwise_and, &)
MI_BITWISE(mi_bitwise_or, |)
MI_BITWISE(mi_bitwise_xor, ^)
#undef MI_BITWISE
// Shifts as ATen does them: by a negative amount or by the bit width or more, << gives 0 and
// >> the sign; a negative value is shifted left as unsigned (no undefined behaviour).
template <typename A, typename B> static inline mi_t<A, B> mi_shl(A a, B b) {
    using T = mi_t<A, B>;
    if (b < 0 || b >= (B)(sizeof(T) * 8)) return (T)0;
    return (T)((std::make_unsigned_t<T>)a << b);
}
template <typename A, typename B> static inline mi_t<A, B> mi_shr(A a, B b) {
    using T = mi_t<A, B>;
    constexpr int max_shift = sizeof(T) * 8 - std::is_signed_v<T>;
    if (b < 0 || b >= (B)max_shift) return (T)(a >> max_shift);
    return (T)(a >> b);
}
template <typename T> static inline auto mi_bitwise_not(T x) {
    if constexpr (std::is_same_v<T, bool>) return !x; else return (T)~x;
}
template <typename T> static inline T mi_relu(T x) { return x < T(0) ? T(0) : x; }
template <typename A, typename B> static inline mi_t<A, B> mi_pow(A a, B b) {
    using T = mi_t<A, B>;
    if constexpr (std::is_floating_point_v<T>) return (T)std::pow((T)a, (T)b);
    else {  // integer power by squaring, as eager does
        if (b < 0) return (T)(a == 1 ? 1 : (a == -1 ? ((b % 2) ? -1 : 1) : 0));
        mi_wrap_t<T> result = 1, base = a;  // wraps, as eager's does
        for (auto e = b; e > 0; e >>= 1) { if (e & 1) result *= base; base *= base; }
        return (T)result;
    }
}

// A 16x16 tile of floats transposed into a local array: dst[16 * j + i] = src[ld_src * i + j]
// (codegen/cpp_loops.py: a transposing kernel's tile). With AVX-512, in registers (unpack
// pairs, then 128-bit lanes: Inductor's transpose_mxn does the same); g++ does not vectorize
// the plain loop, which gathers or scatters one float at a time.
#ifdef __AVX512F__
#include <immintrin.h>
#endif
static inline void mi_transpose_16x16(const float* __restrict__ src, int64_t ld_src, float* __restrict__ dst) {
#ifdef __AVX512F__
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ld_src);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
            t[8 * i + j + 4] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        _mm512_store_ps(dst + 16 * j, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
        _mm512_store_ps(dst + 16 * (j + 8), _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd));
    }
#else
    for (int64_t i = 0; i < 16; i++)
        for (int64_t j = 0; j < 16; j++) dst[16 * j + i] = src[ld_src * i + j];
#endif
}

// Explicit vectors (codegen/cpp_vec.py, as Inductor's at::vec::Vectorized<float>): MI_VEC_LANES
// floats in one GCC vector, the width g++ may use (runtime/cpp_builder.py). Arithmetic and
// comparisons are the vector extension's operators (the templates above take vectors as they
// take floats); a comparison gives a mask, an int32 vector of -1 or 0, and `mask ? a : b`
// selects lane by lane. Loads and stores go through memcpy (unaligned). A function of one float
// is applied lane by lane under `omp simd`, which g++ makes one vector computation: mi_expf's
// inline, libmvec's erf, tanh... (A file built by hand, without -DMI_VEC_LANES, gets 8 lanes:
// any width computes the same values.)
#ifndef MI_VEC_LANES
#define MI_VEC_LANES 8
#endif
typedef float mi_vec __attribute__((vector_size(4 * MI_VEC_LANES)));
static inline mi_vec mi_vload(const float* p) { mi_vec v; std::memcpy(&v, p, sizeof v); return v; }
static inline void mi_vstore(float* p, mi_vec v) { std::memcpy(p, &v, sizeof v); }
static inline mi_vec mi_vsplat(float x) { return x - mi_vec{}; }   // x - 0 keeps -0.0 (x + 0 makes it +0.0)
static inline mi_vec mi_max(mi_vec a, mi_vec b) { return (a != a) | (a > b) ? a : b; }   // NaN propagates
static inline mi_vec mi_min(mi_vec a, mi_vec b) { return (a != a) | (a < b) ? a : b; }
static inline mi_vec mi_relu(mi_vec x) { return x < mi_vec{} ? mi_vec{} : x; }
#define MI_VEC_MAP(name, f) static inline mi_vec name(mi_vec x) { \
    mi_vec r; _Pragma("omp simd") for (int k = 0; k < MI_VEC_LANES; k += 1) r[k] = f(x[k]); return r; }
MI_VEC_MAP(mi_exp, mi_expf)
#define MI_VEC_STD(f) MI_VEC_MAP(mi_v_##f, std::f)
MI_VEC_STD(abs) MI_VEC_STD(exp2) MI_VEC_STD(expm1) MI_VEC_STD(log) MI_VEC_STD(log2) MI_VEC_STD(log10)
MI_VEC_STD(log1p) MI_VEC_STD(sqrt) MI_VEC_STD(sin) MI_VEC_STD(cos) MI_VEC_STD(tan) MI_VEC_STD(asin)
MI_VEC_STD(acos) MI_VEC_STD(atan) MI_VEC_STD(sinh) MI_VEC_STD(cosh) MI_VEC_STD(tanh) MI_VEC_STD(asinh)
MI_VEC_STD(acosh) MI_VEC_STD(atanh) MI_VEC_STD(erf) MI_VEC_STD(erfc) MI_VEC_STD(floor) MI_VEC_STD(ceil)
MI_VEC_STD(trunc) MI_VEC_STD(nearbyint)
#undef MI_VEC_STD
