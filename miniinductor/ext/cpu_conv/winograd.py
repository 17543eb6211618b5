"""Winograd convolutions (C++ backend, inference): an FX pass over the ATen graph that puts
`miniinductor::winograd_conv3x3` (winograd_kernel.py: F(2x2, 3x3), 2.25x fewer multiplies
than the direct convolution, the products as one MKL bmm) in place of each
`aten.convolution` it fits:

    3x3 weight, stride 1, padding 1, no dilation, one group, not transposed; float32 on the
    CPU; static sizes with even output height and width; at least MIN_CHANNELS channels in
    and out and MIN_TILES output tiles; an inference graph (a training graph keeps ATen's convolution, and its layouts).

Lowering then gives the op a channels-last input (our transposing copy, lowering/strides.py's
`require_channels_last`, hooked into lowering below) and reads
its channels-last output as it reads a convolution's: the eval BatchNorm and ReLU after it fuse
into one kernel that writes the NCHW result.

Not in Inductor, which sends every convolution to ATen (oneDNN's own Winograd kernel is not
one ATen selects). Measured in docs/benchmarks.md ("Winograd"). Rounding differs from the
direct convolution's by a few ulps of the sums (the transforms' adds): on randn inputs the
error against float64 is the same size (tests/ext/cpu_conv/test_winograd.py).
"""
from __future__ import annotations

import torch

from ...codegen.policy import BackendPolicy
from ...config import Config
from ...lowering.matmul import left_to_aten
from ...lowering.registry import aten
from .winograd_kernel import winograd_conv3x3

#: both channel counts at least this: thinner, the bmm's [tiles, C] x [C, K] products run far
#: below MKL's rate while the transforms cost the same per channel
MIN_CHANNELS = 16
#: and at least this many 2x2 output tiles (batch x H/2 x W/2): below it the transforms and the
#: thin bmm lose to oneDNN's direct convolution (the benchmark row it wins, conv_bn_relu's
#: [8, 64, 32, 32], has this many; the issue's [4, 32, 28, 28] block and ResNet-18 at 64x64 lost)
MIN_TILES = 2048
OP = winograd_conv3x3._opoverload


def applies(conv: torch.fx.Node, config: Config) -> bool:
    """Does `conv` fit the op (the module docstring's list)?"""
    if conv.target is not aten.convolution.default or left_to_aten(conv, config):
        return False
    x, w, b, stride, padding, dilation, transposed, _, groups = conv.args
    out, wv = conv.meta.get("val"), getattr(w, "meta", {}).get("val")
    if not (isinstance(out, torch.Tensor) and isinstance(wv, torch.Tensor) and out.dim() == 4):
        return False
    values = [out, wv, x.meta.get("val")] + ([b.meta.get("val")] if isinstance(b, torch.fx.Node) else [])
    if any(not isinstance(v, torch.Tensor) or v.dtype != torch.float32 or v.device.type != "cpu" for v in values):
        return False
    if not all(isinstance(s, int) for s in [*out.shape, *wv.shape]):   # symbolic sizes
        return False
    _, k, h, wd = out.shape
    return (tuple(wv.shape[2:]) == (3, 3) and list(stride) == [1, 1] and list(padding) == [1, 1]
            and list(dilation) == [1, 1] and not transposed and groups == 1
            and h % 2 == 0 and wd % 2 == 0 and min(k, wv.shape[1]) >= MIN_CHANNELS
            and out.shape[0] * (h // 2) * (wd // 2) >= MIN_TILES)


def winograd_convolutions(gm: torch.fx.GraphModule, policy: BackendPolicy, config: Config, name: str) -> int:
    """Rewrite, in place, each convolution `applies` accepts in an inference graph (`name`, as
    ext/layout's `decide_layout_opt` reads it). Returns how many."""
    if policy.name != "cpp" or config.fallback_all or not config.winograd or name != "inference":
        return 0
    done = 0
    for conv in list(gm.graph.nodes):
        if not applies(conv, config):
            continue
        with gm.graph.inserting_before(conv):
            new = gm.graph.call_function(OP, tuple(conv.args[:3]))
        new.meta = dict(conv.meta)
        x, w = (a.meta["val"] for a in conv.args[:2])
        new.meta["val"] = OP(x, w, conv.args[2].meta["val"] if conv.args[2] is not None else None)  # fake: the strides
        conv.replace_all_uses_with(new)
        gm.graph.erase_node(conv)
        done += 1
    if done:
        gm.recompile()
    return done
