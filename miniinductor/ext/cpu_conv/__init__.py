"""Extension `cpu_conv`: the C++ backend's convolution and linear paths: oneDNN linears,
eval BatchNorm folded into a convolution, ReLU moved after max-pooling, and Winograd
F(2x2, 3x3) convolutions (onednn.py, conv_affine.py, winograd.py and its op in
winograd_kernel.py). The ops they put in the graph run in ATen (extern calls, logged quietly);
the Winograd op's input is stored channels-last (an `EXTERN_LAYOUTS` entry)."""
from ...config import Option, declare_extension
from ...lowering.graph import EXTERN_BY_DESIGN
from ...lowering.strides import require_channels_last
from ...passes import EXTERN_LAYOUTS, Pass, register
from .conv_affine import fold_conv_affine, relu_after_max_pool
from .onednn import onednn_linear
from .winograd import OP as WINOGRAD
from .winograd import winograd_convolutions

declare_extension("cpu_conv", "C++: oneDNN linears, conv + BatchNorm folding, Winograd convolutions", (
    Option("winograd", bool, True, "C++ backend, inference: 3x3 stride-1 float32 convolutions by Winograd F(2x2, "
           "3x3) (ext/cpu_conv/winograd_kernel.py: 2.25x fewer multiplies)."),
    Option("onednn_linear", bool, True, "C++ backend: float32 Linear-shaped matmuls (and a GELU after one) through "
           "oneDNN where compile-time timing finds it faster than ATen's BLAS.")))


def _cpp(ctx) -> bool:
    return ctx.policy.name == "cpp"


register(Pass("aten_graph", "onednn_linear", lambda gm, ctx: ctx.note(onednn_linear(gm, ctx.policy, ctx.config)),
              "cpu_conv", enabled=lambda ctx: _cpp(ctx) and ctx.config.onednn_linear,
              doc="C++: float32 Linear-shaped matmuls (+ GELU) → oneDNN where timed faster"))
register(Pass("aten_graph", "fold_conv_affine",
              lambda gm, ctx: ctx.note(fold_conv_affine(gm, ctx.policy, ctx.config)), "cpu_conv", enabled=_cpp,
              doc="C++: a per-channel affine after a convolution → its weight and bias"))
register(Pass("aten_graph", "relu_after_max_pool",
              lambda gm, ctx: ctx.note(relu_after_max_pool(gm, ctx.policy, ctx.config)), "cpu_conv", enabled=_cpp,
              doc="C++: max_pool(relu(y)), indices unread → relu(max_pool(y))"))
register(Pass("aten_graph", "winograd_convolutions",
              lambda gm, ctx: ctx.note(winograd_convolutions(gm, ctx.policy, ctx.config, ctx.name)), "cpu_conv",
              enabled=lambda ctx: _cpp(ctx) and ctx.config.winograd,
              doc="C++, inference: 3x3 stride-1 convolutions → Winograd F(2x2, 3x3)"))

EXTERN_BY_DESIGN.update({"_linear_pointwise", "winograd_conv3x3"})


def _winograd_layout(graph, node, args):
    """The Winograd op takes its input channels-last always (winograd_kernel.py)."""
    return ([require_channels_last(args[0]), *args[1:]], None) if node.target is WINOGRAD else None


EXTERN_LAYOUTS.append(("cpu_conv", _winograd_layout))
