"""Which Triton kernel a fused group gets: flat or tiled (`tile_split`).

Mirrors the tiling choice of `torch/_inductor/codegen/simd.py` (`SIMDScheduling.select_tiling`).
Kept apart from triton.py (the kernel class): this is the core's kernel kind for Triton
(registered in triton/backend.py); extensions register kinds of their own ahead of it
(ext/mix_order's MixOrderKernel, a TritonKernel subclass).

Simplified: one tiling rule (a transposed access cuts the ranges in two) where Inductor
scores candidate tilings; no 3-D tiles. With symbolic sizes a group is never tiled (its
flat kernel is right for every size; the tile sizes and the 65535-program limit of the
second grid dim would depend on the sizes), and never mix-order (ext/mix_order/schedule.py).
"""
from __future__ import annotations

import math

import sympy

from ..codegen.common import affine_strides
from ..ir.indexing import canonical_vars
from ..ir.sizevars import is_static
from .kernel import TritonKernel


def kernel_for_group(group, config=None, removed_buffers=()) -> TritonKernel:
    """The kernel for a scheduler FusedGroup: its loops (R, Q); for a pointwise group, R
    walked in the order of its store (`store_order`) where every access is then contiguous
    along the innermost dim, else a 2-D tiling of R when it reads or writes memory
    transposed (see `tile_split`)."""
    if not group.Q:
        order = store_order(group)
        if order is not None and not _strided_inner(group, order):
            return TritonKernel(group.kernel_name, group.R, group.Q, config, removed_buffers, order=order)
    split = tile_split(group) if not group.Q else None
    if split is not None:
        return TritonKernel(group.kernel_name, group.R[:split], group.R[split:], config, removed_buffers, tiled=True)
    return TritonKernel(group.kernel_name, group.R, group.Q, config, removed_buffers, r_order=reduction_order(group))


def _coefficients(dep, cvars, sizes) -> list | None:
    """A dep's integer coefficient on each canonical variable, or None where it is not affine."""
    strides = affine_strides(dep.index, cvars, dict(zip(cvars, sizes)))
    return None if strides is None else [strides[v] for v in cvars]


def store_order(group) -> list[int] | None:
    """The order to walk a pointwise group's ranges R in (outermost first): the first store's
    dims by stride, largest outside (Inductor's `pick_loop_order`), so that a channels-last
    store walks C innermost; None to keep R's own order (already that, symbolic, or a store
    that is not affine). Without it, a channels-last max pool wrote and read C floats apart
    at every step of its block."""
    n = len(group.R)
    writes = [dep for node in group.nodes for dep in node.writes]
    if n < 2 or not writes or not all(map(is_static, group.R)):
        return None
    coeffs = _coefficients(writes[0], canonical_vars(n), group.R)
    if coeffs is None:
        return None
    # dims of one element first (any place serves them), then by decreasing stride
    order = sorted(range(n), key=lambda d: (int(group.R[d]) != 1, -coeffs[d]))
    return None if order == list(range(n)) else order


def reduction_order(group) -> list[int] | None:
    """The order to walk a reduction group's reduction ranges Q in (outermost first): by the
    strides of the reads that span them, largest outside, where that makes more of those reads
    contiguous along the innermost step than Q's own order does (a sum over C, H, W of a
    channels-last buffer then walks C innermost: without it, each step of the row jumped C
    floats). Inductor reorders reduction loops the same way (`pick_loop_order` over the
    reduction variables in `ComputedBuffer.simplify_and_reorder`). None: Q's own order (one dim,
    symbolic sizes, or argmin/argmax, whose index counts in the logical order)."""
    n, m = len(group.R), len(group.Q)
    if m < 2 or not all(map(is_static, group.Q)) or any(
            getattr(node.node.data, "reduction_type", None) in ("argmax", "argmin") for node in group.nodes):
        return None
    rows = [c[n:] for _, c in reduction_loads(group.nodes, group.R, group.Q) if any(c[n:])]
    return stride_order(rows, group.Q)


def reduction_loads(nodes, R, Q) -> list[tuple]:
    """(dep, its integer stride on each dim of R + Q) for each affine load of the `nodes` whose
    loops span R x Q: the loads in a reduction group's loop (ext/cost_model weighs them too)."""
    n = len(R) + len(Q)
    cvars, sizes = canonical_vars(n), list(R) + list(Q)
    return [(dep, c) for node in nodes if len(getattr(node, "outer", ())) + len(getattr(node, "inner", ())) == n
            for dep in node.reads if (c := _coefficients(dep, cvars, sizes)) is not None]


def stride_order(rows, sizes) -> list[int] | None:
    """The order of dims (outermost first) that walks the most of `rows` (each an access's
    integer stride per dim) one element at a time along the innermost dim: one access's dims
    by decreasing stride, dims of size 1 outermost; None where the dims' own order does as well."""
    def contiguous(order):
        return sum(row[order[-1]] == 1 for row in rows)
    if not rows:
        return None
    best = max((sorted(range(len(sizes)), key=lambda d: (sizes[d] != 1, -row[d])) for row in rows), key=contiguous)
    return best if contiguous(best) > contiguous(list(range(len(sizes)))) else None


def _strided_inner(group, order) -> bool:
    """Would some access in `order` step more than one element along the innermost dim while
    being contiguous along another (a transpose, which tiles instead)?"""
    n = len(group.R)
    cvars, inner = canonical_vars(n), order[-1]
    for node in group.nodes:
        for dep in node.reads + node.writes:
            coeffs = _coefficients(dep, cvars, group.R)
            if coeffs is not None and coeffs[inner] not in (0, 1) and 1 in (coeffs[d] for d in range(n) if d != inner):
                return True
    return False



def tile_split(group, min_size: int = 16) -> int | None:
    """Where to cut a pointwise group's ranges R into two tile dims, or None to flatten.

    A 1-D block walks memory in the order of the last dim; an access that is contiguous
    along an earlier dim d instead (a transpose: stride 1 on d, stride > 1 on the last dim)
    touches one element per cache line. Cutting R after d gives [XBLOCK, RBLOCK] tiles whose
    rows are contiguous for one access and whose columns are for the other; Triton swaps
    the layout through shared memory so both sides load and store coalesced."""
    n = len(group.R)
    if n < 2 or not all(map(is_static, group.R)):
        return None
    cvars = canonical_vars(n)   # the variables of the scheduler's MemoryDeps
    split = None
    for node in group.nodes:
        for dep in node.reads + node.writes:
            expr = sympy.expand(sympy.sympify(dep.index))
            last = expr.coeff(cvars[-1])
            if last in (0, 1) or not last.is_Integer:
                continue
            inner = [d for d in range(n - 1) if expr.coeff(cvars[d]) == 1]
            if inner:
                split = max(split or 0, inner[-1] + 1)
    if split is None or math.prod(group.R[:split]) < min_size or math.prod(group.R[split:]) < min_size:
        return None
    return split
