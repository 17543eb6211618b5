"""Triton kernels (miniinductor/triton/kernel.py), checked one kernel at a time.

Each case is lowered and scheduled as the compiler does it (make_fx with our
decompositions → compile_fx.lower → compile_fx.schedule), then every fused group becomes a
`TritonKernel` whose module is loaded and launched directly -- no wrapper. The
kernels run in schedule order on their own outputs (extern calls run in ATen), and
  * every buffer is compared with the IR interpreter (`ir.interpreter.run_graph`),
  * the graph outputs are compared with eager PyTorch.
Output buffers are filled with NaN (or an extreme integer) before each launch, so an
element a kernel forgets to write is caught.

Device: CUDA when available (or MINIINDUCTOR_TRITON_DEVICE=cuda), else CPU tensors
through Triton's interpreter (TRITON_INTERPRET=1, set here before any kernel is
decorated). The interpreter is slow: tensors stay small.
"""
from __future__ import annotations

import os

import pytest
import torch

_requested = os.environ.get("MINIINDUCTOR_TRITON_DEVICE")
DEVICE = _requested or ("cuda" if torch.cuda.is_available() else "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

triton = pytest.importorskip("triton")

import torch.nn.functional as F  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.capture.decompositions import decomposition_table  # noqa: E402
from miniinductor.compile_fx import lower, removable_buffers, schedule  # noqa: E402
from miniinductor.config import Config  # noqa: E402
from miniinductor.ir.interpreter import graph_outputs, run_extern, run_graph  # noqa: E402
from miniinductor.ir.nodes import ExternKernel  # noqa: E402
from miniinductor.lowering import GraphLowering  # noqa: E402
from miniinductor.passes import KERNEL_KINDS, Context  # noqa: E402
from miniinductor.scheduler import FusedGroup  # noqa: E402
from miniinductor.triton.kernel import TritonKernel  # noqa: E402
from miniinductor.triton.policy import reduction_splits  # noqa: E402
from miniinductor.triton.runtime import load_module  # noqa: E402
from miniinductor.virtualized import V  # noqa: E402


# --------------------------------------------------------------------------- harness
def _as_tuple(fn):
    """fn with its outputs flattened into one tuple (GraphLowering wants a flat list)."""
    def wrapped(*args):
        return tuple(torch.utils._pytree.tree_leaves(fn(*args)))
    return wrapped


def make_kernel(group, scheduler, config, setup=None) -> TritonKernel:
    """The Triton kernel of the first kernel kind that takes `group` (passes.KERNEL_KINDS:
    the mix-order and combo extensions' before the core's), whatever the device."""
    ctx = Context(config, None, None)
    kernel = next(k for _, _, make in KERNEL_KINDS["triton"] if (k := make(group, ctx)) is not None)
    kernel.removed = removable_buffers(group, scheduler, kernel)   # as compile_fx decides them
    for part in getattr(kernel, "subkernels", [kernel]) if setup is not None else ():
        setup(part)
    for node in group.nodes:
        kernel.codegen_node(node)
    return kernel


class Compiled:
    """A lowered, scheduled graph with one loaded Triton module per kernel."""

    def __init__(self, fn, inputs, config=None, setup=None):
        self.config = config or Config()
        gm = make_fx(_as_tuple(fn), decomposition_table=decomposition_table())(*inputs)
        self.graph = lower(gm, inputs, self.config)
        self.kernels, self.modules, self.sources = {}, {}, {}
        with V.set_graph_handler(self.graph):
            self.scheduler = schedule(self.graph, self.config)
            for group in self.scheduler.schedule:
                if isinstance(group, FusedGroup):
                    kernel = make_kernel(group, self.scheduler, self.config, setup)
                    group.kernel_name = kernel.record(group, len(self.kernels)).name   # as compile_fx names it
                    self.kernels[group.kernel_name] = kernel
                    self.sources[group.kernel_name] = kernel.codegen()
        for name, source in self.sources.items():
            # compiled on the GPU, interpreted on the CPU, whatever TRITON_INTERPRET another test
            # module of this pytest worker set (the interpreter rounds bfloat16 by truncation)
            self.modules[name] = load_module(source, interpret=DEVICE == "cpu")

    def run(self, inputs) -> dict[str, torch.Tensor]:
        """Run every step in schedule order; return {buffer name: tensor}."""
        memory = dict(zip(self.graph.graph_input_names, inputs))
        memory.update({k: v.to(DEVICE) for k, v in self.graph.constants.items()})
        for item in self.scheduler.schedule:
            if isinstance(item, FusedGroup):
                kernel = self.kernels[item.kernel_name]
                for name in item.get_names():
                    if name not in kernel.removed:
                        memory[name] = poisoned(self.graph.get_buffer(name).layout)
                launch = getattr(self.modules[item.kernel_name], kernel.launcher_name())
                launch(*[memory[n] for n in kernel.args.call_names()])
            else:
                memory[item.node.get_name()] = run_extern(item.node, memory)
        return memory

    def source(self) -> str:
        return "\n\n".join(self.sources.values())


def poisoned(layout) -> torch.Tensor:
    out = torch.empty_strided(layout.size, layout.stride, dtype=layout.dtype, device=DEVICE)
    if layout.dtype.is_floating_point:
        out.fill_(float("nan"))
    elif layout.dtype == torch.bool:
        out.fill_(True)
    else:
        out.fill_(torch.iinfo(layout.dtype).min)
    return out


TOLERANCES = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2),
              torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7)}


