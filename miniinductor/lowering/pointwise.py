"""Lowerings of elementwise ATen ops: broadcasting, type promotion, one `Pointwise` each.

Mirrors `make_pointwise`/`register_pointwise` in `torch/_inductor/lowering.py`.
`make_pointwise(fn, inputs)` broadcasts the inputs to one shape, casts each to the
computation dtype, and returns a `Pointwise` whose `inner_fn` loads every input at the
same index and calls `fn`; the result stays inlinable until the graph realizes it.
Simplified: type promotion is `torch._prims_common.elementwise_dtypes` (eager's rules);
float16/bfloat16 compute in float32, as Inductor does.
"""
from __future__ import annotations

import itertools

import sympy
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as KIND
from torch._prims_common import elementwise_dtypes

from ..ir.nodes import InputBuffer, IRNode, Pointwise, StorageBox, View, unwrap_buffer
from ..ir.sizevars import is_float_expr, is_static
from ..virtualized import V, ops
from .registry import aten, prims, register_lowering


def is_ir(x) -> bool:
    return isinstance(x, IRNode)


def broadcast_shapes(*sizes) -> list[int]:
    if all(map(is_static, itertools.chain(*sizes))):
        return list(torch.broadcast_shapes(*[tuple(s) for s in sizes]))
    out = []   # symbolic: a dim is its non-1 sizes' (proved or guarded equal)
    for dims in itertools.zip_longest(*[list(reversed(s)) for s in sizes], fillvalue=1):
        longer = [d for d in dims if d != 1]
        out.append(longer[0] if longer else 1)
        for d in longer[1:]:
            V.graph.sizevars.guard_equals(d, longer[0])
    return out[::-1]


def expand_to(x: IRNode, size: list[int]) -> IRNode:
    """Broadcast `x` to `size`: leading new dims and size-1 dims read index 0."""
    old = x.get_size()
    if list(old) == list(size):
        return x
    skip = len(size) - len(old)

    def reindex(index):
        return [0 if n == 1 else index[skip + k] for k, n in enumerate(old)]
    return View(x, size, reindex)


def meta_of(x):
    """A stand-in for promotion rules: tensors keep their rank (0-d ranks below n-d); a size
    is an int scalar, a float of the sizes (`ToFloat(s1)`) a float one."""
    if is_ir(x):
        return torch.empty([n if is_static(n) else 2 for n in x.get_size()], dtype=x.get_dtype(), device="meta")
    return (2.0 if is_float_expr(x) else 2) if isinstance(x, sympy.Expr) else x


def promote(args, kind) -> tuple[torch.dtype, torch.dtype]:
    """(computation dtype, result dtype) for an elementwise op over `args`."""
    return elementwise_dtypes(*[meta_of(a) for a in args if a is not None], type_promotion_kind=kind)


def device_of(args) -> torch.device:
    for a in args:
        if is_ir(a):
            return a.get_device()
    return V.graph.current_device()


def loader_in(x, size, dtype):
    """fn(index) → the value of `x` (IR node or Python scalar) at `index`, as `dtype`."""
    if isinstance(x, sympy.Expr):   # a size used as a value (x / x.shape[0], x / sym_float(s1))
        return lambda index: ops.index_expr(x, dtype)
    if not is_ir(x):
        return lambda index: ops.constant(x, dtype)
    load = expand_to(x, size).make_loader()
    if x.get_dtype() == dtype:
        return load
    return lambda index: ops.to_dtype(load(index), dtype)


def make_pointwise(fn, args, compute_dtype, out_dtype=None, size=None) -> StorageBox:
    """The Pointwise computing `fn(*loaded args)` in `compute_dtype`, stored as `out_dtype`."""
    out_dtype = out_dtype or compute_dtype
    if size is None:
        size = broadcast_shapes(*[a.get_size() for a in args if is_ir(a)])
    loaders = [loader_in(a, size, compute_dtype) for a in args]

    def inner_fn(index):
        value = fn(*[load(index) for load in loaders])
        return value if out_dtype == compute_dtype else ops.to_dtype(value, out_dtype)
    return StorageBox(Pointwise(device_of(args), out_dtype, inner_fn, size))


def register_pointwise(aten_op, name=None, kind=KIND.DEFAULT, compute_in_input_dtype=False):
    """`aten_op(a, b, ...)` → `ops.<name>(a, b, ...)` with eager's type promotion."""
    name = name or aten_op._name.split("::")[-1]

    @register_lowering(aten_op)
    def lower(*args, **kwargs):
        compute, out = promote(args, kind)
        if compute_in_input_dtype:
            compute = args[0].get_dtype()
        return make_pointwise(lambda *v: getattr(ops, name)(*v), args, compute, out)
    return lower


for _name in ("neg abs floor ceil trunc sign bitwise_not bitwise_and bitwise_or bitwise_xor "
              "maximum minimum fmod copysign").split():
    register_pointwise(getattr(aten, _name), _name)
