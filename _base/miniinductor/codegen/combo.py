"""Combo kernels: several independent pointwise groups generated as one kernel.

Mirrors `torch/_inductor/codegen/triton_combo_kernel.py` (ComboKernel, its sequential
dispatch) and the C++ side of combo/foreach kernels in `codegen/cpp.py`. The scheduler
pass (scheduler/combo.py) hands over a ComboGroup: its `parts` do not read each other's
buffers. Each part gets an ordinary kernel (a *sub-kernel*: CppKernel or TritonKernel);
`codegen_node` sends every node to its part's sub-kernel, so compile_fx.generate_kernel
treats a combo like any kernel (buffers kept in registers, decided per part up front).

C++: one function; inside one `#pragma omp parallel` region (when the parts have
`parallel_min_numel` elements in all) the loop nest of each part of at least
`parallel_min_numel` elements is an `omp for ... nowait`, shared out among the threads;
a smaller part is an `omp single nowait`, run whole by the first thread to reach it while
the others go on to the next parts. No barrier between parts (legal: no part reads what
another writes); the region's end waits for all. The parts share one set of pointers.

    extern "C" void cpp_for_fused_add_..._0(const float* __restrict__ in_ptr0, ...) {
        #pragma omp parallel
        {
            // part 0: buf0 over [65536]
            #pragma omp for nowait
            for (int64_t i0 = 0; i0 < 65536; i0 += 1) { ... }
            // part 1: buf1 over [64]
            #pragma omp single nowait
            { ... }
        }
    }

Triton: each part is a `@triton.jit` function of its pointers, a program id and its own
XBLOCK (the part's kernel body, unchanged, with `pid` for `tl.program_id(0)`); the combo
kernel splits the program ids into one range per part, and its grid is their sum:

    pid = tl.program_id(0)
    if pid < 4:
        triton_for_fused_add_0_part0(in_ptr0, out_ptr0, pid, XBLOCK0)
    elif pid < 5:
        triton_for_fused_add_0_part1(in_ptr1, out_ptr1, pid - 4, XBLOCK1)

An in-place write (an output over a dying input) is kept only where no other part reads
that input: the other part, on another thread (C++, nowait) or in another program
(Triton), could read it after it was overwritten.

Simplified: pointwise parts only, one num_warps for the whole kernel (the largest a part
wants), no round-robin dispatch and no autotuning of a combo (max_autotune leaves it alone).
"""
from __future__ import annotations

import math

from ..runtime.triton_runtime import HELPERS, cdiv
from ..virtualized import V
from .common import IndentedBuffer, Kernel, KernelArgs
from .cpp import CppKernel, c_function
from .cpp_vec import with_vector_twin
from .triton import TritonKernel
from .triton_program import jit_decorator


class ComboKernel:
    """What both backends share: one sub-kernel per part, nodes routed to them."""

    language = ""
    sub_kernel = None   # the class of a part's kernel

    def __init__(self, group, config):
        self.parts, self.config = group.parts, config
        self.inplace: dict[str, str] = {}
        self.name, self.numel = group.kernel_name, sum(math.prod(p.R) for p in self.parts)
        self.subkernels = [self.make_subkernel(k, part) for k, part in enumerate(self.parts)]
        self._part = {id(n): k for k, p in enumerate(self.parts) for n in p.nodes}

    @property
    def removed(self) -> set[str]:
        return set().union(*(sub.removed for sub in self.subkernels))

    @removed.setter
    def removed(self, names):
        for sub in self.subkernels:
            sub.removed = set(names)

    def reads_out_of_scope(self, nodes) -> set[str]:
        """Each part decides for its own nodes (no part reads another's buffers)."""
        return set().union(*(sub.reads_out_of_scope(part.nodes) for sub, part in zip(self.subkernels, self.parts)))

    def set_inplace(self, inplace: dict[str, str]):
        """Keep an in-place pair only where no other part reads the input it overwrites."""
        part_of = {n.get_name(): k for k, p in enumerate(self.parts) for n in p.nodes}
        readers = {}
        for k, part in enumerate(self.parts):
            for name in {d.name for n in part.nodes for d in n.reads}:
                readers.setdefault(name, set()).add(k)
        self.inplace = {out: src for out, src in inplace.items() if readers.get(src, set()) <= {part_of[out]}}
        self.share_inplace()

    def make_subkernel(self, k, part):
        raise NotImplementedError

    def codegen_node(self, node):
        self.subkernels[self._part[id(node)]].codegen_node(node)

    def name_prefix(self) -> str:
        return f"{self.language}_for"

    def part_comment(self, k) -> str:
        return f"part {k}: {', '.join(self.parts[k].get_names())} over {self.parts[k].R}"

    record = Kernel.record   # name it, generate the source: the same GeneratedKernel record


class CppSubKernel(CppKernel):
    """A part of a C++ combo: the outer loop of a part big enough to share out is an
    orphaned `omp for ... nowait`, which binds to the combo's parallel region."""

    def _parallel_pragma(self, sizes):
        pragma, depth = super()._parallel_pragma(sizes)
        return (pragma.replace("parallel for", "for") + " nowait", depth) if pragma else ("", 0)

    def shared_out(self) -> bool:
        return self._parallel_pragma(self.ranges)[0] != ""


