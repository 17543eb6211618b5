"""A pass over the ATen graph before lowering (C++ backend): float32 matmuls of a Linear's
form sent to oneDNN (`mkldnn._linear_pointwise`) where this machine runs them faster than
ATen's BLAS call -- timed once per problem at compile time, the answer kept on disk.

Eager's `addmm` on the CPU calls the BLAS PyTorch was built with (MKL on x86); oneDNN's
matmul is PyTorch's other CPU GEMM, with the bias and an activation applied to each tile of
the result while it is still in cache (its "post-ops"). Which is faster depends on the
machine and the shape: a Linear + GELU MLP of benchmarks/bench_cpu.py ran faster as oneDNN
calls with the GELU fused than as `addmm` and a `gelu`, a mid-sized matmul about as fast
either way, and a single row slower in oneDNN (its per-call cost; docs/benchmarks.md). So the
choice is timed, as max_autotune times its choices on the GPU: both candidates run on random
operands of the node's shapes and strides, interleaved, five rounds each; oneDNN is taken
when its best round is at least `MARGIN` faster. The table goes to the `autotune` log and the
winner into the autotune cache (triton/runtime.py, `AutotuneCache`), keyed by the
problem, the CPU's name, the thread count and the torch version.

    addmm(b, x, w)                      -> _linear_pointwise(x, w.t(), b, "none")
    _addmm_activation(b, x, w, gelu)    -> _linear_pointwise(x, w.t(), b, "gelu", algorithm "none": erf)
    mm(x, w)                            -> _linear_pointwise(x, w.t(), None, "none")
(`w.t()` of a Linear's `weight.t()` is the weight itself: the views cancel in lowering.)

Mirrors, loosely, `torch/_inductor/fx_passes/mkldnn_fusion.py`, which rewrites a Linear and
its activation into the same op under freezing, with the weight prepacked; ours needs no
freezing (the weight is read as it is) and decides by timing, not by a rule. Left out:
prepacked weights, bfloat16/float16, batched matmuls, relu (it stays a C++ kernel in place:
oneDNN's relu post-op turns a NaN into 0 where eager's keeps it, measured; its GELU and no
post-op keep NaN and inf where eager's do, tests/ext/cpu_conv/test_onednn.py),
and the C++ wrapper (its calls go through AOTInductor's ATen shim, which has no oneDNN op).
Where a matmul is a single row our own reduction kernel computes it (lowering/matmul.py,
`vector_matrix`): those are left alone. Only a Linear's own operands are candidates: a
row-major input and a weight whose transpose is row-major (`x @ weight.t()`). A backward's
`g.t() @ x` or `g @ weight` oneDNN would copy first (it wants those layouts), an allocation
the memory plan does not see: a training step's peak then rose above eager's
(tests/core/test_memory.py, once, where the timing chose oneDNN by noise).
"""
from __future__ import annotations

import functools
import json
import time

import torch

from ...codegen.policy import BackendPolicy
from ...config import Config
from ...logs import get_logger
from ...lowering.matmul import left_to_aten
from ...lowering.registry import aten
from ...triton.runtime import AutotuneCache

log = get_logger("autotune")

#: oneDNN must be at least this much faster (its best round against ATen's) to be taken:
#: a 2-core machine's round-to-round noise is a few per cent
MARGIN = 0.95
#: smaller problems (M * K * N multiply-adds) stay ATen's untimed: oneDNN's fixed cost a call
#: is already as long as ATen's whole call there, and at 2**20 the timing was a coin toss: a
#: two-block GPT-2 test step's 64 x 64 x 256 once went to oneDNN by noise and its peak memory
#: rose above eager's (tests/core/test_memory.py)
MIN_MACS = 1 << 21
ROUNDS = 5
ROUND_S = 2e-3   # calls per round: enough for ~2 ms


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def linear_pointwise():
    return torch.ops.mkldnn._linear_pointwise.default


def post_op(attr: str) -> tuple:
    """`_linear_pointwise`'s last three arguments for the post-op `attr` (GELU: the erf one)."""
    return attr, [], "none" if attr == "gelu" else ""


def _random(value: torch.Tensor) -> torch.Tensor:
    """A real tensor of `value`'s shape and strides (a fake one's), random normal."""
    size, stride = [int(n) for n in value.shape], [int(s) for s in value.stride()]
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride) if n > 0)
    return torch.randn(span).as_strided(size, stride)


