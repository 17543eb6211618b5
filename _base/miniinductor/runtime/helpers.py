"""Small functions the generated wrapper calls at run time."""
from __future__ import annotations

import torch


def _reinterpret(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
    """`t`'s memory seen with another size/stride; `offset` counts from `t`'s first element."""
    return t.as_strided(size, stride, t.storage_offset() + offset)


_guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
#: the same in C++ (what Inductor's wrappers call: a third of as_strided's time), if present
reinterpret = getattr(_guards, "_reinterpret_tensor", _reinterpret)


def _empty_strided_on(device: str):
    return lambda size, stride, dtype: torch.empty_strided(size, stride, dtype=dtype, device=device)


#: `empty_strided(size, stride, dtype)` on the CPU / the *current* CUDA device, through the
#: C++ fast paths Inductor's wrappers use (a third of torch.empty_strided's time), if present
empty_strided_cpu = getattr(_guards, "_empty_strided_cpu", None) or _empty_strided_on("cpu")
empty_strided_cuda = getattr(_guards, "_empty_strided_cuda", None) or _empty_strided_on("cuda")


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
