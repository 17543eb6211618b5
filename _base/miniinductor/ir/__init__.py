"""Phase 3: the define-by-run loop IR (nodes.py), its SymPy indexing (indexing.py) and
an interpreter that evaluates it with torch (interpreter.py)."""
from .nodes import *  # noqa: F401,F403
