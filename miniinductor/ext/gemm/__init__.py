"""Extension `gemm`: Triton GEMM templates chosen by autotuning (max_autotune), their
epilogues fused and timed, and the addmm rewrites around them.

  options.py          the GEMM options' checks and notes (the fields stay in config.Config)
  lowering.py         the addmm rewrites, the prefetch, and `gemm_template`: a matmul's template
                      choice (passes.MATMUL_CHOICES)
  template.py         the template's source and its kernel, `TritonTemplateKernel`
                      (passes.KERNEL_KINDS)
  autotune.py         the autotuner: template configs (or ATen) timed, coordinate descent
  ir.py               `TemplateBuffer`, the IR node of a template
  scheduling.py       its scheduler node (passes.NODE_KINDS), the rule of its epilogue fusion
                      (passes.FUSION_RULES), and the split of a slower fusion
  epilogue_tuning.py  each template timed with its epilogue, fused and apart (tune stage)
  cutlass/            CUTLASS GEMMs as autotuning choices, epilogues as visitor trees (its own
                      package: nvcc, nvidia-cutlass and an sm90 GPU where it runs)
"""
from ...config import declare_extension
from ...passes import FUSION_RULES, MATMUL_CHOICES, NODE_KINDS, POLICY_PATCHES, Pass, kernel_kind, register
from . import options  # the options, their checks and notes
from .cutlass import kernel_for_cutlass_group
from .epilogue_tuning import benchmark_epilogue_fusion
from .ir import TemplateBuffer
from .lowering import addmm_activation, gemm_template, note_unused_tma, prefetch_gemm_templates, unfuse_addmm
from .scheduling import TemplateSchedulerNode, template_fusion
from .template import kernel_for_template_group

declare_extension("gemm", "GEMM templates, autotuning and epilogue fusion (max_autotune), addmm rewrites",
                  options.OPTIONS, presets=options.PRESETS, modes=options.MODES, aliases=options.ALIASES)


def _tune_epilogues(scheduler, ctx):
    from ...compile_fx import generate_kernel  # the driver's kernel maker, to time variants with
    ctx.note(benchmark_epilogue_fusion(scheduler, lambda group, index, removed=None: generate_kernel(
        group, ctx, removed).record(group, index)))


def _is_gpu_autotune(ctx) -> bool:
    return ctx.config.max_autotune and ctx.policy.gemm_templates


register(Pass("aten_graph", "note_unused_tma", lambda gm, ctx: note_unused_tma(ctx.policy, ctx.config), "gemm",
              doc="say once that persistent TMA templates need Triton kernels"))
register(Pass("aten_graph", "unfuse_addmm", lambda gm, ctx: ctx.note(unfuse_addmm(gm, ctx.policy, ctx.config)),
              "gemm", enabled=lambda ctx: ctx.policy.unfuse_addmm,
              doc="Triton: addmm read only pointwise → mm + a bias add that fuses"))
register(Pass("aten_graph", "addmm_activation", lambda gm, ctx: ctx.note(addmm_activation(gm, ctx.config)), "gemm",
              doc="gelu(addmm), CUDA relu(addmm) → one _addmm_activation call"))
register(Pass("aten_graph", "prefetch_gemm_templates",
              lambda gm, ctx: prefetch_gemm_templates(gm, ctx.policy, ctx.config, ctx.device), "gemm",
              enabled=lambda ctx: _is_gpu_autotune(ctx) and ctx.device.type == "cuda",
              doc="max_autotune on a GPU: template configs compile in threads while lowering goes on"))
register(Pass("tune", "benchmark_epilogue_fusion", _tune_epilogues, "gemm", enabled=_is_gpu_autotune,
              doc="max_autotune on a GPU: each template timed with its epilogue fused and apart"))
kernel_kind("triton", "cutlass_template", lambda group, ctx: kernel_for_cutlass_group(group, ctx.config), "gemm",
            first=True)   # (before the Triton template's: a template the autotuner gave to CUTLASS)
kernel_kind("triton", "gemm_template", lambda group, ctx: kernel_for_template_group(group, ctx.config), "gemm",
            first=True)
POLICY_PATCHES.append(("gemm", lambda policy, config, device: {"gemm_templates": policy.name == "triton"}))
MATMUL_CHOICES.append(("gemm", gemm_template))
NODE_KINDS[TemplateBuffer] = TemplateSchedulerNode
FUSION_RULES.append(("gemm", template_fusion))
