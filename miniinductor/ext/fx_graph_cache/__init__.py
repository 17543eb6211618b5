"""Extension `fx_graph_cache`: a compiled ATen graph kept on disk, so that compiling the same
graph again (in another process, or after torch._dynamo.reset()) skips lowering, scheduling
and code generation.

Mirrors `FxGraphCache` of `torch/_inductor/codecache.py` and its use in
`torch/_inductor/compile_fx.py` (`compile_fx_inner` looks the graph up before compiling).
It wraps the driver's `compile_graph` (`passes.GRAPH_COMPILERS`). A lookup hashes the graph
and its details (key.py); a hit reads the entry (store.py: the generated wrapper's source and
the graph's constant tensors) and imports the wrapper as a compile would (its C++ kernels come
from the .so cache, its Triton kernels from Triton's), giving a `CompiledGraph` whose
`graph`, `scheduler` and `kernels` are empty: only what runs is kept. A miss compiles and
stores. The `cache` log (MINIINDUCTOR_LOGS=cache) says hit, miss and why (what differs from
the nearest entry of the same graph), bypass and why, and rebuilt (a corrupted entry).

Bypassed (neither looked up nor stored), each with its reason in the log: the options that
want a compile's artifacts (`trace`, `pass_snapshots`), `TORCH_TRACE` (tlparse's pages read
the lowered graph), a tool collecting compiled graphs
(`compile_fx.collect_compiled`: explain, compare, debug_accuracy, the report), `cudagraphs`
(its recording reads the lowered graph), code that patches the compiler (`bypassed`; a planted bug
empties passes' wrapper tables instead), and graphs with
symbolic sizes: Inductor keys on the symbolic expressions and records the ShapeEnv guards a
compile adds, to check them on a hit; we do neither, so those graphs compile every time.
Frozen parameters are constants of the graph: their contents are part of the key.

A second level, capture.py, mirrors `AOTAutogradCache`: it wraps `capture` (passes.CAPTURE_WRAPPERS)
and keys Dynamo's graph, so that a hit skips AOTAutograd too, loading the inference graph's
entry of this level; simplified to inference graphs whose AOTAutograd wrapper is trivial (no
training, mutations, aliased outputs...: those bypass it, their graphs still cached here).
Its log lines say `capture`: hit, miss, bypass, rebuilt and stored as above.
Simplified: no remote cache, no eviction. On a capture-level hit only Dynamo is left
(benchmarks/compile_cache.py measures it).
"""
from __future__ import annotations

import os

from ...config import Option, declare_extension
from ...passes import CAPTURE_WRAPPERS, GRAPH_COMPILERS
from . import capture
from .graph import bypassed, counters, log, wrap  # noqa: F401  (the package's names)

declare_extension("fx_graph_cache", "compiled graphs cached on disk, keyed by graph, inputs, options, versions", (
    Option("fx_graph_cache", bool, lambda: os.environ.get("MINIINDUCTOR_FX_GRAPH_CACHE", "1") != "0",
           "Keep each compiled graph on disk and reuse it when the same graph is compiled again (default: on "
           "unless $MINIINDUCTOR_FX_GRAPH_CACHE is 0)."),))

GRAPH_COMPILERS.append(("fx_graph_cache", wrap))
CAPTURE_WRAPPERS.append(("fx_graph_cache", capture.wrap))
#: what the capture level did in this process (capture.py)
capture_counters = capture.counters
