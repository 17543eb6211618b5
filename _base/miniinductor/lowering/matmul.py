"""Three passes over the ATen graph before lowering (two about addmm, `bias + x @ w`), and
the lowerings of matmuls.

`unfuse_addmm` (where the policy asks: Triton kernels). Mirrors `should_prefer_unfused_addmm` / `unfuse_bias_add_to_pointwise` in
`torch/_inductor/fx_passes/post_grad.py`. `addmm(b, x, w)` asks cuBLAS for its bias
epilogue, whose kernels come in fewer tile shapes: on an H100 the GPT-2 block's QKV and
output projections ran a 64x64-tile kernel (~30 TFLOP/s) where the plain `mm` gets a
128x128 one (~40). When every reader of the result is pointwise (looking through views),
`addmm` becomes `mm` + `add`: the `+ b` costs nothing more inlined into the kernel that
reads the product anyway.

Simplified: Inductor decides on the GPU only; we decide wherever our kernels are Triton
(the GPU, and `cpu_backend="triton"`, so that CI runs the same pass), and the bias
add rounds the product once more in float16/bfloat16, as Inductor's does.

`addmm_activation`: `gelu(addmm(b, x, w))` or `relu(...)`, the addmm read by nothing else,
becomes one BLAS call that applies the activation (`aten._addmm_activation`), as
Inductor's `fx_passes/post_grad.py` does, instead of a separate pass over the result. Its
GELU is the exact (erf) one on the CPU and the tanh approximation on CUDA, so only the
matching `gelu` is folded in; a relu only on CUDA (`ADDMM_ACTIVATION`).

`prefetch_gemm_templates`: under max_autotune on a GPU, every matmul's template configs start
compiling in the compile threads before lowering (shapes and strides from the FX graph's
example values), so that the autotuner, reaching each matmul in turn, times configs compiled
together instead of compiling each matmul's in turn. Inductor gets that overlap from its
`MultiTemplateBuffer` (every choice of every matmul compiled, then timed).

The lowerings of `mm`, `bmm` and `addmm` (Inductor's `kernel/mm.py` `tuned_mm`,
`tuned_bmm`, `tuned_addmm`): an ATen call, except under `max_autotune` with Triton kernels,
where the autotuner (codegen/triton_template.py, `select_gemm`) chooses among ATen and the
GEMM template's configurations, those `max_autotune_gemm_backends` allows. A template
becomes a `TemplateBuffer` whose pointwise readers the scheduler fuses into its store;
addmm is the template plus `alpha * product + beta * bias`, a pointwise node that fuses
the same way (the product rounded to float16/bfloat16 first, as unfuse_addmm's add).

`vector_matrix`: on the CPU, a single row times a Linear's weight (`[1, K] @ w.t()`, batch-1
inference) is a reduction kernel of ours, the previous layer's bias and activation inlined
into its loads. Inductor's CPU `addmm`/`mm` decompositions (`torch/_inductor/decomposition.py`)
do this for K, N <= 16 only; ours goes up to `VECTOR_MATRIX_MAX` elements (codegen/policy.py),
where a BLAS call's per-call cost, not its arithmetic, set the time: a six-layer
Linear(256, 256) MLP's `call(args)` took 175 µs as six `addmm` calls, 91 µs as our kernels.
"""
from __future__ import annotations

import logging
import operator

import torch

from ..codegen.policy import BackendPolicy
from ..codegen.triton_template import SYMBOLIC_PROBLEM, Gemm, operand, prefetch_gemm, select_gemm, template_problem, tma_problem
from ..config import Config
from ..ir.nodes import SUPPORTED_DTYPES, Layout, TemplateBuffer, contiguous_strides
from ..ir.sizevars import SymbolicUnsupported
from ..logs import get_logger
from ..virtualized import V, ops
from .pointwise import KIND, make_pointwise, promote
from .reductions import make_reduction
from .registry import aten, register_lowering
from .views import permute