for _name in ("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh "
              "tanh asinh acosh atanh erf erfc lgamma sigmoid reciprocal atan2 hypot").split():
    register_pointwise(getattr(aten, _name), _name, KIND.INT_TO_FLOAT)
for _aten, _name in (("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"),
                     ("ge", "ge"), ("logical_and", "logical_and"), ("logical_or", "logical_or"),
                     ("logical_xor", "logical_xor"), ("logical_not", "logical_not")):
    register_pointwise(getattr(aten, _aten), _name, KIND.ALWAYS_BOOL)
for _name in ("isnan", "isinf", "signbit"):
    register_pointwise(getattr(aten, _name), _name, KIND.ALWAYS_BOOL, compute_in_input_dtype=True)
register_pointwise(aten.remainder, "mod")
register_pointwise(aten.floor_divide, "floordiv")
for _aten in (aten.bitwise_left_shift, aten.__lshift__):   # `x << s` is aten.__lshift__
    register_pointwise(_aten, "bitwise_left_shift")
for _aten in (aten.bitwise_right_shift, aten.__rshift__):
    register_pointwise(_aten, "bitwise_right_shift")
register_pointwise(aten.round.default, "round")


@register_lowering(aten.add, aten.sub)
def add_sub(a, b, alpha=1):
    name = "add" if V.graph.current_target().overloadpacket is aten.add else "sub"
    compute, out = promote((a, b), KIND.DEFAULT)
    if alpha != 1:
        return make_pointwise(lambda x, y, s: getattr(ops, name)(x, ops.mul(y, s)), (a, b, alpha), compute, out)
    return make_pointwise(getattr_op(name), (a, b), compute, out)


def getattr_op(name):
    return lambda *v: getattr(ops, name)(*v)


@register_lowering(aten.mul)
def mul(a, b):
    compute, out = promote((a, b), KIND.DEFAULT)
    if compute == torch.bool:
        return make_pointwise(getattr_op("logical_and"), (a, b), compute, out)
    return make_pointwise(getattr_op("mul"), (a, b), compute, out)


@register_lowering(prims.fma)
def fma(a, b, c):
    """a * b + c (lerp's decomposition): rounded twice unless the C++ compiler contracts it
    into one fused multiply-add; either way within an ulp of ATen's single rounding."""
    compute, out = promote((a, b, c), KIND.DEFAULT)
    return make_pointwise(lambda x, y, z: ops.add(ops.mul(x, y), z), (a, b, c), compute, out)


@register_lowering(aten.div, aten.true_divide)
def div(a, b, rounding_mode=None):
    if rounding_mode is None:
        compute, out = promote((a, b), KIND.INT_TO_FLOAT)
        return make_pointwise(getattr_op("truediv"), (a, b), compute, out)
    compute, out = promote((a, b), KIND.DEFAULT)
    if rounding_mode == "floor":
        return make_pointwise(getattr_op("floordiv"), (a, b), compute, out)
    if compute.is_floating_point:
        return make_pointwise(lambda x, y: ops.trunc(ops.truediv(x, y)), (a, b), compute, out)
    return make_pointwise(getattr_op("truediv"), (a, b), compute, out)  # C++ int `/` truncates


@register_lowering(aten.pow)
def pow_(a, b):
    compute, out = promote((a, b), KIND.BOOL_TO_LONG)
    if not is_ir(b) and b in (2, 2.0):
        return make_pointwise(lambda x: ops.mul(x, x), (a,), compute, out, size=a.get_size())
    if not is_ir(b) and b in (0.5,) and compute.is_floating_point:
        return make_pointwise(getattr_op("sqrt"), (a,), compute, out, size=a.get_size())
    return make_pointwise(getattr_op("pow"), (a, b), compute, out)


@register_lowering(aten.where)
def where(cond, a, b):
    compute, out = promote((a, b), KIND.DEFAULT)
    size = broadcast_shapes(*[x.get_size() for x in (cond, a, b) if is_ir(x)])
    loaders = [loader_in(cond, size, torch.bool), loader_in(a, size, compute), loader_in(b, size, compute)]

    def inner_fn(index):
        c, x, y = (load(index) for load in loaders)
        value = ops.where(c, x, y)
        return value if compute == out else ops.to_dtype(value, out)
    return StorageBox(Pointwise(device_of((cond, a, b)), out, inner_fn, size))


@register_lowering(aten.clamp, aten.clamp_min, aten.clamp_max)
def clamp(x, min=None, max=None):
    target = V.graph.current_target().overloadpacket
    if target is aten.clamp_max:
        min, max = None, min
    compute, out = promote((x, min, max), KIND.DEFAULT)

    def fn(v, *bounds):
        bounds = list(bounds)
        if min is not None:
            v = ops.maximum(v, bounds.pop(0))
        if max is not None:
            v = ops.minimum(v, bounds.pop(0))
        return v
    return make_pointwise(fn, [a for a in (x, min, max) if a is not None], compute, out)


@register_lowering(aten._to_copy, prims.convert_element_type)
def to_copy(x, dtype=None, **kwargs):
    device = kwargs.get("device")
    if device is not None and torch.device(device) != x.get_device():
        raise NotImplementedError("device copy")  # → fallback to ATen
    dtype = dtype or x.get_dtype()
    return make_pointwise(lambda v: v, (x,), dtype, size=x.get_size())


