"""Layout optimisation: channels-last convolutions (CPU and GPU inference graphs).

oneDNN, behind ATen's CPU convolution, works in channels-last (NHWC); an NCHW input is
reordered inside every call. Real Inductor therefore decides, once per graph, to run its 2-D
convolutions channels-last (`GraphLowering.decide_layout_opt` in `torch/_inductor/graph.py`:
on the CPU, whenever the graph has a convolution) and its convolution lowering then requires
a channels-last input (`require_channels_last` in `torch/_inductor/lowering.py` and
`kernel/conv.py`). The convolution's output comes out channels-last, and the kernels that
read it follow its strides; graph outputs keep eager's strides (realize_output in
lowering/graph.py), so an epilogue writing NCHW reads NHWC: a transposing kernel, tiled
(codegen/cpp_loops.py).

Measured on `benchmarks/bench_cpu.py`'s conv_bn_relu (docs/benchmarks.md): ATen's convolution
runs faster on a channels-last input than on an NCHW one, by more than our copy to
channels-last and the transposing BN + ReLU cost. The weight is converted too, as Inductor
does: with a channels-last input and an NCHW weight ATen copies the weight to channels-last
inside the call (`aten::clone`); our copy of it shares a combo kernel with the input's.
On the GPU cuDNN's NCHW path reorders too (`nchwToNhwcKernel` inside the call, then an NCHW
kernel): conv-BN-ReLU eval took less GPU time channels-last (our Triton copy to NHWC, cuDNN's
NHWC kernel, the transposing BN + ReLU), about as Inductor's (docs/benchmarks_gpu.md).

Simplified against Inductor:
  * Decided where it was measured: C++ kernels and GPU graphs (`BackendPolicy.channels_last_conv`;
    Triton kernels on the CPU keep NCHW) and inference graphs only. The graph's convolutions
    are timed in both layouts instead of Inductor's rules (timing.py). In a training
    graph the saved activations keep eager's strides for the backward graph (which
    AOTAutograd compiled against them; Inductor reports its real strides back to
    AOTAutograd instead), so each convolution would add a transposing copy, and
    `convolution_backward` stays NCHW. Symbolic sizes keep NCHW too: the copies would be
    gathers there (cpp_loops.py tiles static sizes only), costing what the convolution gains.
  * The input and the weight are copied to channels-last at every call (with freezing, Inductor
    converts a constant weight once). Floating-point convolutions: 2-D, transposed or not; on
    the GPU 3-D ones too. The
    decision is logged (`miniinductor` logger, INFO) and kept in `GraphLowering.layout_opt`.
"""
from __future__ import annotations

import logging

import torch
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from ...ir.sizevars import as_exprs
from ...lowering.strides import channels_last_strides, require_channels_last
from .timing import channels_last_pays

log = logging.getLogger("miniinductor")
aten = torch.ops.aten


def _is_conv(node: torch.fx.Node) -> bool:
    """A floating-point convolution this pass may run channels-last (timing.py decides whether it
    pays): 2-D, transposed or not; on the GPU 3-D ones too. (On the CPU a 3-D convolution timed
    faster channels-last, but the instance norm after it read channels-last ran slower.)"""
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if node.target is not aten.convolution.default or not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        return False
    return x.dim() == 4 or (x.dim() == 5 and x.device.type == "cuda")


def _is_depthwise(node: torch.fx.Node) -> bool:
    w = node.args[1].meta.get("val") if node.target is aten.convolution.default else None
    return isinstance(w, torch.Tensor) and node.args[8] > 1 and w.shape[1] == 1 and not node.args[6]


def _winograd_op():
    """The Winograd convolution (ext/cpu_conv), looked up by name: channels-last too."""
    op = getattr(torch.ops.miniinductor, "winograd_conv3x3", None)
    return op.default if op is not None else None


def decide_layout_opt(gm: torch.fx.GraphModule, policy, config, name: str) -> bool:
    """Run this graph's 2-D convolutions channels-last? (Inductor's `decide_layout_opt`.)"""
    winograd = _winograd_op()
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and (_is_conv(n) or n.target is winograd)]
    static = all(isinstance(s, int) for n in convs for s in n.meta["val"].shape)
    decided = bool(convs) and static and config.layout_optimization and policy.channels_last_conv and name == "inference"
    # not timed: the Winograd op takes NHWC; depthwise convolutions (one input channel per
    # group, MobileNet's) gain channels-last in the kernels around them, which timing the
    # convolutions alone misses (Inductor keeps channels-last for them too)
    if decided and not any(n.target is winograd or _is_depthwise(n) for n in convs):
        decided = channels_last_pays(convs, lambda n: n.meta["val"] if "val" in n.meta else getattr(gm, n.target))
    if decided:
        log.info("layout_opt: %d convolution(s) of %s run channels-last", len(convs), name)
    return decided


def channels_last_conv(graph, node: torch.fx.Node, args) -> tuple[list, list | None] | None:
    """An entry of `passes.EXTERN_LAYOUTS`: under `graph.layout_opt`, a 2-D convolution takes
    its input channels-last, and so returns its output channels-last -- unless the input is
    NCHW as well (one channel), when ATen returns NCHW: what ATen does is found by running it
    on fake CPU tensors of the traced sizes (as Inductor's `conv_layout`; meta tensors would
    not say: their convolution ignores the layout). None for any other op."""
    if not (graph.layout_opt and _is_conv(node)):
        return None
    hint = graph.sizevars.size_hint
    with unset_fake_temporarily(), FakeTensorMode():
        size = [hint(n) for n in args[0].get_size()]
        x = torch.empty(size).contiguous(memory_format=torch.channels_last if len(size) == 4 else torch.channels_last_3d)
        out = node.target(x, torch.empty([hint(n) for n in args[1].get_size()]), None, *args[3:])
    channels_last = out.is_contiguous(memory_format=torch.channels_last if out.dim() == 4 else torch.channels_last_3d)
    stride = channels_last_strides(as_exprs(node.meta["val"].shape)) if channels_last else None
    return [require_channels_last(args[0]), require_channels_last(args[1]), *args[2:]], stride
