"""Reference solution of exercise 07 (the memory reuse key)."""
TARGET = "miniinductor.codegen.memory_planning.MemoryPlan._key"


def _key(buf):
    lay = buf.layout
    return lay.device, lay.dtype, lay.storage_numel()