log = get_logger("autotune")


def note_unused_tma(policy: BackendPolicy, config: Config):
    """One info line when enable_persistent_tma_matmul meets a backend without GEMM templates."""
    if config.max_autotune and config.enable_persistent_tma_matmul and not policy.gemm_templates:
        logging.getLogger("miniinductor").info("enable_persistent_tma_matmul ignored: the C++ backend has no GEMM "
                                               "templates (they are Triton: a GPU, or cpu_backend='triton')")

#: ops that only re-view their input: look through them to the real readers
VIEW_LIKE = {operator.getitem, aten._unsafe_view.default, aten.reshape.default}


def only_pointwise_readers(node: torch.fx.Node) -> bool:
    """Is every (transitive, through views) reader of `node` a pointwise ATen op?"""
    if not node.users:
        return False
    for user in node.users:
        target = user.target
        if target in VIEW_LIKE or getattr(target, "is_view", False):
            if not only_pointwise_readers(user):
                return False
        elif not (isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags):
            return False
    return True


def left_to_aten(node: torch.fx.Node, config: Config) -> bool:
    """Would lowering run `node` as an ATen call whatever its lowering (the fallback options,
    or a dtype our kernels lack; GraphLowering._unsupported_reason)? Then no pass touches it."""
    values = [node.meta.get("val")] + [n.meta.get("val") for n in node.all_input_nodes]
    return (config.fallback_all or str(node.target) in config.fallback_ops
            or any(isinstance(v, torch.Tensor) and v.dtype not in SUPPORTED_DTYPES for v in values))


def unfuse_addmm(gm: torch.fx.GraphModule, policy: BackendPolicy, config: Config) -> int:
    """Rewrite, in place, each `addmm(b, x, w)` (beta = alpha = 1) read only pointwise into
    `mm(x, w) + b`. Returns how many it rewrote."""
    if not policy.unfuse_addmm:
        return 0
    found = [n for n in gm.graph.nodes if n.target is aten.addmm.default and len(n.args) == 3
             and n.kwargs.get("beta", 1) == 1 and n.kwargs.get("alpha", 1) == 1 and only_pointwise_readers(n)
             and not left_to_aten(n, config)]
    for node in found:
        bias, mat1, mat2 = node.args
        with gm.graph.inserting_before(node):
            product = gm.graph.call_function(aten.mm.default, (mat1, mat2))
            total = gm.graph.call_function(aten.add.Tensor, (product, bias))
        product.meta = total.meta = dict(node.meta)   # same size, strides and dtype as the addmm
        node.replace_all_uses_with(total)
        gm.graph.erase_node(node)
    if found:
        gm.recompile()
    return len(found)


#: what _addmm_activation folds in, per device: its GELU is the exact (erf) one on the CPU and
#: the tanh approximation on CUDA; a CPU relu is left to a C++ kernel (in place on the addmm's
#: result), as Inductor does: `_addmm_activation` took ~7 us more per call than `addmm` and
#: that kernel at batch 1 (a six-layer MLP's call(args): 179 -> 135 us on a 2-core EPYC)
ADDMM_ACTIVATION = {"cpu": {aten.gelu.default: "none"},
                    "cuda": {aten.gelu.default: "tanh", aten.relu.default: "none"}}


def addmm_activation(gm: torch.fx.GraphModule, config: Config) -> int:
    """Rewrite, in place, each `gelu(addmm(...))` / `relu(addmm(...))` whose addmm (no beta
    or alpha) has no other reader into `_addmm_activation`. Returns how many it rewrote.
    The new node keeps the addmm's place."""
    found = []
    for node in gm.graph.nodes:
        mm = node.args[0] if node.target in (aten.gelu.default, aten.relu.default) else None
        if not (isinstance(mm, torch.fx.Node) and mm.target is aten.addmm.default
                and len(mm.users) == 1 and not mm.kwargs and isinstance(mm.meta.get("val"), torch.Tensor)
                and not left_to_aten(node, config)):
            continue
        approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
        device = mm.meta["val"].device.type
        if ADDMM_ACTIVATION.get(device, {}).get(node.target) == approximate:
            found.append((mm, node))
    for mm, act in found:
        with gm.graph.inserting_before(mm):
            fused = gm.graph.call_function(aten._addmm_activation.default, mm.args,
                                           {"use_gelu": act.target is aten.gelu.default})
        fused.meta = dict(act.meta)
        act.replace_all_uses_with(fused)
        gm.graph.erase_node(act)
        gm.graph.erase_node(mm)
    if found:
        gm.recompile()
    return len(found)


