"""Triton's helpers at run time: the small @triton.jit functions generated kernels call
(`HELPERS`, included as source in each module), libdevice under the interpreter
(`InterpreterLibdevice`, torch on the NumPy data) and a fix to the interpreter's comparisons.

Mirrors, in small, `torch/_inductor/runtime/triton_helpers.py` (the @triton.jit helpers
kernels call, and the `libdevice` import that works across Triton versions). Split from
runtime.py (the loader, launcher and autotuning), which resolves `libdevice` for the
generated modules.
"""
from __future__ import annotations

import torch

# --------------------------------------------------------------------------- helpers
#: small @triton.jit functions a kernel may call; each generated module includes the ones
#: its kernel uses (so the module is self-contained and readable on its own). Kernels call
#: no @triton.jit function of triton.language itself (tl.sum, tl.zeros...): under the
#: interpreter those only work when TRITON_INTERPRET was set before triton was imported.
HELPERS = {
    "_bf16_rtne": '''
@triton.jit
def _bf16_rtne(x):
    # float32 -> bfloat16 rounded to nearest even, as the GPU's conversion and eager's do:
    # Triton's interpreter truncates (kernels on the CPU only; NaN kept as it is)
    u = x.to(tl.uint32, bitcast=True)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, u.to(tl.float32, bitcast=True)).to(tl.bfloat16)
''',
    "_sum_combine": '''
@triton.jit
def _sum_combine(a, b):
    return a + b
''',
    "_max_combine": '''
@triton.jit
def _max_combine(a, b):
    # NaN-propagating maximum, as torch.maximum / amax
    return tl.where((a != a) | (a > b), a, b)
''',
    "_min_combine": '''
@triton.jit
def _min_combine(a, b):
    return tl.where((a != a) | (a < b), a, b)
''',
    "_prod_combine": '''
@triton.jit
def _prod_combine(a, b):
    return a * b
''',
    "_online_softmax_combine": '''
@triton.jit
def _online_softmax_combine(m, s, x):
    # one more value x into each lane's running max m and sum s of exp(. - m): the sum so far
    # is rescaled to the new max (NaN propagates; a max of -inf is shifted by 0, not by itself)
    m_new = tl.where((m != m) | (m > x), m, x)
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    return m_new, s * libdevice.exp(m - shift) + libdevice.exp(x - shift)
''',
    "_online_softmax_reduce": '''
@triton.jit
def _online_softmax_reduce(m, s):
    # the lanes of each row → the row's max and sum of exp(x - max), as [XBLOCK, 1] blocks
    row_max = tl.reduce(m, 1, _max_combine)[:, None]
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    return row_max, tl.reduce(s * libdevice.exp(m - shift), 1, _sum_combine)[:, None]
''',
    "_argmax_combine": '''
@triton.jit
def _argmax_combine(a, a_index, b, b_index):
    # (value, index) pairs: the larger value wins, NaN beats everything, ties go to the
    # smaller index (torch.argmax returns the first occurrence)
    a_nan = a != a
    b_nan = b != b
    better = (a > b) | (a_nan & (b == b))
    same = (a == b) | (a_nan & b_nan)
    take_a = better | (same & (a_index < b_index))
    return tl.where(take_a, a, b), tl.where(take_a, a_index, b_index)
''',
    "_argmin_combine": '''
@triton.jit
def _argmin_combine(a, a_index, b, b_index):
    a_nan = a != a
    b_nan = b != b
    better = (a < b) | (a_nan & (b == b))
    same = (a == b) | (a_nan & b_nan)
    take_a = better | (same & (a_index < b_index))
    return tl.where(take_a, a, b), tl.where(take_a, a_index, b_index)
''',
    "_floordiv_int": '''
@triton.jit
def _floordiv_int(a, b):
    # Python floor division; Triton's // truncates toward zero like C
    quot = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), quot - 1, quot)
''',
    "_floordiv_float": '''
@triton.jit
def _floordiv_float(a, b):
    # torch's div_floor for floating point (ATen/native/BinaryOps.h); % is fmod here
    mod = a % b
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floordiv = tl.floor(div)
    floordiv = tl.where(div - floordiv > 0.5, floordiv + 1.0, floordiv)
    result = tl.where(div != 0, floordiv, (a / b) * 0.0)
    return tl.where(b == 0, a / b, result)
''',
    "_python_mod": '''
@triton.jit
def _python_mod(a, b):
    # the sign of the result follows the divisor (torch.remainder)
    rem = a % b
    return tl.where((rem != 0) & ((rem < 0) != (b < 0)), rem + b, rem)
''',
    "_pow_int": '''
@triton.jit
def _pow_int(base, exp):
    # integer power by squaring, exact like eager
    result = base * 0 + exp * 0 + 1
    b = base + exp * 0
    e = exp + base * 0
    for _ in tl.static_range(63):
        result = tl.where((e & 1) != 0, result * b, result)
        b = b * b
        e = e >> 1
    if exp.dtype.is_int_signed():  # (unsigned: no negative exponents, and -1 is no value)
        negative = tl.where(base == 1, 1, tl.where(base == -1, tl.where((exp & 1) != 0, -1, 1), 0))
        result = tl.where(exp < 0, negative, result)
    return result
''',
}