def _best_us(fns: dict) -> dict:
    """{name: best µs per call over ROUNDS rounds}, the candidates' rounds interleaved."""
    calls = {}
    for name, fn in fns.items():
        fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(1, min(100, int(ROUND_S / max(time.perf_counter() - start, 1e-7))))
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls[name] * 1e6)
    return best


def onednn_is_faster(node: torch.fx.Node, attr: str) -> bool:
    """Time the node's ATen call against its oneDNN form on operands like its own."""
    values = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in node.args]
    bias, a, b = (None, *values) if node.target is aten.mm.default else values[:3]
    problem = [str(node.target), [list(a.shape), list(a.stride())], [list(b.shape), list(b.stride())], bias is not None, attr]
    cache = AutotuneCache(json.dumps(["onednn", problem, _cpu_name(), torch.get_num_threads(), torch.__version__]))
    if (winner := cache.get()) is not None:
        return winner == "onednn"
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily(), torch.no_grad():   # (lowering runs under a fake mode: these must be real)
        args = [_random(v) if isinstance(v, torch.Tensor) else v for v in values]
        x, w = args[-2:]
        bias_arg = None if node.target is aten.mm.default else args[0]
        times = _best_us({"aten": lambda: node.target(*args, **node.kwargs),
                          "onednn": lambda: linear_pointwise()(x, w.t(), bias_arg, *post_op(attr))})
    winner = "onednn" if times["onednn"] < MARGIN * times["aten"] else "aten"
    log.info("AUTOTUNE %s(%s) on the CPU: ATen %.1f us, oneDNN %.1f us -> %s", node.target,
             ", ".join("x".join(map(str, v.shape)) for v in (a, b)), times["aten"], times["onednn"], winner)
    cache.put(winner, [[times[k], k] for k in sorted(times, key=times.get)])
    return winner == "onednn"


@functools.lru_cache(maxsize=None)
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return ""


def candidate(node: torch.fx.Node, policy: BackendPolicy, config: Config) -> str | None:
    """The oneDNN post-op ("none" or "gelu") that would replace `node`, or None where it cannot."""
    if node.target is aten.mm.default or (node.target is aten.addmm.default and not node.kwargs):
        attr = "none"
    elif node.target is aten._addmm_activation.default and node.kwargs == {"use_gelu": True}:
        attr = "gelu"
    else:
        return None
    values = [getattr(x, "meta", {}).get("val") for x in node.args]
    if len(values) != (2 if node.target is aten.mm.default else 3) or left_to_aten(node, config) or not all(
            isinstance(v, torch.Tensor) and v.dtype == torch.float32 and v.device.type == "cpu" for v in values):
        return None
    a, b = values[-2:]
    static = all(isinstance(n, int) for v in values for n in (*v.shape, *v.stride()))
    if not static or a.dim() != 2 or b.dim() != 2 or policy.vector_matrix(a, b) or a.numel() * b.shape[1] < MIN_MACS:
        return None
    if not (a.is_contiguous() and b.t().is_contiguous()):
        return None   # (a Linear's own form only: other strides oneDNN copies, raising the peak)
    if node.target is not aten.mm.default and list(values[0].shape) != [b.shape[1]]:
        return None   # (a bias that is not one value per column)
    return attr


def onednn_linear(gm: torch.fx.GraphModule, policy: BackendPolicy, config: Config) -> int:
    """Rewrite, in place, each float32 `addmm` / `_addmm_activation(gelu)` / `mm` that oneDNN
    computes faster here into `mkldnn._linear_pointwise`. Returns how many it rewrote."""
    if not (config.onednn_linear and policy.name == "cpp" and not config.cpp_wrapper and available()):
        return 0
    found = [(n, attr) for n in gm.graph.nodes if (attr := candidate(n, policy, config)) is not None]
    found = [(n, attr) for n, attr in found if onednn_is_faster(n, attr)]
    for node, attr in found:
        bias, a, b = (None, *node.args) if node.target is aten.mm.default else node.args
        with gm.graph.inserting_before(node):
            weight = gm.graph.call_function(aten.permute.default, (b, [1, 0]))   # [N, K]
            weight.meta = {"val": b.meta["val"].permute(1, 0)}
            fused = gm.graph.call_function(linear_pointwise(), (a, weight, bias, *post_op(attr)))
        fused.meta = dict(node.meta)
        node.replace_all_uses_with(fused)
        gm.graph.erase_node(node)
    if found:
        gm.recompile()
    return len(found)