def assert_close(actual, expected, what, rtol=None, atol=None):
    r, a = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                               equal_nan=True, msg=lambda m: f"{what}: {m}")


def check(fn, *inputs, rtol=None, atol=None, setup=None, config=None, expect_kernels=None,
          interpret=True) -> Compiled:
    """Compile fn's kernels, run them, compare every buffer with the IR interpreter (unless
    `interpret=False`) and every output with eager."""
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in inputs]
    compiled = Compiled(fn, inputs, config, setup)
    if expect_kernels is not None:
        assert len(compiled.kernels) == expect_kernels, compiled.scheduler
    memory = compiled.run(inputs)
    with torch.no_grad():
        reference = reference_buffers(fn, inputs, compiled) if interpret else {}
        for name, kernel in compiled.kernels.items() if interpret else ():
            for buf in compiled.scheduler.schedule:
                if isinstance(buf, FusedGroup) and buf.kernel_name == name:
                    for bname in buf.get_names():
                        if bname not in kernel.removed:
                            assert_close(memory[bname], reference[bname], f"{bname} ({name})", rtol, atol)
        outputs = graph_outputs(compiled.graph, memory)
        expected = _as_tuple(fn)(*inputs)
    assert len(outputs) == len(expected)
    for k, (got, want) in enumerate(zip(outputs, expected)):
        assert got.shape == want.shape and got.dtype == want.dtype, (k, got.shape, want.shape, got.dtype)
        assert_close(got, want, f"output {k}", rtol, atol)
    return compiled


def reference_buffers(fn, inputs, compiled) -> dict[str, torch.Tensor]:
    """Every buffer computed by the IR interpreter (which runs on the CPU: on a GPU the
    graph is lowered again from CPU copies; buffer names come out the same)."""
    if DEVICE == "cpu":
        return run_graph(compiled.graph, inputs)
    cpu_inputs = [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs]
    gm = make_fx(_as_tuple(fn), decomposition_table=decomposition_table())(*cpu_inputs)
    config = compiled.config.replace(cpu_backend="triton")  # lowered as for the GPU
    return run_graph(lower(gm, cpu_inputs, config), cpu_inputs)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def with_nans(*shape):
    x = torch.randn(*shape)
    x.view(-1)[::7] = float("nan")
    return x


# --------------------------------------------------------------------------- pointwise
def test_pointwise_chain_with_broadcasting():
    c = check(lambda x, y, z: ((x + y).relu() * 2 - torch.sigmoid(z)) / (1 + y.abs()),
              randn(4, 1, 8), randn(8), randn(3, 1), expect_kernels=1)
    assert "@triton.jit" in c.source() and "def triton_poi_fused_abs_add_div_mul_relu_sigmoid_sub_0(" in c.source()
    assert "def launch_triton_poi_fused_abs_add_div_mul_relu_sigmoid_sub_0(" in c.source()


def test_contiguous_index_prints_as_xindex():
    c = check(lambda x: x * 2 + 1, randn(4, 8, 16))
    assert "tl.load(in_ptr0 + (xindex)" in c.source()


def test_transposed_input():
    check(lambda x: x.t() + 1, randn(6, 10))
    check(lambda x: (x.permute(2, 0, 1) * 3).contiguous(), randn(3, 4, 5))


