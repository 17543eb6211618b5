"""Phase 6: build, cache and load what codegen wrote (cpp_builder.py, helpers.py)."""