def prefetch_gemm_templates(gm: torch.fx.GraphModule, policy: BackendPolicy, config: Config, device):
    """Under max_autotune on a GPU: start compiling the template configs of every matmul of
    the graph, in the compile threads, before lowering starts (`prefetch_gemm`). Lowering
    then times each matmul's configs when it reaches it, finding them compiled or in flight,
    instead of compiling each matmul's configs in turn (an MLP's two: 4.3 then 2.4 s). The
    shapes and strides come from the FX graph's example values; where lowering later reads
    an operand through other strides, that compile is wasted, nothing else."""
    if not (config.max_autotune and policy.gemm_templates and device.type == "cuda") \
            or config.enable_persistent_tma_matmul or "TRITON" not in config.gemm_backends():
        return
    precision = fp32_dot_precision(config)
    for node in gm.graph.nodes:
        operands = {aten.mm.default: node.args[:2], aten.bmm.default: node.args[:2],
                    aten.addmm.default: node.args[1:3]}.get(node.target)
        values = [getattr(x, "meta", {}).get("val") for x in operands or ()]
        if len(values) != 2 or not all(isinstance(v, torch.Tensor) and v.dim() in (2, 3) for v in values):
            continue
        try:
            layouts = [Layout(v.device, v.dtype, [int(n) for n in v.shape], [int(n) for n in v.stride()],
                              int(v.storage_offset())) for v in values]
        except (TypeError, RuntimeError):   # symbolic sizes: no template
            continue
        if template_problem(layouts, [v.dtype for v in values]) is None:
            prefetch_gemm(Gemm.of(*layouts), config.gemm_backends(), precision, device)


# ----------------------------------------------------------------------------- the lowerings
def fp32_dot_precision(config: Config) -> str:
    """A float32 template dot's `input_precision`: "tf32" where eager's cuBLAS would use TF32
    (`torch.backends.cuda.matmul.allow_tf32`), else the option gemm_fp32_precision ("ieee",
    or "tf32x3": three TF32 products, see codegen/triton_template.py)."""
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else config.gemm_fp32_precision


