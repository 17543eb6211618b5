"""Phase 1: capture with AOTAutograd and our decomposition table."""
from .aot import compile_fx  # noqa: F401
from .decompositions import decomposition_table  # noqa: F401
