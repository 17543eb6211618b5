"""The gemm extension around lowering: three passes over the ATen graph before it (two
about addmm, `bias + x @ w`, and the templates' prefetch), and the template choice of the
matmul lowerings (lowering/matmul.py asks `gemm_template` through passes.MATMUL_CHOICES).

`unfuse_addmm` (where the policy asks: Triton kernels). Mirrors `should_prefer_unfused_addmm` /
`unfuse_bias_add_to_pointwise` in `torch/_inductor/fx_passes/post_grad.py`. `addmm(b, x, w)`
asks cuBLAS for its bias epilogue, whose kernels come in fewer tile shapes: on an H100 the
GPT-2 block's QKV and output projections ran a 64x64-tile kernel where the plain `mm` gets a
faster 128x128 one. When every reader of the result is pointwise (looking through views),
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

`gemm_template` (Inductor's `kernel/mm.py` `tuned_mm`, `tuned_bmm`, `tuned_addmm`, their
template choices): under `max_autotune` with Triton kernels, the autotuner (autotune.py,
`select_gemm`) chooses among ATen and the GEMM template's configurations, those
`max_autotune_gemm_backends` allows. A template becomes a `TemplateBuffer` whose pointwise
readers the scheduler fuses into its store; addmm is the template plus
`alpha * product + beta * bias`, a pointwise node that fuses the same way (the product
rounded to float16/bfloat16 first, as unfuse_addmm's add).
"""
from __future__ import annotations

import logging
import operator

import torch

from ...codegen.policy import BackendPolicy
from ...config import Config
from ...ir.nodes import Layout, contiguous_strides
from ...ir.sizevars import SymbolicUnsupported
from ...logs import get_logger
from ...lowering.matmul import left_to_aten
from ...lowering.registry import aten
from ...virtualized import V
from .autotune import prefetch_gemm, select_gemm
from .ir import TemplateBuffer
from .options import gemm_backends
from .template import SYMBOLIC_PROBLEM, Gemm, operand, template_problem, tma_problem

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
#: result), as Inductor does: `_addmm_activation` took longer per call than `addmm` and that
#: kernel at batch 1 (a six-layer MLP's call(args), on a 2-core EPYC)
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
    instead of compiling each matmul's configs in turn. The shapes and strides come from the
    FX graph's example values; where lowering later reads an operand through other strides,
    that compile is wasted, nothing else."""
    if not (config.max_autotune and policy.gemm_templates and device.type == "cuda") \
            or config.enable_persistent_tma_matmul or "TRITON" not in gemm_backends(config):
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
            prefetch_gemm(Gemm.of(*layouts), gemm_backends(config), precision, device)


# ----------------------------------------------------------------------------- the template choice
def fp32_dot_precision(config: Config) -> str:
    """A float32 template dot's `input_precision`: "tf32" where eager's cuBLAS would use TF32
    (`torch.backends.cuda.matmul.allow_tf32`), else the option gemm_fp32_precision ("ieee",
    or "tf32x3": three TF32 products, see template.py)."""
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
    backends = gemm_backends(config)
    if "TRITON" not in backends and "CUTLASS" not in backends:
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
    if selection.config is None and not selection.timings and "ATEN" not in backends:
        from .cutlass.choices import why_not
        raise RuntimeError(
            f"max_autotune_gemm_backends={config.max_autotune_gemm_backends!r}: no choice can compute {gemm} "
            f"(FX node {graph.current_node_name()}): {why_not(gemm, precision, graph.current_device())}. List ATEN "
            "or TRITON too (e.g. 'ATEN,TRITON,CUTLASS') to let them compute the matmuls CUTLASS cannot.")
    if selection.config is None:
        return None, "max_autotune picked ATen"
    size = [gemm.B, gemm.M, gemm.N] if gemm.op == "bmm" else [gemm.M, gemm.N]
    layout = Layout(layouts[0].device, gemm.dtype, size, contiguous_strides(size))
    return graph.register_buffer(TemplateBuffer(None, layout, [a, b], {**selection.config, "precision": precision},
                                                origins=[graph.current_node_name()], timings=selection.timings)), ""
