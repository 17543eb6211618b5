"""The kernel of a fused group whose GEMM template the autotuner gave to CUTLASS.

Mirrors Inductor's `codegen/cuda/cuda_kernel.py` (`CUDATemplateKernel`) and its wrapper
call in small. Like a Triton template kernel (template.py), it is generated for a fused
group, the template's node and its pointwise epilogue; unlike it, its body is CUDA C++
(emit.py, epilogue.py), so the module the wrapper loads holds that source as a string, a
`CutlassLibrary` that compiles it (nvcc, in the compile pool, as the module is imported)
and `launch_<name>`, a launcher with the same interface as a Triton kernel's: it takes
the tensors of `args.call_names()` and launches on the current stream. Sizes, strides and
offsets are the template's (static); the library itself takes them at run time, so that
one build serves every shape of its configuration.
"""
from __future__ import annotations

import torch

from ....codegen.common import Kernel
from ..scheduling import is_template
from ..template import Gemm, operand
from .emit import CutlassConfig, gemm_source, operand_layout
from .epilogue import Epilogue


def layouts_of(g: Gemm) -> tuple[str | None, str | None]:
    """The CUTLASS layout tags of A and B (None: neither dim contiguous)."""
    return operand_layout(g.a_stride[1], g.a_stride[2]), operand_layout(g.b_stride[1], g.b_stride[2])


def static_ints(g: Gemm) -> list[int]:
    """The library's `ints` for `g`: M N K L, A's, B's and D's (rows, columns, batch) strides."""
    return [g.M, g.N, g.K, g.B, g.a_stride[1], g.a_stride[2], g.a_stride[0], g.b_stride[1], g.b_stride[2],
            g.b_stride[0], g.N, 1, g.M * g.N]


class CutlassTemplateKernel(Kernel):
    """A CUTLASS GEMM with its group's pointwise nodes as an EVT epilogue. Named
    `cutlass_fused_..._N`; `language` is the GPU backend's (the wrapper loads a Python module)."""

    language = "triton"

    def __init__(self, group, config=None, removed_buffers=()):
        self.template = next(n for n in group.nodes if is_template(n)).node
        super().__init__(group.kernel_name, group.R, [], config, removed_buffers)
        (self.a_name, a), (self.b_name, b) = map(operand, self.template.inputs)
        self.gemm = Gemm.of(a, b)
        self.offsets = (a.offset, b.offset)
        self.epilogue = Epilogue(self.template.get_name(), self.gemm.dtype, group.R, self.gemm.N)
        self.cutlass = CutlassConfig.of(self.template.config)
        self._source = None

    def name_prefix(self) -> str:
        return "cutlass"

    def reads_out_of_scope(self, nodes) -> set[str]:
        return set()   # the epilogue reads the product in registers (the fusion rule checked each read)

    def codegen_node(self, node):
        if not is_template(node):
            self.epilogue.add_node(node)

    def _pointer_buffers(self) -> list[str]:
        """The buffers of the library's pointers: A, B, D, the epilogue's inputs, its other stores."""
        self.epilogue.finish(self.removed)
        return [self.a_name, self.b_name] + self.epilogue.pointer_names()

    def codegen(self) -> str:
        if self._source is None:
            buffers = self._pointer_buffers()
            stored = {name for name, _, _ in self.epilogue.outs}
            params = [self.args.output(n) if n in stored else self.args.input(n) for n in buffers]
            a_tag, b_tag = layouts_of(self.gemm)
            cuda = gemm_source(self.gemm.dtype, a_tag, b_tag, self.cutlass, self.epilogue)
            size = torch.empty((), dtype=self.gemm.dtype).element_size()
            offsets = [self.offsets[0] * size, self.offsets[1] * size] + [0] * (len(buffers) - 2)
            pointers = ", ".join(f"{p}.data_ptr()" + (f" + {o}" if o else "") for p, o in zip(params, offsets))
            ptrs = list(self.args.input_buffers.values()) + list(self.args.output_buffers.values())
            self._source = "\n".join([
                "import torch",
                "from miniinductor.ext.gemm.cutlass.build import CutlassLibrary, aligned",
                "",
                f'CUDA_SOURCE = r"""{cuda}"""',
                "_library = CutlassLibrary(CUDA_SOURCE)   # nvcc starts now, in the compile pool",
                f"_ints = _library.ints({static_ints(self.gemm)})",
                "",
                "",
                f"def launch_{self.name}({', '.join(ptrs)}):",
                f'    """CUTLASS GEMM {self.gemm}, {self.cutlass.name()}; takes the tensors of {self.args.call_names()}"""',
                *[f"    {p} = aligned({p})  # (a graph input at an odd offset: copied)"
                  for p in self.args.input_buffers.values()],
                f"    _library.run([{pointers}], _ints, torch._C._cuda_getCurrentRawStream({ptrs[0]}.device.index))",
                ""])
        return self._source


def kernel_for_cutlass_group(group, config) -> CutlassTemplateKernel | None:
    """The CUTLASS kernel of a fused group whose template the autotuner gave to CUTLASS, else None."""
    template = next((n for n in group.nodes if is_template(n)), None)
    if template is not None and template.node.config.get("backend") == "cutlass":
        return CutlassTemplateKernel(group, config)
    return None
