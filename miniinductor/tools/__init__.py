"""Tools: everything that sits above the compiler and is not part of it.

The printers, trace folders, fusion graphs and HTML report (debug/), the accuracy
debugger (debug/accuracy.py) and `compare` (debug/compare.py), the command line
(cli.py, behind `python -m miniinductor`), the demo, the tour, the graded exercises, the
model zoo (zoo/), the GPT-2 block and MLP of the demo and tests (models.py), and real
library models (real_models/). They import the compiler; the core (capture/ → lowering/ →
ir/ → scheduler/ → codegen/ → runtime/, compile_fx.py and the modules beside them) never
imports them (tests/core/test_imports.py checks): only the package's `__init__.py` re-exports
`debug_accuracy`, `compare` and `explain` and wires the trace folder writer in.
"""