def libdevice_module():
    try:
        from triton.language.extra import libdevice
    except ImportError:  # Triton 2.x
        from triton.language.math import libdevice  # type: ignore
    return libdevice


class InterpreterLibdevice:
    """`libdevice.tanh(x)` etc. for the Triton interpreter, computed with torch.

    An interpreted Triton tensor holds a NumPy array in `x.handle.data`; each function
    converts it to torch, applies the torch function of the same meaning, and wraps the
    result back in a Triton tensor of the argument's type."""

    _TORCH = {
        "expm1": torch.expm1, "log10": torch.log10, "log1p": torch.log1p, "tan": torch.tan,
        "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
        "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh,
        "atanh": torch.atanh, "erfc": torch.erfc, "lgamma": torch.lgamma, "trunc": torch.trunc,
        "nearbyint": torch.round, "rint": torch.round, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
        "exp": torch.exp, "log": torch.log, "erf": torch.erf, "floor": torch.floor,
        "ceil": torch.ceil, "isnan": torch.isnan, "isinf": torch.isinf,
        "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
        "pow": torch.pow, "fmod": torch.fmod, "signbit": torch.signbit,
    }

    def __getattr__(self, name):
        fn = self._TORCH.get(name) or getattr(torch.special, name, None) or getattr(torch, name, None)
        if fn is None:
            raise AttributeError(f"libdevice.{name} has no interpreter implementation")

        def apply(*args):
            import numpy as np
            import triton.language as tl
            from triton.runtime.interpreter import TensorHandle

            first = next(a for a in args if isinstance(a, tl.tensor))
            values = [torch.from_numpy(np.asarray(a.handle.data)) if isinstance(a, tl.tensor)
                      else torch.tensor(a, dtype=torch.float64) for a in args]
            out = fn(*values)
            np_dtype = np.asarray(first.handle.data).dtype
            data = out.numpy().astype(np.bool_ if out.dtype == torch.bool else np_dtype)
            scalar = tl.int1 if out.dtype == torch.bool else first.dtype
            shape = np.broadcast_shapes(*[np.shape(a.handle.data) for a in args if isinstance(a, tl.tensor)])
            data = np.broadcast_to(data, shape).copy()
            ty = tl.block_type(scalar, list(first.shape)) if first.shape else scalar
            return tl.tensor(TensorHandle(data, scalar), ty)
        return apply


_interpreter_patched = False


def patch_interpreter_comparisons():
    """Work around a Triton interpreter bug (seen in 3.x): a comparison's result holds
    NumPy bools but is labelled with its operands' type (int64, float32...). Harmless
    for a block, but a 0-d one (a condition on constants or on a scalar load: `tmp1 >=
    tmp2` with `tmp1 = tl.full([], 1, tl.int64)`) is *splatted* into a block by the
    label's type, so `xmask & tmp3` turns into int64/int32 data and `tl.load(..., mask)`
    fails with "mask has unsupported dtype". Compiled kernels are unaffected. Relabel the
    results tl.int1, as the compiler types them; idempotent."""
    global _interpreter_patched
    if _interpreter_patched:
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    def relabelled(create):
        def compare(self, lhs, rhs):
            out = create(self, lhs, rhs)
            if out.dtype != tl.int1 and np.asarray(out.data).dtype == np.bool_:
                out = TensorHandle(out.data, tl.int1)
            return out
        return compare

    for name in dir(InterpreterBuilder):
        if name.startswith(("create_icmp", "create_fcmp")):
            setattr(InterpreterBuilder, name, relabelled(getattr(InterpreterBuilder, name)))
    _interpreter_patched = True
