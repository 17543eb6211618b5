"""The Triton backend: a peer of the C++ one (codegen/cpp*.py), not an extension. It writes
the kernels of GPU graphs, and of CPU graphs under `cpu_backend="triton"` (run by Triton's
interpreter), and is always on where its kernels are written.

    kernel.py, reduction.py   TritonKernel: a fused group as one @triton.jit kernel
    program.py                its program header, blocks, block sizes and launcher
    overrides.py              ops → Triton expressions (TritonOverrides)
    tiling.py                 which kernel a fused group gets: flat, tiled or mix-order
    policy.py                 block sizes, split reductions; its numbers in the backend policy
    softmax.py                online softmax: the decompositions and the lowering
    passes.py                 split_reductions (loop IR), precompile_kernels (load)
    runtime.py, helpers.py    loading, launching and autotuning; the kernels' helpers
    backend.py                its entries in the core's tables

The core never imports this package. `miniinductor/__init__.py` imports backend.py, after
the core's passes and before the extensions: it registers the backend in the core's tables
(passes.py: its kernel kind, policy numbers, passes, decompositions, partitioner op and the
wrapper's import line).
Mirrors `torch/_inductor/codegen/triton.py` and `torch/_inductor/runtime/` (see each module).
"""
