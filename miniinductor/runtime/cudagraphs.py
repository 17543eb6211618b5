"""CUDA graphs for mode="reduce-overhead": record a graph's launches once, replay them.

Mirrors, in small, `torch/_inductor/cudagraph_trees.py`. A compiled graph launches many
small kernels; at batch size 1 the CPU time to launch them is the cost. On the first call
we run `call` once to warm up (Triton compiles, the allocator settles), then record it in
a `torch.cuda.CUDAGraph`. Later calls copy each input into the recorded ("static") input
buffer -- but only when its address differs, so parameters, which keep their address,
are never copied -- replay the graph and return *clones* of the recorded outputs, so a
later replay can never overwrite a tensor the caller holds.

Simplified: one graph per compiled graph (no trees sharing a memory pool), outputs always
cloned (Inductor hands out the static outputs and detects reuse instead).
"""
from __future__ import annotations

import torch


def cudagraphify(call):
    """A boxed callable (takes a list) that records `call` on first use and replays it."""
    state = {}

    def run(args):
        if "graph" not in state:
            _record(call, list(args), state)
        else:
            for static, new in zip(state["inputs"], args):
                if isinstance(new, torch.Tensor) and static.data_ptr() != new.data_ptr():
                    static.copy_(new)
            state["graph"].replay()
        args.clear()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in state["outputs"]]

    run._boxed_call = True
    return run


def _record(call, args, state):
    # inputs that are parameters keep their own memory; the rest get a static copy
    static = [x if not isinstance(x, torch.Tensor) or isinstance(x, torch.nn.Parameter) else x.clone()
              for x in args]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call(list(static))  # warm-up: compiles Triton kernels, which must not happen while recording
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = call(list(static))
    graph.replay()  # recording does not run the kernels: run them once for this call
    state.update(graph=graph, inputs=static, outputs=list(outputs))
