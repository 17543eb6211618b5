"""Phase 2: ATen FX graph → loop IR (see graph.py). Importing this package fills the
lowering table: one module per family of ops. Its passes around `GraphLowering.run` are
`unfuse_addmm`, `addmm_activation` and `prefetch_gemm_templates` (before, on the ATen graph);
the Triton backend adds `split_reductions` (after, on the loop IR: triton/passes.py) and the
lowering of its online softmax (triton/softmax.py)."""
from . import pointwise, pooling, reductions, views  # noqa: F401  (register lowerings)
from .graph import GraphLowering  # noqa: F401
from .matmul import addmm_activation, note_unused_tma, prefetch_gemm_templates, unfuse_addmm  # noqa: F401
from .registry import find_lowering, lowerings  # noqa: F401
