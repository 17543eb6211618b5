"""Phase 2: ATen FX graph → loop IR (see graph.py). Importing this package fills the
lowering table: one module per family of ops."""
from . import matmul, pointwise, pooling, reductions, views  # noqa: F401  (register lowerings)
from .graph import GraphLowering  # noqa: F401
from .registry import find_lowering, lowerings  # noqa: F401