@register_lowering(aten.clone, aten.lift_fresh_copy, aten.alias, aten.detach)
def clone(x, **kwargs):
    return make_pointwise(lambda v: v, (x,), x.get_dtype(), size=x.get_size())


@register_lowering(aten.copy)
def copy(dst, src, non_blocking=False):
    return make_pointwise(lambda v: v, (src,), dst.get_dtype(), size=dst.get_size())


@register_lowering(aten.copy_)
def copy_(dst, src, non_blocking=False):
    """An input's new value (AOTAutograd ends a graph that mutates its inputs with
    `copy_(input, new_value)`: capture/aot.py), stored into the input's own memory."""
    target = unwrap_buffer(dst)
    if not isinstance(target, InputBuffer) or target.get_name() not in V.graph.mutated_inputs:
        raise NotImplementedError("copy_ into a value that is not a graph input")  # → ATen
    if target.get_device() != V.graph.current_device():   # (Adam's step count: a CPU scalar in a CUDA graph)
        raise NotImplementedError(f"copy_ into an input on {target.get_device()}, not the graph's device")  # → ATen
    return V.graph.mutate_input(target, copy(dst, src))


def constant_fill(size, value, dtype, device) -> StorageBox:
    """`value` everywhere: a number, or an expression of the sizes (`scalar_tensor(s0)`)."""
    return StorageBox(Pointwise(device, dtype, loader_in(value, size, dtype), list(size)))


def _dtype_device(kwargs, fallback_dtype=None):
    meta = V.graph.current_meta()
    dtype = kwargs.get("dtype") or (meta.dtype if meta is not None else fallback_dtype)
    # the meta's device names its index ('cuda:0' where the call said 'cuda')
    device = meta.device if meta is not None else (kwargs.get("device") or V.graph.current_device())
    return dtype, torch.device(device)


@register_lowering(aten.full, aten.empty, aten.empty_strided, aten.zeros, aten.ones,
                   aten.new_full, aten.full_like, aten.empty_like, aten.scalar_tensor)
def full(*args, **kwargs):
    dtype, device = _dtype_device(kwargs)
    packet = V.graph.current_target().overloadpacket
    size = V.graph.current_size()
    if packet in (aten.full, aten.new_full, aten.full_like):
        value = args[-1]
    elif packet is aten.scalar_tensor:
        value = args[0]
    elif packet is aten.ones:
        value = 1
    else:
        value = 0  # empty*: any value is allowed, zeros keep outputs deterministic
    return constant_fill(list(size), value, dtype, device)


@register_lowering(aten.arange, prims.iota)
def arange(*args, **kwargs):
    dtype, device = _dtype_device(kwargs)
    if V.graph.current_target().overloadpacket is prims.iota:
        start, step = kwargs["start"], kwargs["step"]
    else:
        start, end, step = ((0, args[0], 1) if len(args) == 1 else (list(args) + [1])[:3])
        start, step = kwargs.get("start", start), kwargs.get("step", step)

    def inner_fn(index):
        i = ops.index_expr(index[0], torch.int64)
        if float(start) == int(start) and float(step) == int(step) and not dtype.is_floating_point:
            value = ops.index_expr(index[0] * int(step) + int(start), torch.int64)
        else:
            value = ops.add(ops.mul(ops.to_dtype(i, torch.float64), ops.constant(float(step), torch.float64)),
                            ops.constant(float(start), torch.float64))
        return ops.to_dtype(value, dtype)
    return StorageBox(Pointwise(device, dtype, inner_fn, V.graph.current_size()))




@register_lowering(prims.div)
def prims_div(a, b):
    """prims.div truncates for integers and divides exactly for floats."""
    compute, out = promote((a, b), KIND.DEFAULT)
    return make_pointwise(getattr_op("truediv"), (a, b), compute, out)  # ops.truediv is C's `/`


@register_lowering(aten.gelu)
def gelu(x, approximate="none"):
    compute = torch.float32 if x.get_dtype() in (torch.float16, torch.bfloat16) else x.get_dtype()

    def fn(v):
        half = ops.mul(v, ops.constant(0.5, compute))
        if approximate == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            cube = ops.mul(ops.mul(v, v), v)
            inner = ops.mul(ops.constant(0.7978845608028654, compute),
                            ops.add(v, ops.mul(ops.constant(0.044715, compute), cube)))
            return ops.mul(half, ops.add(ops.constant(1.0, compute), ops.tanh(inner)))
        return ops.mul(half, ops.add(ops.constant(1.0, compute),
                                     ops.erf(ops.mul(v, ops.constant(0.7071067811865476, compute)))))
    return make_pointwise(fn, (x,), compute, x.get_dtype(), size=x.get_size())


@register_lowering(aten.relu)
def relu(x):
    return make_pointwise(getattr_op("relu"), (x,), x.get_dtype(), size=x.get_size())
