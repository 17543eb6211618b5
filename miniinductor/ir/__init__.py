"""Phase 3: the define-by-run loop IR (nodes.py), its SymPy indexing (indexing.py) and
size variables (sizevars.py); ir/interpreter.py evaluates it with torch."""
from .nodes import *  # noqa: F401,F403