def persistent_kind(gemm: Gemm, device: torch.device) -> str:
    """enable_persistent_tma_matmul's template: "tma" where descriptors can read the operands
    (a GPU of compute capability 9.0+, or Triton's interpreter), else "plain" (masked loads)."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (9, 0):
        log.info("enable_persistent_tma_matmul: no TMA below compute capability 9.0; %s gets a persistent "
                 "template with ordinary loads", gemm)
        return "plain"
    if (problem := tma_problem(gemm)) is not None:
        log.info("enable_persistent_tma_matmul: no TMA for %s (%s); it gets a persistent template with ordinary "
                 "loads", gemm, problem)
        return "plain"
    return "tma"


def gemm_template(a, b) -> tuple[TemplateBuffer | None, str]:
    """(the TemplateBuffer computing a @ b, "") when max_autotune picks a template, else
    (None, why ATen computes it). Raises when no allowed choice can compute it."""
    graph, config = V.graph, V.graph.config
    if not (config.max_autotune and graph.policy.gemm_templates):
        return None, "no lowering"
    backends = config.gemm_backends()
    if "TRITON" not in backends:
        return None, f"max_autotune_gemm_backends={config.max_autotune_gemm_backends!r}"
    a, b = graph.realize_for_extern(a), graph.realize_for_extern(b)
    layouts = [operand(x)[1] for x in (a, b)]
    gemm = Gemm.of(*layouts)
    problem = template_problem(layouts, [x.get_dtype() for x in (a, b)])
    if problem is not None:
        if "ATEN" not in backends:   # (symbolic sizes: compiled per shape, the template can then)
            error = SymbolicUnsupported if problem == SYMBOLIC_PROBLEM else RuntimeError
            raise error(
                f"max_autotune_gemm_backends={config.max_autotune_gemm_backends!r}: no choice can compute {gemm} "
                f"(FX node {graph.current_node_name()}): {problem}. Set max_autotune_gemm_backends='ATEN,TRITON' "
                "to let ATen compute the matmuls the template cannot.")
        return None, f"max_autotune: {problem}"
    precision = fp32_dot_precision(config)
    selection = select_gemm(gemm, layouts, backends, precision, graph.current_device(),
                            config.coordinate_descent_tuning,
                            persistent_kind(gemm, graph.current_device()) if config.enable_persistent_tma_matmul else None)
    if selection.config is None:
        return None, "max_autotune picked ATen"
    size = [gemm.B, gemm.M, gemm.N] if gemm.op == "bmm" else [gemm.M, gemm.N]
    layout = Layout(layouts[0].device, gemm.dtype, size, contiguous_strides(size))
    return graph.register_buffer(TemplateBuffer(None, layout, [a, b], {**selection.config, "precision": precision},
                                                origins=[graph.current_node_name()], timings=selection.timings)), ""


def vector_matrix(a, b):
    """`a @ b` for a single row `a` [1, K] as a reduction of our own (`sum_k a[0, k] * b[k, n]`),
    where the policy says so (`BackendPolicy.vector_matrix`: C++ kernels, b read along k), else
    None. Inductor's CPU `addmm` decomposition does this for K, N <= 16; see the policy for why
    ours goes further."""
    graph = V.graph
    a_val, b_val = (getattr(graph.current_input_node(k), "meta", {}).get("val") for k in (-2, -1))
    if not (isinstance(a_val, torch.Tensor) and isinstance(b_val, torch.Tensor) and a_val.dim() == 2
            and a_val.dtype == b_val.dtype and graph.policy.vector_matrix(a_val, b_val)
            and [list(x.get_size()) for x in (a, b)] == [list(a_val.shape), list(b_val.shape)]):
        return None
    column = permute(a, [1, 0])                                                  # [K, 1]
    products = make_pointwise(lambda x, w: ops.mul(x, w), (column, b), a_val.dtype)   # [K, N]
    return make_reduction(products, [0], True, "sum")                            # [1, N]


@register_lowering(aten.mm, aten.bmm)
def tuned_mm(a, b):
    if (product := vector_matrix(a, b)) is not None:
        return product
    product, reason = gemm_template(a, b)
    return product if product is not None else V.graph.fallback(V.graph.current_target(), [a, b], {}, reason)


@register_lowering(aten.addmm)
def tuned_addmm(bias, a, b, *, beta=1, alpha=1):
    product, reason = vector_matrix(a, b), ""
    if product is None:
        product, reason = gemm_template(a, b)
    if product is None:
        kwargs = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v != 1}
        return V.graph.fallback(V.graph.current_target(), [bias, a, b], kwargs, reason)
    compute, out = promote((bias, product), KIND.DEFAULT)
    if beta == 0:   # eager ignores the bias then, NaNs included
        return make_pointwise(lambda p, s: ops.mul(p, s), (product, alpha), compute, out)
    if alpha == 1 and beta == 1:
        return make_pointwise(lambda p, c: ops.add(p, c), (product, bias), compute, out)
    return make_pointwise(lambda p, c, s, t: ops.add(ops.mul(p, s), ops.mul(c, t)), (product, bias, alpha, beta),
                          compute, out)