class CppComboKernel(ComboKernel):
    language = "cpp"

    def __init__(self, *args):
        self.args = None
        super().__init__(*args)

    def make_subkernel(self, k, part):
        if self.args is None:   # the parts share one set of pointers
            self.args = KernelArgs()
        kernel = with_vector_twin(CppSubKernel(f"{self.name}_part{k}", part.R, [], self.config))
        kernel.args = self.args
        return kernel

    def share_inplace(self):
        self.args.inplace = dict(self.inplace)

    def codegen(self) -> str:
        return c_function(self.name, self._codegen_parts, self.subkernels[0].params)

    def _codegen_parts(self, code):
        """Each part's loops, in one OpenMP region when they are big enough together."""
        region = self.numel >= self.config.parallel_min_numel
        if region:
            code.writelines(["#pragma omp parallel", "{"])
            code._indent += 1
        for k, sub in enumerate(self.subkernels):
            code.writeline(f"// {self.part_comment(k)}")
            if sub.shared_out() or (sub.ranges and not region):
                sub.codegen_loops(code)
                continue
            if region:   # a small part: whole, by the first thread to get here
                code.writeline("#pragma omp single nowait")
            code.writeline("{")   # (a 0-d part's variables are not in a loop's scope)
            with code.indent():
                sub.codegen_loops(code)
            code.writeline("}")
        if region:
            code._indent -= 1
            code.writeline("}")


class TritonSubKernel(TritonKernel):
    """A part of a Triton combo: a @triton.jit function of its pointers, `pid` (its program
    id, counted from the start of its range) and its XBLOCK."""

    def _program_id(self) -> str:
        return "pid.to(tl.int64)" if self._use_int64() else "pid"


class TritonComboKernel(ComboKernel):
    language = "triton"

    def make_subkernel(self, k, part):
        return TritonSubKernel(f"{self.name}_part{k}", part.R, [], self.config)

    def share_inplace(self):
        for k, sub in enumerate(self.subkernels):
            sub.args.inplace = {o: s for o, s in self.inplace.items() if self._part_of(o) == k}

    def _part_of(self, name) -> int:
        return next(k for k, p in enumerate(self.parts) if name in p.get_names())

    @property
    def args(self) -> KernelArgs:
        """The combo's pointers: every part's, in order (parts share the inputs they share)."""
        args = KernelArgs(self.inplace)
        for sub in self.subkernels:
            args.sizevars |= sub.args.sizevars   # (a part's sizes are static; its strides may not be)
            for name in sub.args.input_buffers:
                args.input(name)
            for name in sub.args.output_buffers:
                args.output(name)
        return args

    def launcher_name(self) -> str:
        return f"launch_{self.name}"

    def codegen(self) -> str:
        args = self.args
        pointer = {**args.input_buffers, **args.output_buffers}
        code = IndentedBuffer()
        code.writelines(["import torch", "import triton", "import triton.language as tl",
                         "from miniinductor.runtime.triton_runtime import Launcher, libdevice"])
        for helper in sorted(set().union(*(sub.helpers for sub in self.subkernels))):
            code.splice(HELPERS[helper])
        grids, calls, start = [], [], 0
        for k, sub in enumerate(self.subkernels):
            sub.name = f"{self.name}_part{k}"
            params = ", ".join(sub.pointer_names() + sub.int_params())
            code.writelines(["", "", "@triton.jit", f"def {sub.name}({params}, pid, XBLOCK: tl.constexpr):"])
            with code.indent():
                code.writeline(f'"""{self.part_comment(k)}"""')
                sub._codegen_program(code)
            blocks = sub.block_sizes()
            grids.append(cdiv(sub.xnumel, blocks["XBLOCK"]))
            passed = ", ".join([pointer[n] for n in sub.args.call_names()] + sub.int_params())
            calls.append((start, start + grids[-1], f"{sub.name}({passed}, pid{f' - {start}' if start else ''}, XBLOCK{k})"))
            start += grids[-1]
        params, sizes = args.call_names(), args.size_names()
        ptrs = [pointer[n] for n in params]
        code.writelines(["", "", jit_decorator(sizes),
                         f"def {self.name}({', '.join(ptrs + sizes + [f'XBLOCK{k}: tl.constexpr' for k in range(len(calls))])}):"])
        with code.indent():
            code.writeline("pid = tl.program_id(0)")
            for k, (_, end, call) in enumerate(calls):
                code.writeline(f"{'if' if k == 0 else 'elif'} pid < {end}:")
                code.writeline(f"    {call}")
        meta = {f"XBLOCK{k}": sub.block_sizes()["XBLOCK"] for k, sub in enumerate(self.subkernels)}
        meta["num_warps"] = max(sub.block_sizes()["num_warps"] for sub in self.subkernels)
        kwargs = ", ".join(f"{k}={v}" for k, v in meta.items())
        dtypes = [V.graph.get_dtype(n) for n in params]
        dtypes_text = f"({', '.join(map(str, dtypes))}{',' if len(dtypes) == 1 else ''})"
        launch = f"_launcher_{self.name}"
        code.writelines(["", "", f"# grid: {' + '.join(map(str, grids))} programs, one range per part",
                         f"{launch} = Launcher({self.name}, ({start},), {dtypes_text}{f', ints={len(sizes)}' if sizes else ''}, "
                         f"{kwargs})", "", "",
                         f"def {self.launcher_name()}({', '.join(ptrs + sizes)}):",
                         f'    """combo of {len(calls)} pointwise parts; takes the tensors of {params}"""',
                         f"    {launch}({', '.join(ptrs + sizes)})" if start else "    return  # nothing to compute"])
        return code.getvalue() + "\n"


#: the combo kernel class of each backend
COMBO_KERNELS = {"cpp": CppComboKernel, "triton": TritonComboKernel}
