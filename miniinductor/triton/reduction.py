"""A Triton kernel's reductions (`TritonKernel.reduction`): persistent (the masked block
reduced at once) or looped (block-shaped accumulators updated in the `for roffset` loop and
reduced after it), argmax/argmin as (value, index) pairs, and softmax's online (max, sum of
exp) pair.

Mirrors `TritonKernel.reduction` of `torch/_inductor/codegen/triton.py`. Simplified: no
Welford reduction (the Triton policy computes a variance in two passes), no cooperative or
split reductions inside one kernel (passes.py splits them in two kernels).
"""
from __future__ import annotations

import torch

from ..codegen.common import compute_dtype
from .overrides import COMBINE, REDUCE_ROW, TRITON_TYPE, accumulator_dtype, reduction_init


def reduction(kernel, dtype, src_dtype, reduction_type, value):
    """`kernel.reduction`: the reduction's result as a CSEVariable of the kernel (x-shaped); a
    persistent kernel reduces its masked block, a looped one accumulates in the loop and
    reduces after it."""
    if kernel.tiled:
        raise NotImplementedError("a tiled pointwise kernel computes no reduction")
    text, vdtype, vdims = kernel._info(value)
    vdtype = vdtype or compute_dtype(src_dtype)
    acc_dtype = accumulator_dtype(reduction_type, dtype, vdtype)
    if reduction_type == "any" and vdtype != torch.bool:
        text = f"({text} != 0).to(tl.int32)"
    elif vdtype != acc_dtype:  # e.g. bools as int32, or a float16 sum accumulating in float32
        text = f"{text}.to({TRITON_TYPE[acc_dtype]})"
    if reduction_type in ("argmax", "argmin"):
        out_dtype = torch.int64
    elif reduction_type == "any" or (vdtype == torch.bool and reduction_type in ("max", "min")):
        out_dtype = torch.bool
    else:
        out_dtype = acc_dtype
    if not kernel.is_reduction:  # a reduction over no dims (of a 0-d tensor): the element itself
        if reduction_type in ("argmax", "argmin"):
            return kernel._gen("tl.full([], 0, tl.int64)", torch.int64, ())
        return kernel.to_dtype(kernel._gen(text, acc_dtype, vdims), out_dtype)
    if reduction_type == "online_softmax_reduce":
        return online_softmax_pair(kernel, text, acc_dtype)
    if reduction_type == "welford_reduce":   # the Triton policy never asks for it (BackendPolicy.welford)
        raise NotImplementedError("welford_reduce: Triton kernels compute a variance in two passes")
    init = reduction_init(reduction_type, acc_dtype)
    if reduction_type in ("argmax", "argmin"):
        return arg_reduction(kernel, reduction_type, text, init, acc_dtype)
    kind = "max" if reduction_type == "any" else reduction_type  # any = max of 0/1

    def finish(v):
        row = REDUCE_ROW[kind].format(v=v)
        return f"({row}) != 0" if out_dtype == torch.bool else row
    if not kernel._looped():
        masked = kernel._gen(f"tl.where(xmask & rmask, {text}, {init})", acc_dtype, "xr")
        return kernel._gen(finish(masked), out_dtype, "x")
    block, acc = kernel._current(), kernel._new_acc()
    block.prefix.writeline(f"{acc} = tl.full([XBLOCK, RBLOCK], {init}, {TRITON_TYPE[acc_dtype]})")
    combined = COMBINE[kind].format(acc=acc, v=text)
    kernel._note_helpers(combined)
    block.body.writeline(f"{acc} = tl.where(xmask & rmask, {combined}, {acc})")
    return kernel._gen(finish(acc), out_dtype, "x", buffer=block.suffix)


def online_softmax_pair(kernel, text, dtype):
    """(row max, sum of exp(x - max)) in one pass (softmax.py): looped, each lane
    of the [XBLOCK, RBLOCK] block keeps a running max and sum, rescaled when the max grows
    (`_online_softmax_combine`), and the lanes of a row are combined after the loop
    (`_online_softmax_reduce`). Persistent, the lanes are the row's elements themselves
    (max x, sum 1). Computed once per loop: the max's buffer and the sum's share it."""
    block = kernel._current()
    if (found := kernel.online_softmax_done.get((id(block), text))) is not None:
        return found
    kernel.helpers.update(("_online_softmax_combine", "_online_softmax_reduce", "_max_combine", "_sum_combine"))
    ttype = TRITON_TYPE[dtype]
    if kernel._looped():
        acc = kernel._new_acc()
        block.prefix.writelines([f"{acc}_max = tl.full([XBLOCK, RBLOCK], float(\"-inf\"), {ttype})",
                                 f"{acc}_sum = tl.full([XBLOCK, RBLOCK], 0, {ttype})"])
        block.body.writelines([
            f"{acc}_max_next, {acc}_sum_next = _online_softmax_combine({acc}_max, {acc}_sum, {text})",
            f"{acc}_max = tl.where(xmask & rmask, {acc}_max_next, {acc}_max)",
            f"{acc}_sum = tl.where(xmask & rmask, {acc}_sum_next, {acc}_sum)"])
        lanes, out = (f"{acc}_max", f"{acc}_sum"), block.suffix
    else:
        lanes = (f"tl.where(xmask & rmask, {text}, float(\"-inf\"))", f"tl.where(xmask & rmask, 1.0, 0.0).to({ttype})")
        out = kernel.compute
    found = kernel.online_softmax_done[(id(block), text)] = (kernel.cse.newvar(dtype, "x"), kernel.cse.newvar(dtype, "x"))
    out.writeline(f"{found[0]}, {found[1]} = _online_softmax_reduce({lanes[0]}, {lanes[1]})")
    return found


def arg_reduction(kernel, reduction_type, text, init, acc_dtype):
    """argmax/argmin: reduce (value, index) pairs; ties keep the first index."""
    combine = f"_{reduction_type}_combine"
    kernel.helpers.add(combine)
    if not kernel._looped():
        masked = kernel._gen(f"tl.where(xmask & rmask, {text}, {init})", acc_dtype, "xr")
        var = kernel.cse.newvar()
        kernel.compute.writeline(
            f"_, {var} = tl.reduce(({masked}, tl.broadcast_to(rindex, [XBLOCK, RBLOCK])), 1, {combine})")
        return kernel._gen(f"{var}[:, None].to(tl.int64)", torch.int64, "x")
    block, acc = kernel._current(), kernel._new_acc()
    block.prefix.writeline(f"{acc} = tl.full([XBLOCK, RBLOCK], {init}, {TRITON_TYPE[acc_dtype]})")
    block.prefix.writeline(f"{acc}_index = tl.full([XBLOCK, RBLOCK], {2**31 - 1}, tl.int64)")
    block.body.writelines([
        f"{acc}_next, {acc}_index_next = {combine}({acc}, {acc}_index, {text}, rindex)",
        f"{acc} = tl.where(xmask & rmask, {acc}_next, {acc})",
        f"{acc}_index = tl.where(xmask & rmask, {acc}_index_next, {acc}_index)"])
    var = kernel.cse.newvar()
    block.suffix.writeline(f"_, {var} = tl.reduce(({acc}, {acc}_index), 1, {combine})")
    return kernel._gen(f"{var}[:, None].to(tl.int64)", torch.int64, "x", buffer=block.suffix)