def test_channels_last_walks_in_store_order():
    """A channels-last store whose accesses are all contiguous along C walks C innermost
    (`store_order`): flat, not tiled, the store and loads at xindex. Pooling such a tensor
    reads a window along C too."""
    x = randn(2, 16, 6, 5).to(memory_format=torch.channels_last)
    c = check(lambda x: (x * 2).relu().contiguous(memory_format=torch.channels_last), x)
    assert not any(k.tiled for k in c.kernels.values())
    assert "tl.store(out_ptr0 + (xindex)" in c.source() and "tl.load(in_ptr0 + (xindex)" in c.source()
    c = check(lambda x: torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1]), x)
    assert not any(k.tiled for k in c.kernels.values()) and "xindex % 16" in c.source(), c.source()



def test_channels_last_reduction_walks_c_innermost():
    """A sum over C, H and W of a channels-last tensor walks its row in memory order
    (`reduction_order`): one merged, contiguous index. An argmax keeps the logical order
    (its index counts in it), and still returns eager's (first) index."""
    x = randn(3, 16, 10, 12).to(memory_format=torch.channels_last)
    c = check(lambda x: x.sigmoid().sum((1, 2, 3)), x)
    assert "tl.load(in_ptr0 + (1920*i0 + rindex)" in c.source(), c.source()
    check(lambda x: (x * 2).sum((0, 2, 3)), x)
    ties = torch.randint(0, 3, (2, 8, 5, 6)).float().to(memory_format=torch.channels_last)
    check(lambda x: x.argmax(), ties)

def test_pooling_window_gets_two_elements_a_thread():
    """Nine gathered loads (stride 2 along the output's width): XBLOCK 512 and 8 warps
    (triton/policy.py, block_sizes); a plain pointwise kernel keeps 1024 and 4."""
    c = check(lambda x: F.max_pool2d(x, 3, 2, 1), randn(2, 8, 40, 40))
    (kernel,) = c.kernels.values()
    assert kernel.gathers >= 2 and kernel.block_sizes() == {"XBLOCK": 512, "num_warps": 8}
    (kernel,) = check(lambda x: x * 2 + 1, randn(4, 1024)).kernels.values()
    assert kernel.gathers == 0 and kernel.block_sizes() == {"XBLOCK": 1024, "num_warps": 4}


def test_transpose_is_tiled():
    c = check(lambda x, y: (x.t() + y, (x.t() * 2).exp()), randn(40, 70), randn(70, 40))
    assert all(k.tiled for k in c.kernels.values()) and "tl.program_id(1)" in c.source()
    c = check(lambda x: x.permute(0, 2, 1).contiguous() * 3, randn(3, 20, 33))
    assert all(k.tiled for k in c.kernels.values())
    check(lambda x: x.t().contiguous(), randn(20, 33, dtype=torch.bfloat16))


def test_math_functions():
    fns = lambda x: (torch.exp(x), torch.tanh(x), torch.erf(x), torch.log1p(x.abs()), torch.lgamma(x.abs() + 0.5),  # noqa: E731
                     torch.atan2(x, x + 1), torch.floor(x * 3), torch.round(x * 3), torch.rsqrt(x.abs() + 1),
                     torch.sign(x), torch.expm1(x), torch.sqrt(x.abs()), torch.pow(x.abs() + 0.1, 1.7))
    check(fns, with_nans(5, 7))


def test_special_values_and_predicates():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, float("inf"), float("-inf"), float("nan"), 1e-30])
    check(lambda x: (x.isnan(), x.isinf(), torch.signbit(x), torch.maximum(x, x.flip(0)),
                     torch.minimum(x, x.flip(0)), x.relu(), torch.sign(x)), x)


