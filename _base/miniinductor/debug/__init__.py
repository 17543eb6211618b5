"""Phase 7: seeing what happened -- log switches (logs.py) and `explain` (explain.py)."""
