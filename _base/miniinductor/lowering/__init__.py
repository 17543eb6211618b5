"""Phase 2: ATen FX graph → loop IR (see graph.py). Importing this package fills the
lowering table: one module per family of ops. Its passes around `GraphLowering.run` are
`unfuse_addmm`, `addmm_activation`, `onednn_linear`, `fold_conv_affine`, `relu_after_max_pool`, `winograd_convolutions`
and `prefetch_gemm_templates` (before, on the ATen graph) and `split_reductions` (after, on the
loop IR)."""
from . import pointwise, pooling, reductions, softmax, views  # noqa: F401  (register lowerings)
from .conv_affine import fold_conv_affine, relu_after_max_pool  # noqa: F401
from .graph import GraphLowering  # noqa: F401
from .matmul import addmm_activation, note_unused_tma, prefetch_gemm_templates, unfuse_addmm  # noqa: F401
from .onednn import onednn_linear  # noqa: F401
from .reductions import split_reductions  # noqa: F401
from .registry import find_lowering, lowerings  # noqa: F401
from .winograd import winograd_convolutions  # noqa: F401
