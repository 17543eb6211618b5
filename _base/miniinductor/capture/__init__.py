"""Phase 1: capture with AOTAutograd and our decomposition table."""
from .aot import capture  # noqa: F401
from .decompositions import decomposition_table  # noqa: F401
