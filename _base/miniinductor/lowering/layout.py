"""Layout optimisation: channels-last convolutions (CPU and GPU inference graphs).

oneDNN, behind ATen's CPU convolution, works in channels-last (NHWC); an NCHW input is
reordered inside every call. Real Inductor therefore decides, once per graph, to run its 2-D
convolutions channels-last (`GraphLowering.decide_layout_opt` in `torch/_inductor/graph.py`:
on the CPU, whenever the graph has a convolution) and its convolution lowering then requires
a channels-last input (`require_channels_last` in `torch/_inductor/lowering.py` and
`kernel/conv.py`). The convolution's output comes out channels-last, and the kernels that
read it follow its strides; graph outputs keep eager's strides (realize_output in graph.py),
so an epilogue writing NCHW reads NHWC: a transposing kernel, tiled (codegen/cpp_loops.py).

Measured at [8, 64, 32, 32] x Conv2d(64, 64, 3), two shared cores (`benchmarks/bench_cpu.py`
conv_bn_relu, docs/benchmarks.md): ATen's convolution alone took 4.6-6.7 ms on an NCHW input
(it varies from process to process) and 3.9-4.4 ms on a channels-last one; our copy to
channels-last 0.13 ms and the transposing BN + ReLU 0.21 ms (0.29 ms in place, NCHW). The
weight is converted too, as Inductor does: on an AMD EPYC (2 threads; docs/benchmarks.md, "Wider
column tiles, the convolution weight channels-last") that convolution took 2.51 ms NCHW, 2.41
with a channels-last input and an NCHW weight (which ATen then copies to channels-last inside
the call: `aten::clone`, ~30 us), 2.38 with both; the ResNet stem's 7x7 convolution of [8, 3,
112, 112] 6.9 / 2.47 / 2.38 ms. Our copy of the [64, 64, 3, 3] weight (147 KB) shares a combo
kernel with the input's.

On the GPU cuDNN's NCHW path reorders too (`nchwToNhwcKernel` inside the call, then an
sm80 NCHW kernel): conv-BN-ReLU eval at [32, 64, 56, 56] on an H100 took 99.0 us of GPU time a
call NCHW and 78.0 channels-last (our Triton copy to NHWC, cuDNN's sm90 NHWC kernel, the
transposing BN + ReLU), Inductor 78.2 (docs/benchmarks_gpu.md).

Simplified against Inductor:
  * Decided where it was measured: C++ kernels and GPU graphs (`BackendPolicy.channels_last_conv`;
    Triton kernels on the CPU keep NCHW) and inference graphs only; Inductor's GPU heuristics
    (few channels, grouped convolutions) are left out. In a training
    graph the saved activations keep eager's strides for the backward graph (which
    AOTAutograd compiled against them; Inductor reports its real strides back to
    AOTAutograd instead), so each convolution would add a transposing copy, and
    `convolution_backward` stays NCHW. Symbolic sizes keep NCHW too: the copies would be
    gathers there (cpp_loops.py tiles static sizes only), costing what the convolution gains.
  * The input and the weight are copied to channels-last at every call (with freezing, Inductor
    converts a constant weight once). Non-transposed 4-D floating-point convolutions only. The
    decision is logged (`miniinductor` logger, INFO) and kept in `GraphLowering.layout_opt`.

Also here, the layouts taken from eager (graph.py): an output's strides (`storable_stride`),
size-1 dims included (`eager_view`), and the layout of memory an `as_strided` reads
(`read_by_as_strided`), as Inductor's `GraphLowering.run_node` requires exact strides there.
"""
from __future__ import annotations

import dataclasses
import logging

import torch
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from ..ir.nodes import IRNode, Layout, Pointwise, ReinterpretView, StorageBox, strided_view_of
from ..ir.sizevars import as_exprs, is_static
from ..virtualized import V

log = logging.getLogger("miniinductor")
aten = torch.ops.aten


def _is_2d_conv(node: torch.fx.Node) -> bool:
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    return (node.target is aten.convolution.default and isinstance(x, torch.Tensor) and x.dim() == 4
            and x.dtype.is_floating_point and not node.args[6])   # args[6]: transposed


def decide_layout_opt(gm: torch.fx.GraphModule, policy, config, name: str) -> bool:
    """Run this graph's 2-D convolutions channels-last? (Inductor's `decide_layout_opt`.)"""
    winograd = torch.ops.miniinductor.winograd_conv3x3.default   # (lowering/winograd.py: channels-last too)
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and (_is_2d_conv(n) or n.target is winograd)]
    static = all(isinstance(s, int) for n in convs for s in n.meta["val"].shape)
    decided = bool(convs) and static and config.layout_optimization and policy.channels_last_conv and name == "inference"
    if decided:
        log.info("layout_opt: %d convolution(s) of %s run channels-last", len(convs), name)
    return decided


