"""Small functions the generated wrapper calls at run time."""
from __future__ import annotations

import torch


def _reinterpret(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """`t`'s memory seen with another size/stride; `offset` counts from `t`'s first element."""
    return t.as_strided(size, stride, t.storage_offset() + offset)


#: the same in C++ (what Inductor's wrappers call: a third of as_strided's time), if present
reinterpret = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
reinterpret = getattr(reinterpret, "_reinterpret_tensor", _reinterpret)


def check_layout(t: torch.Tensor, size, stride) -> torch.Tensor:
    """Kernels index an extern op's output with the strides its meta function promised;
    if the real op returned other strides, copy into the promised layout (never misread)."""
    if t.stride() == stride and t.shape == size:   # the common case, checked first: it is cheap
        return t
    if tuple(t.shape) != tuple(size):
        raise RuntimeError(f"extern kernel returned shape {tuple(t.shape)}, expected {tuple(size)}")
    if all(a == b for a, b, n in zip(t.stride(), stride, size) if n > 1):
        return t
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out
