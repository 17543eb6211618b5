"""Phase 5: kernels (cpp.py) and the Python wrapper that runs them (wrapper.py)."""
