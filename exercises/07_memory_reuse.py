"""Memory reuse: when may a new buffer take the memory of a dead one?

Phase: codegen (memory planning). Mirrors the reuse keys of `torch/_inductor/codegen/wrapper.py`
(`ReuseLine`, `buffer_reuse_key`) and `codegen/memory_planning.py`.

The wrapper runs kernels and extern calls one after another. After its last use a buffer
is dead; `MemoryPlan` (miniinductor/codegen/memory_planning.py) puts dead buffers in a pool,
and a later allocation whose *key* equals a pooled buffer's key takes that memory
(`buf7 = buf3  # reuse`) instead of calling the allocator. `MemoryPlan._key(buf)` is that
key: two buffers may share memory exactly when their keys are equal. The new buffer then
views the memory with its own size and strides, so the shape may differ; what must agree:
  * the device (CPU memory cannot hold a CUDA tensor),
  * the element type (the kernel writes `float`s or `int64_t`s: the bytes are reinterpreted),
  * the number of elements the storage holds: `buf.layout.storage_numel()` (a bigger buffer
    would write past the end; a smaller one would keep memory that the plan counts as free).
`buf.layout` has `.device`, `.dtype`, `.size`, `.stride` and `.storage_numel()`.
Worked example: buf3 float32 [8, 16] (128 elements) is dead; buf7 float32 [16, 8] (128
elements) may take it; buf8 float32 [8, 8] may not; neither may an int64 [8, 16].

The stub below is the naive rule "same element type": it lets buffers of any size share.
Hint: return a tuple.
Run: python -m miniinductor exercise run 7
"""
TARGET = "miniinductor.codegen.memory_planning.MemoryPlan._key"


def _key(buf):
    return buf.layout.dtype