def channels_last_strides(size) -> list:
    """[N, C, H, W] → the strides of channels-last memory: [C*H*W, 1, W*C, C]."""
    n, c, h, w = size
    return [c * h * w, 1, w * c, c]


def same_strides(layout: Layout, stride) -> bool:
    """Whether `layout` has the strides `stride` (None: any) on its dims longer than 1."""
    return stride is None or all(a == b for a, b, n in zip(layout.stride, as_exprs(stride), layout.size)
                                 if n != 1)


def require_channels_last(x: IRNode) -> IRNode:
    """`x` stored channels-last: a value not yet stored is stored so, a buffer (or a strided
    view of one) already channels-last is kept, anything else is copied (Inductor's
    `ExternKernel.require_channels_last`)."""
    stride = channels_last_strides(x.get_size())
    if isinstance(x, StorageBox) and not x.is_realized():
        return x.realize(stride)
    x.realize()
    found = strided_view_of(x)
    if found is not None and same_strides(found[1], stride):
        return x
    copy = Pointwise(x.get_device(), x.get_dtype(), x.make_loader(), x.get_size(), origins={V.graph.current_node_name()})
    return StorageBox(copy).realize(stride)


def constrain_extern(graph, node: torch.fx.Node, args) -> tuple[list, list | None]:
    """(the args an extern op gets, the strides of its output, None: the meta's): under
    `graph.layout_opt`, a 2-D convolution takes its input channels-last, and so returns its
    output channels-last -- unless the input is NCHW as well (one channel), when ATen returns
    NCHW: what ATen does is found by running it on fake CPU tensors of the traced sizes (as
    Inductor's `conv_layout`; meta tensors would not say: their convolution ignores the layout).
    The Winograd convolution (lowering/winograd.py) takes its input channels-last always."""
    if node.target is torch.ops.miniinductor.winograd_conv3x3.default:   # it needs channels-last (runtime/winograd.py)
        return [require_channels_last(args[0]), *args[1:]], None
    if not (graph.layout_opt and _is_2d_conv(node)):
        return list(args), None
    hint = graph.sizevars.size_hint
    with unset_fake_temporarily(), FakeTensorMode():
        x = torch.empty([hint(n) for n in args[0].get_size()]).contiguous(memory_format=torch.channels_last)
        out = node.target(x, torch.empty([hint(n) for n in args[1].get_size()]), None, *args[3:])
    channels_last = out.is_contiguous(memory_format=torch.channels_last)
    stride = channels_last_strides(as_exprs(node.meta["val"].shape)) if channels_last else None
    return [require_channels_last(args[0]), require_channels_last(args[1]), *args[2:]], stride


def eager_view(buf, layout: Layout, meta):
    """`buf` read through `layout` (one of its strided views, or its own layout) as a graph
    output: `buf` itself, or a ReinterpretView. Its size-1 dims take eager's strides from
    `meta`: they never move the index, but show in the output's `.stride()` (`x.view(-1, 1,
    2)` is (2, 2, 1) in eager, wherever the kernel's layout put its size-1 dim)."""
    stride = as_exprs(meta.stride()) if isinstance(meta, torch.Tensor) and meta.dim() == len(layout.size) else None
    if stride is not None:
        layout = dataclasses.replace(layout, stride=[e if n == 1 else s for s, e, n in
                                                     zip(layout.stride, stride, layout.size)])
    return buf if layout == buf.layout else ReinterpretView(buf, layout)


#: ops that address their input's memory by strides: it must be laid out as in eager
AS_STRIDED_OPS = (aten.as_strided.default, aten.as_strided_.default, aten.as_strided_scatter.default)


def read_by_as_strided(node: torch.fx.Node) -> bool:
    """Does an `as_strided` read this node's memory, directly or through views of it?"""
    return any(user.target in AS_STRIDED_OPS
               or (getattr(user.target, "is_view", False) and read_by_as_strided(user)) for user in node.users)


def storable_stride(size, stride) -> list[int] | None:
    """Eager's strides for a computed output, if a kernel can store them: every index its own
    element (gaps allowed: `torch.empty_strided((3, 3), (6, 1))` has them). Overlapping ones
    (an expand's 0) give None: contiguous (such outputs are views, found before this)."""
    if len(stride) != len(size):
        return None
    stride = as_exprs(stride)
    if not all(map(is_static, [*stride, *size])):   # symbolic: in the traced order, where provable
        known = V.graph.sizevars
        reach = 1
        for s, n in sorted(((s, n) for s, n in zip(stride, size) if n != 1), key=lambda p: known.size_hint(p[0])):
            if not known.statically_known_leq(reach, s):
                return None
            reach = s * n
        return stride
    reach = 1
    for s, n in sorted((s, n) for s, n in zip(stride, size) if n != 1):
        if s < reach:
            return None
        reach = s * n
    return list(stride)
