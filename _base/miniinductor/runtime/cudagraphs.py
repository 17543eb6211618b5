"""CUDA graphs for mode="reduce-overhead": record a graph's launches once, replay them.

Mirrors, in small, `torch/_inductor/cudagraph_trees.py`. A compiled graph launches many
small kernels; at batch size 1 the CPU time to launch them is the cost. On the first call
we run `call` once to warm up (Triton compiles, the allocator settles), then record it in
a `torch.cuda.CUDAGraph`. Later calls copy each input into the recorded ("static") input
buffer -- but only when its address differs, so parameters, which keep their address,
are never copied -- replay the graph and return *clones* of the recorded outputs, so a
later replay can never overwrite a tensor the caller holds. The inputs a graph writes into
(an optimizer's parameters and state, BatchNorm's running statistics: capture/aot.py keeps
those mutations in the graph) are recorded at their own address too, and the warm-up run
is the first call's (a replay after it would apply the mutation twice); a later call that
passes another tensor there has it copied in, and its new value copied back out.

Simplified: one graph per compiled graph (no trees sharing a memory pool), outputs always
cloned (Inductor hands out the static outputs and detects reuse instead).
"""
from __future__ import annotations

import torch


def cudagraphify(call, mutated=()):
    """A boxed callable (takes a list) that records `call` on first use and replays it.
    `mutated`: the positions of the inputs the graph writes into."""
    state = {}

    def run(args):
        if "graph" not in state:
            outputs = _record(call, list(args), state, set(mutated))
        else:
            for static, new in zip(state["inputs"], args):
                if isinstance(new, torch.Tensor) and static.data_ptr() != new.data_ptr():
                    static.copy_(new)
            state["graph"].replay()
            for k in mutated:   # the new value, into a tensor the graph was not recorded with
                if args[k].data_ptr() != state["inputs"][k].data_ptr():
                    args[k].copy_(state["inputs"][k])
            outputs = state["outputs"]
        args.clear()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]

    run._boxed_call = True
    return run


def _record(call, args, state, mutated):
    """Record `call`; returns this first call's outputs (from the warm-up run)."""
    # parameters and the inputs the graph writes into keep their own memory; the rest get a static copy
    static = [x if not isinstance(x, torch.Tensor) or isinstance(x, torch.nn.Parameter) or k in mutated
              else x.clone() for k, x in enumerate(args)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # warm-up, which compiles Triton kernels (not allowed while recording), is this call's run:
        # recording runs nothing, and a replay now would write into the mutated inputs twice
        outputs = call(list(static))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        recorded = call(list(static))
    state.update(graph=graph, inputs=static, outputs=list(recorded))
    return outputs