def test_integer_division_and_remainder():
    a = torch.tensor([7, -7, 7, -7, 0, 13, -13, 5], dtype=torch.int64)
    b = torch.tensor([2, 2, -2, -2, 3, 4, 4, -3], dtype=torch.int64)
    check(lambda a, b: (a // b, a % b, torch.fmod(a, b), a * 3 - b, torch.div(a, b, rounding_mode="trunc"),
                        a.abs(), -a, a & b, a | b, a ^ b, ~a, a << 2, a >> 1), a, b)
    check(lambda a, b: (torch.pow(a, b.abs()), torch.pow(a, 3), torch.pow(a.float(), b.float())), a, b)
    check(lambda a, b: (a // b, a % b, torch.fmod(a, b)),
          torch.tensor([7.5, -7.5, 7.5, -7.5, 1.0]), torch.tensor([2.0, 2.0, -2.0, -2.0, 0.3]))


def test_int32_int8_uint8_and_bool():
    a = torch.randint(-100, 100, (6, 5), dtype=torch.int32)
    check(lambda a: (a * 2 + 1, (a > 0) & (a < 50), a.to(torch.int8), (a.abs() % 256).to(torch.uint8) + 3,
                     (a > 0).to(torch.float32), a.to(torch.float32) / 3), a)
    m = torch.rand(4, 6) > 0.5
    check(lambda m: (~m, m | m.flip(1), m ^ m.flip(0), m.logical_not(), m.to(torch.int64) * 5), m)


def test_where_and_clamp():
    x, y = randn(5, 6), randn(5, 6)
    check(lambda x, y: (torch.where(x > 0, x, y * 2).clamp(-0.5, 0.5), torch.where(x > y, 1.0, 0.0),
                        x.clamp(min=0.1), torch.where(x < 0, torch.zeros_like(x), x)), x, y)


def test_constants_arange_and_scalar_tensors():
    check(lambda x, s: (x * s + torch.arange(6, device=x.device), torch.full((3, 2), 2.5, device=x.device),
                        torch.arange(10, dtype=torch.int64, device=x.device) * 3 - 4,
                        torch.arange(0.0, 2.0, 0.25, device=x.device)), randn(4, 6), torch.tensor(1.5))


# --------------------------------------------------------------------------- reductions
def test_sum_inner_outer_and_full():
    x = randn(12, 40)
    check(lambda x: (x.sum(-1), x.sum(0), x.sum(), x.mean(1, keepdim=True)), x)


def test_sum_of_3d_over_middle_and_several_dims():
    x = randn(4, 5, 6)
    check(lambda x: (x.sum(1), x.sum((0, 2)), x.amax((1, 2))), x)


def test_amax_amin_propagate_nan():
    x = with_nans(9, 13)
    check(lambda x: (x.amax(-1), x.amin(0), randn_like_zero(x).amax(1)), x)


def randn_like_zero(x):
    return torch.where(torch.isnan(x), torch.zeros_like(x), x)


def test_argmax_argmin_first_index_and_nan():
    x = torch.randint(0, 4, (7, 9)).float()   # many ties: the first index wins
    check(lambda x: (x.argmax(-1), x.argmin(-1), x.argmax(0), x.argmin(0), x.argmax()), x)
    check(lambda x: (x.argmax(-1), x.argmin(0)), with_nans(6, 10))
    check(lambda x: x.argmax(1), torch.randint(-5, 5, (4, 11)))


def test_prod_any_and_integer_sums():
    x = torch.rand(5, 6) + 0.5
    check(lambda x, i: (x.prod(-1), (x > 1.2).any(-1), (x > 10).any(0), (x > 1).sum(-1), x.to(torch.int64).sum(0),
                        i.amax(-1), i.amin(0), i.prod(-1), (i > 0).amax(-1)), x, torch.randint(-3, 3, (4, 5)))


def test_softmax_and_log_softmax():
    check(lambda x: (torch.softmax(x, -1), torch.log_softmax(x, 0)), randn(8, 33))


def test_layer_norm():
    x, w, b = randn(6, 48), randn(48), randn(48)
    check(lambda x, w, b: F.layer_norm(x, (48,), w, b), x, w, b)


def test_variance_two_reductions():
    check(lambda x: (torch.var(x, -1), torch.var_mean(x, 0)), randn(7, 30))


def test_looped_reductions():
    x = randn(3, 5000)
    c = check(lambda x: (x.sum(-1), x.amax(-1), x.argmax(-1), x.argmin(-1), (x > 3).any(-1)), x, rtol=1e-4, atol=1e-4)
    assert "for roffset in range(" in c.source()


def test_looped_softmax_fuses_into_one_kernel_with_two_loops():
    """The max and the sum share one online loop (prepare_softmax_online), the output a second."""
    x = randn(2, 4500)
    c = check(lambda x: torch.softmax(x, -1), x, rtol=1e-4, atol=1e-5, config=Config(cpu_backend="triton"))
    assert len(c.kernels) == 1
    assert c.source().count("for roffset in range") == 2 and "_online_softmax_combine(" in c.source()


def test_looped_outer_reduction():
    x = randn(4200, 6)
    c = check(lambda x: (x.sum(0), x.amax(0)), x, rtol=1e-4, atol=1e-4)
    assert any(k.is_outer_reduction() for k in c.kernels.values())


@pytest.mark.parametrize("n", [300, 5000])
def test_row_values_reread_after_the_reduction(n):
    """y is an output (kept in memory) that a later block reads again: persistent kernels
    reuse the value, looped ones reload it after a barrier."""
    def fn(a, b, c, d, e):
        y = a * 2 + b + c + d + e   # reads 5 buffers: stored once, not recomputed per use
        return y, y / y.sum(-1, keepdim=True), (y - y.amax(-1, keepdim=True)).exp()
    c = check(fn, *[randn(3, n) for _ in range(5)], rtol=1e-4, atol=1e-5)
    if n > 4096 and len(c.kernels) == 1:
        assert "tl.debug_barrier()" in c.source()


def test_layer_norm_looped():
    # cpu_backend="triton": on CPU tensors Config() lowers with the C++ policy, whose variance of a
    # 4400-element row is a Welford reduction (C++ only); Triton kernels get the Triton policy's
    x, w, b = randn(2, 4400), randn(4400), randn(4400)
    check(lambda x, w, b: F.layer_norm(x, (4400,), w, b), x, w, b, rtol=1e-4, atol=1e-4,
          config=Config(cpu_backend="triton"))


def test_zero_dim_reduction_and_outputs():
    check(lambda s, x: (s.sum(), s.amax(), s * 2, x.sum()), torch.tensor(2.5), randn(5))


# --------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_computes_in_float32(dtype):
    x, y = randn(6, 40, dtype=dtype), randn(40, dtype=dtype)
    c = check(lambda x, y: ((x * y + 1).sum(-1), torch.softmax(x, -1), (x - y).abs().amax(0), x.argmax(-1)), x, y)
    assert ".to(tl.float32)" in c.source()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_integers_to_low_precision(dtype):
    """int64/int32/bool -> float16/bfloat16: a mean's element count (cross-entropy's), a mask.
    Triton's interpreter cast the integer's bits instead of its value (2 -> 0.0), so a bfloat16
    cross-entropy under it was inf; on the GPU the direct cast was right all along."""
    i = torch.randint(-300, 300, (6, 9), device=DEVICE)
    check(lambda i, x: (i.to(dtype) * x, i.int().to(dtype) + 1, (i > 0).to(dtype), (i != 0).sum().to(dtype)),
          i, randn(6, 9, dtype=dtype))


def test_bfloat16_rounds_to_nearest_even():
    """float32 -> bfloat16 rounds to nearest even, as eager does: exactly eager's values for a
    cast, an add and a softmax (computed in float32 and rounded once). Triton's interpreter
    truncates; kernels on the CPU round by hand (`_bf16_rtne`), and 26% of an add's elements
    were one bfloat16 ulp off without it."""
    x, a, b = randn(40, 50), randn(40, 50, dtype=torch.bfloat16), randn(40, 50, dtype=torch.bfloat16)
    check(lambda x, a, b: (x.bfloat16(), a + b), x, a, b, rtol=0, atol=0)
    # the softmax is exact on the CPU, where both sides compute exp alike; on the GPU
    # libdevice's expf and eager's may differ by a float32 ulp, which can move a value across
    # a bfloat16 rounding boundary: one bfloat16 ulp (2**-8 relative) allowed there
    exact = DEVICE == "cpu"
    check(lambda a: torch.softmax(a, -1), a, rtol=0 if exact else 2**-8, atol=0 if exact else 1e-5)


def test_float64():
    check(lambda x: (torch.exp(x) * 2).sum(-1), randn(4, 9, dtype=torch.float64))


# --------------------------------------------------------------------------- masks and indirection
def test_cat_and_constant_pad():
    x, y = randn(3, 4), randn(3, 5)
    check(lambda x, y: (torch.cat([x, y], 1), torch.cat([x, x * 2], 0)), x, y)
    check(lambda x: (F.pad(x, (1, 2, 0, 1), value=-1.5), F.pad(x, (2, 2)).sum(-1)), randn(3, 4))


def test_cat_of_reshaped_transposes_loads_each_part_only_inside_it():
    # the q/k/v gradients of attention: each part's index divides `position - start`, which
    # is negative left of the part; a load there would truncate (C, Triton) to an address
    # outside the buffer (an illegal access on the GPU). The IR interpreter checks it.
    def fn(q, k, v):
        return torch.cat([t.transpose(1, 2).reshape(2, 4, 15) for t in (q, k, v)], -1)
    check(fn, randn(2, 3, 4, 5), randn(2, 3, 4, 5), randn(2, 3, 4, 5))


def test_gather_embedding_and_negative_indices():
    x = randn(5, 7)
    idx = torch.randint(0, 7, (5, 3))
    check(lambda x, i: torch.gather(x, 1, i), x, idx)
    w, tokens = randn(11, 6), torch.randint(0, 11, (2, 5))
    check(lambda w, t: F.embedding(t, w) * 2, w, tokens)
    neg = torch.tensor([-1, 0, -3, 2])
    check(lambda x, i: (x[i], x[:, i].sum(0)), x, neg)


def test_empty_tensors():
    # the IR interpreter cannot reduce over empty shapes: compare with eager only
    check(lambda x: (x + 1, x.sum(-1)), randn(0, 4), interpret=False)
    check(lambda x: (x.sum(-1), x.prod(-1), (x > 0).any(-1)), randn(3, 0), interpret=False)


# --------------------------------------------------------------------------- int64 indexing
def test_int64_indexing_is_used_for_huge_buffers():
    x = torch.empty(2**31 + 64, dtype=torch.int8, device="meta")
    gm = make_fx(_as_tuple(lambda x: x + 1))(x)
    graph = GraphLowering(gm, [x], Config()).run()
    with V.set_graph_handler(graph):
        sched = schedule(graph, Config())
        group = next(g for g in sched.schedule if isinstance(g, FusedGroup))
        source = make_kernel(group, sched, Config()).codegen()
    assert "tl.program_id(0).to(tl.int64)" in source


def test_int64_indexing_code_runs():
    def force_int64(kernel):
        kernel.max_numel = 2**31
    c = check(lambda x: (x.t() * 2, x.sum(0), x.argmax(-1)), randn(6, 10), setup=force_int64)
    assert "to(tl.int64)" in c.source()


# --------------------------------------------------------------------------- interface
def test_plain_ops_handler_interface():
    """The CppKernel-style entry point: store_body under V.set_ops_handler."""
    x = randn(4, 6).to(DEVICE)
    gm = make_fx(_as_tuple(lambda x: (x * 2).sum(-1)))(x)
    graph = GraphLowering(gm, [x], Config()).run()
    with V.set_graph_handler(graph):
        buf = graph.buffers[0]
        kernel = TritonKernel("kernel0", buf.get_size(), buf.get_reduction_ranges(), Config())
        with V.set_ops_handler(kernel):
            buf.store_body(kernel.itervars, kernel.reduction_vars)
        assert kernel.args.call_names() == ["arg0_1", buf.get_name()]
        source = kernel.codegen()
    out = torch.full((4,), float("nan"), device=DEVICE)
    load_module(source, interpret=DEVICE == "cpu").launch_kernel0(x, out)
    assert_close(out, (x * 2).sum(-1), "kernel0")


def test_unfused_config_still_correct():
    check(lambda x: torch.softmax(x, -1) * 2, randn(4, 10), config=Config(fusion=False))


# --------------------------------------------------------------------------- split reductions
def test_reduction_splits_heuristic():
    assert reduction_splits(1, 3 * 2**19, outer=False) == 256   # a full sum of a long row: 1 program, then 256
    assert reduction_splits(8, 200000, outer=False) == 32       # 8 long rows: 256 programs
    assert reduction_splits(768, 2048, outer=True) == 16        # a bias gradient: 16 chunks of 128 rows
    assert reduction_splits(4096, 16384, outer=True) == 128
    assert reduction_splits(64, 8192, outer=False) == 1         # softmax rows: 64 programs
    assert reduction_splits(2048, 768, outer=False) == 1        # layer norm rows
    assert reduction_splits(1, 100000, outer=False) == 1        # too little work to pay for a second launch
    assert reduction_splits(1, 3**12, outer=False) == 256       # no power of two divides it: a masked last chunk
    assert reduction_splits(128, 577600, outer=False) == 2      # long rows: 128 programs become 256
    assert reduction_splits(64, 8192, outer=False) == 1         # short ones stay whole


def split_partials(compiled) -> list:
    """The first halves of split reductions: reductions read by a reduction over their
    leading (`split`) dim."""
    nodes = [n for n in compiled.scheduler.nodes if n.is_reduction]
    return [n.node for n in nodes if n.node.get_size() and any(
        n.get_name() in m.read_names() and m.node.data.reduction_ranges == n.node.get_size()[:1] for m in nodes)]


@pytest.fixture
def small_splits(monkeypatch):
    """Split thresholds scaled down, so that small inputs are split: the interpreter runs
    a `tl.reduce` as one Python call per element of the row, and big inputs take minutes."""
    from miniinductor.triton import policy
    for name, value in dict(SPLIT_MIN_NUMEL=0, SPLIT_MIN_CHUNK=16, OUTER_CHUNK=16).items():
        monkeypatch.setattr(policy, name, value)


def test_split_column_and_full_reductions(small_splits):
    x = randn(256, 8)   # 8 columns of 256 rows
    compiled = check(lambda x: (x.sum(0), x.amax(0), x.sum(), (x > 2.0).any()), x,
                     config=Config(cpu_backend="triton"), rtol=1e-5, atol=1e-4)
    sizes = sorted((b.get_size(), b.data.reduction_ranges) for b in split_partials(compiled))
    # sum(0) and amax(0): 16 chunks of 16 rows; sum() and any(): 128 pieces of 16
    assert sizes == [([16, 8], [16]), ([16, 8], [16]), ([128], [16]), ([128], [16])], sizes


def test_split_over_several_dims_keeps_float32_partials_and_a_linear_index(small_splits):
    x = randn(4, 16, 8, dtype=torch.bfloat16)
    compiled = check(lambda x: x.sum((0, 1)), x, config=Config(cpu_backend="triton"))
    (partial,) = split_partials(compiled)
    assert partial.get_dtype() == torch.float32 and partial.get_size() == [4, 8]
    group = next(g for g in compiled.scheduler.schedule
                 if isinstance(g, FusedGroup) and partial.get_name() in g.get_names())
    load = compiled.sources[group.kernel_name].split("tl.load(")[1].split(", ")[0]
    # chunk s, row r of the 4*16 flattened rows: (16*s + r)*8 + column, no // or %
    assert "//" not in load and "%" not in load, load


def test_no_split_for_cpp_kernels_or_where_mix_order_takes_the_column_sum(small_splits):
    x = torch.randn(256, 8)
    gm = make_fx(lambda x: (x.sum(0),), decomposition_table=decomposition_table())(x)
    graph = lower(gm, [x], Config(cpu_backend="cpp"))
    assert [b.get_size() for b in graph.buffers] == [[8]]
    compiled = check(lambda x: (x.sum(0), x.amax(1)), randn(256, 8), config=TRITON_ONLY,
                     expect_kernels=1, rtol=1e-5, atol=1e-4)
    assert not split_partials(compiled) and mix_order_group(compiled)


# --------------------------------------------------------------------------- mix-order reductions
TRITON_ONLY = Config(cpu_backend="triton", mix_order_min_numel=0)   # small inputs, to keep the interpreter quick


def mix_order_group(compiled):
    (group,) = [g for g in compiled.scheduler.schedule if isinstance(g, FusedGroup) and g.transposed]
    return group


def test_mix_order_column_sum_and_row_max_in_one_kernel():
    compiled = check(lambda x: (x.sum(0), x.amax(1)), randn(272, 24), config=TRITON_ONLY,
                     expect_kernels=1, rtol=1e-5, atol=1e-4)
    source = compiled.source()
    assert "for band_row in range(" in source and "torch.sum(out_ptr0_partial, 0, out=out_ptr0.view(-1))" in source
    assert source.count("tl.load(") == 1, source   # the row max and the column sum share the load


def test_mix_order_with_prologue_nans_and_softmax_rows():
    def fn(x, w):
        h = x * w
        return (h * 2).sum(0), h.amin(0), h.amax(0), torch.softmax(h, -1)
    compiled = check(fn, with_nans(260, 12), randn(12), config=TRITON_ONLY, expect_kernels=1, rtol=1e-5, atol=1e-4)
    assert len(mix_order_group(compiled).transposed) == 3


def test_mix_order_layer_norm_backward_shape():
    def fn(x, dy):   # dbeta, dgamma-like column sums over (batch, time); row sums for dx
        return dy.sum((0, 1)), (dy * x).sum((0, 1)), (dy * x).sum(-1, keepdim=True) * x + dy.mean(-1, keepdim=True)
    compiled = check(fn, randn(32, 8, 12), randn(32, 8, 12), config=TRITON_ONLY, expect_kernels=1,
                     rtol=1e-5, atol=1e-4)
    group = mix_order_group(compiled)
    assert (group.R, group.Q) == ([32, 8], [12])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mix_order_low_precision_accumulates_in_float32(dtype):
    x = randn(256, 16, dtype=dtype)
    check(lambda x: (x.sum(0), x.amax(1)), x, config=TRITON_ONLY, expect_kernels=1)


# --------------------------------------------------------------------------- matmul
def extern_ops(compiled) -> list[str]:
    return [str(b.op) for b in compiled.graph.buffers if isinstance(b, ExternKernel)]


def test_addmm_read_pointwise_becomes_mm_with_the_bias_inlined():
    compiled = check(lambda x, w, b: F.gelu(F.linear(x, w, b).view(4, 4, 48), approximate="tanh"),
                     randn(16, 32), randn(48, 32), randn(48), config=Config(cpu_backend="triton"), rtol=1e-4, atol=1e-4)
    assert extern_ops(compiled) == ["aten.mm.default"]
    assert len(compiled.kernels) == 1   # bias add + gelu: one kernel


def test_addmm_stays_one_call_when_a_reader_is_not_pointwise():
    compiled = check(lambda x, w, b: F.linear(x, w, b).sum(-1), randn(16, 32), randn(48, 32), randn(48),
                     config=Config(cpu_backend="triton"), rtol=1e-4, atol=1e-4)
    assert extern_ops(compiled) == ["aten.addmm.default"]


def test_addmm_stays_one_call_for_cpp_kernels():
    """C++ kernels keep the addmm (no mm + bias add); the relu after it is a C++ kernel: on
    the CPU `_addmm_activation` folds in only the exact GELU (test_fusion's MLP)."""
    x, w, b = torch.randn(16, 32), torch.randn(48, 32), torch.randn(48)
    gm = make_fx(lambda x: (torch.relu(F.linear(x, w, b)) * 2,), decomposition_table=decomposition_table())(x)
    graph = lower(gm, [x], Config(cpu_backend="cpp"))
    assert [str(b.op) for b in graph.buffers if isinstance(b, ExternKernel)] == ["aten.addmm.default"]


def test_trace_and_report_of_triton_kernels(tmp_path):
    """Triton kernels are named as Inductor names them, written to kernels.py (not
    kernels.cpp) in the trace folder, and labelled Triton in the HTML report."""
    def fn(x, w):
        return torch.softmax(x, -1) * w, w.cos() + 1, x[:, :64].sum(-1)
    x, w = randn(8, 4096 + 8).to(DEVICE), randn(4096 + 8).to(DEVICE)
    result = miniinductor.explain(fn, x, w, cpu_backend="triton")
    (cg,) = result.graphs
    kinds = {name.split("_fused_")[0] for name in cg.kernels}   # pointwise, looped, persistent
    assert kinds == {"triton_poi", "triton_red", "triton_per"}, list(cg.kernels)
    assert all(k.language == "triton" for k in cg.kernels.values())
    # (a dependency, but the GPU machine's environment lacks it and cannot download it)
    pytest.importorskip("graphviz", reason="the trace draws fusion graphs with the graphviz package")
    (folder,) = result.write_trace(tmp_path)
    assert not (folder / "kernels.cpp").exists()
    kernels_py = (folder / "kernels.py").read_text()
    compile(kernels_py, "kernels.py", "exec")
    assert all(f"def {name}(" in kernels_py for name in cg.kernels) and "g++" not in kernels_py
    report = (folder / "report.html").read_text()
    assert all(f"{name}</a> (Triton)</div>" in report for name in cg.kernels) and "(C++)" not in report


def test_split_reduction_of_a_row_no_power_of_two_divides(small_splits):
    """A row of odd length is still split (`split_reductions`): 32 chunks of 32 over 999
    elements, the last chunk's elements past the row's end masked to the reduction's identity
    (0 for sum, -inf for max, 1 for prod, False for any), so none of them changes the result."""
    x = randn(27, 37)
    for fn in (lambda x: x.sum(), lambda x: (x - 5).amax(), lambda x: (x - 5).amin(), lambda x: (x.abs() * 1e-2 + 1).prod(),
               lambda x: (x > 3.5).any()):
        c = check(fn, x, config=Config(cpu_backend="triton"), rtol=1e-5, atol=1e-4)
        assert [(b.get_size(), b.data.reduction_ranges) for b in split_partials(c)] == [([32], [32])]


def test_split_sum_of_channels_last_chunks_memory(small_splits):
    """A full sum of a channels-last tensor is chunked in memory order (`_memory_order`):
    chunk s, element r reads offset s*chunk + r, no // or % (in the logical order each step
    jumped C floats and its index needed both)."""
    x = randn(2, 16, 5, 6).to(memory_format=torch.channels_last)
    compiled = check(lambda x: x.sigmoid().sum(), x, config=Config(cpu_backend="triton"), rtol=1e-5, atol=1e-4)
    (partial,) = split_partials(compiled)
    group = next(g for g in compiled.scheduler.schedule
                 if isinstance(g, FusedGroup) and partial.get_name() in g.get_names())
    load = compiled.sources[group.kernel_name].split("tl.load(")[1].split(", ")[0]
    assert "//" not in load and "%" not in load, load
