"""The IR node of a GEMM template: a matmul whose value a Triton template computes.

Mirrors `ir.TritonTemplateBuffer` in `torch/_inductor/ir.py`. Simplified: one template
(mm/bmm), its winning config fixed at lowering (no `MultiTemplateBuffer` of choices). It
names the ATen call that computes the same value (`op`, `args`, `kwargs`, as an
ExternKernel's), so that the IR interpreter (tools/debug/interpreter.py) runs it without knowing it.
"""
from __future__ import annotations

import torch

from ...ir.nodes import Buffer, IRNode


class TemplateBuffer(Buffer):
    """A matmul computed by a Triton GEMM template (template.py): `buf2 =
    A @ B` (batched for bmm), its output contiguous, its pointwise readers fused into the
    template's store by the scheduler. `inputs` are the operands, buffers or strided views
    of them, read whole; `config` the tile the autotuner picked (BLOCK_M, BLOCK_N, BLOCK_K,
    GROUP_M, num_warps, num_stages) and the float32 dot's `precision`; `timings` the autotuner's table of the
    bare choices (`[ms, config or "ATEN"]`, fastest first), where the epilogue benchmark
    starts (epilogue_tuning.py). Mirrors `ir.TritonTemplateBuffer`."""

    def __init__(self, name, layout, inputs, config: dict, origins=(), timings=()):
        super().__init__(name, layout)
        self.inputs, self.config, self.origins = list(inputs), dict(config), list(origins)
        self.timings = list(timings)
        # what computes the same value in ATen, as an ExternKernel's (the IR interpreter runs it)
        self.op, self.args, self.kwargs = torch.matmul, self.inputs, {}

    def input_nodes(self) -> list[IRNode]:
        return list(self.inputs)

    def __str__(self):
        operands = ", ".join(x.get_name() for x in self.inputs)
        tile = " ".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.name}: TemplateBuffer GEMM({operands}) -> {self.layout}  # {tile}"
