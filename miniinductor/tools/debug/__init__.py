"""Phase 7: seeing what happened -- `explain` (explain.py), trace folders, the HTML report,
the accuracy debugger (the log switches are miniinductor/logs.py)."""
