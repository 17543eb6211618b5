"""A Triton kernel's Python source around its blocks: the program's header (which rows and
which part of the row it takes: `xoffset`, `xindex`, `rbase` and the loop variables recovered
from them), the blocks in order (a looped reduction's `for roffset` loop), the block sizes
(policy.py's heuristic, or max_autotune's few candidates), and the launcher the wrapper calls.
The methods of TritonKernel (codegen/triton.py) that write them, a mixin. Mirrors
`torch/_inductor/codegen/triton.py` (`codegen_kernel`, `codegen_range_tree`) and the launch
code of `torch/_inductor/runtime/triton_heuristics.py`.
"""
from __future__ import annotations

import math

import sympy

from ..ir.indexing import pexpr
from ..ir.sizevars import is_static
from ..runtime.triton_runtime import HELPERS, cdiv, next_power_of_2
from ..virtualized import V
from .common import IndentedBuffer
from .policy import block_sizes, tile_sizes
from .triton_overrides import texpr


def jit_decorator(int_params) -> str:
    """`@triton.jit`; with int arguments (sizes), not specialised on their values: Triton
    would otherwise compile a variant for a size of 1 and one for multiples of 16, and the
    Launcher's fast path, which skips that choice, must find one variant right for all."""
    if not int_params:
        return "@triton.jit"
    return f"@triton.jit(do_not_specialize={list(int_params)!r})"


def interpreter_range(var: str, start, stop, step) -> list[str]:
    """`for var in range(start, stop, step):` as the interpreter can run it: Triton 3.6's makes
    a program id or an int argument a 1-element array, which NumPy 2.4 refuses as a `range`
    bound ("only 0-dimensional arrays can be converted to Python scalars"). The body goes one
    level in, as under the `for`."""
    return [f"{var} = {start} - {step}",
            f"while {var} + {step} < {stop}:  # (the interpreter's form of range({start}, {stop}, {step}))",
            f"    {var} += {step}"]


class TritonProgram:
    """TritonKernel's source and launcher (see the module docstring)."""

    def autotune_candidates(self, blocks) -> list[dict]:
        """With max_autotune: block sizes to time for pointwise and persistent-reduction
        kernels (a looped reduction's RBLOCK is baked into its loop, so it is not tuned): the
        heuristic's, then its neighbours -- XBLOCK and num_warps each doubled and halved, as
        one step of coordinate descent. Inductor's max-autotune times 2 to 4 such configs; each
        is a compile (0.3-0.5 s cold), all made ahead in the compile threads."""
        if not getattr(self.config, "max_autotune", False) or self.tiled or (self.is_reduction and not self.persistent):
            return [blocks]
        top = next_power_of_2(max(self._hint(self.xnumel), 1))
        rblock = blocks.get("RBLOCK", 1)

        def fits(c) -> bool:
            x, w = c["XBLOCK"], c["num_warps"]
            return x <= top and 128 <= x * rblock <= 16384 and 1 <= w <= 16 and w * 32 <= max(x * rblock // 2, 64)
        found = [blocks]
        for field in ("XBLOCK", "num_warps"):
            for value in (blocks[field] * 2, blocks[field] // 2):
                if fits(c := dict(blocks, **{field: value})) and c not in found:
                    found.append(c)
        return found

    def block_sizes(self) -> dict:
        """XBLOCK (and RBLOCK) and num_warps: codegen/policy.py's heuristic."""
        xnumel, rnumel = self._hint(self.xnumel), self._hint(self.rnumel, upper=self.persistent)
        if self.tiled:
            return tile_sizes(xnumel, rnumel)
        return block_sizes(xnumel, rnumel if self.is_reduction else None,
                           self.persistent, self.is_reduction and self.is_outer_reduction(), self.gathers)

    # ------------------------------------------------------------------ source
    def _var_definitions(self, dims, flat) -> list[str]:
        """`i0 = xindex // 64`, `i1 = xindex % 64`...: only the variables an index uses."""
        lines = []
        for k, (v, n) in enumerate(dims):
            if v in self.used_syms:
                stride = math.prod(m for _, m in dims[k + 1:])
                value = flat if stride == 1 else f"({flat} // {self._size(stride)})"
                lines.append(f"{v} = {value}" if k == 0 else f"{v} = {value} % {self._size(n)}")
        for name, (span_flat, stride, size, outermost) in self.spans.items():
            if span_flat == flat and sympy.Symbol(name, integer=True, nonnegative=True) in self.used_syms:
                value = flat if stride == 1 else f"({flat} // {self._size(stride)})"
                lines.append(f"{name} = {value}" if outermost else f"{name} = {value} % {self._size(size)}")
        return lines

    def _size(self, size) -> str:
        """A size as an operand in the kernel: `64`, `s0` or `(3*s0)` (size symbols are
        kernel arguments)."""
        if is_static(size):
            return str(size)
        self.args.note_sizes(size)
        return texpr(size) if size.is_Symbol else f"({texpr(size)})"

    def _r_definitions(self, looped) -> list[str]:
        return ([f"rindex = {'roffset + rbase' if looped else 'rbase'}", "rmask = rindex < rnumel"]
                + self._var_definitions(self._r_dims, "rindex"))

    def kernel_name(self) -> str:
        """The @triton.jit function: the kernel's name, as a GPU profile shows it."""
        return self.name

    def launcher_name(self) -> str:
        """The plain Python function the wrapper calls with the tensors."""
        return f"launch_{self.name}"

    def pointer_names(self) -> list[str]:
        """The kernel's (and launcher's) parameters, in the order of `args.call_names()`."""
        return list(self.args.input_buffers.values()) + list(self.args.output_buffers.values())

    def codegen(self) -> str:
        """Python source: imports, helpers, the @triton.jit kernel and its launcher."""
        if self._source is None:
            self._source = self._codegen()
        return self._source

    def _codegen(self) -> str:
        code = IndentedBuffer()
        code.writelines(["import torch", "import triton", "import triton.language as tl",
                         "from miniinductor.runtime.triton_runtime import Launcher, autotune, cdiv, libdevice",
                         "_best = []  # the Launcher (block sizes) max_autotune picked"])
        for helper in sorted(self.helpers):
            code.splice(HELPERS[helper])
        body = IndentedBuffer(1)
        self._codegen_program(body)   # first: the sizes it prints become parameters
        ints = self.int_params()
        code.writelines(["", "", jit_decorator(ints)])
        params = self.pointer_names() + ints + ["XBLOCK: tl.constexpr"] + (["RBLOCK: tl.constexpr"] if self.is_reduction else [])
        code.writeline(f"def {self.kernel_name()}({', '.join(params)}):")
        code.lines.extend(body.lines)
        code.writelines(["", ""])
        code.writelines(self._launcher())
        return code.getvalue() + "\n"

    def _codegen_program(self, code: IndentedBuffer):
        """The kernel body: which rows this program takes, then the blocks in order."""
        if self._use_int64():   # products of sizes (i32 arguments) must not overflow either
            code.writelines(f"{n} = {n}.to(tl.int64)" for n in self.int_params())
        code.writelines(self._numel_definitions("x") + [f"xoffset = {self._program_id()} * XBLOCK"])
        code.writelines(self._x_header())
        code.writelines(self._r_header())
        self._codegen_blocks(code)

    def _numel_definitions(self, prefix) -> list[str]:
        """`xnumel = 64` for a static size; nothing for a symbolic one (an argument)."""
        numel = self.xnumel if prefix == "x" else self.rnumel
        return [f"{prefix}numel = {numel}"] if is_static(numel) else []

    def int_params(self) -> list[str]:
        """The kernel's int arguments, after its pointers: the size symbols its code reads,
        then `xnumel`/`rnumel` where they are symbolic (the launcher computes them)."""
        numels = [f"{p}numel" for p, n in (("x", self.xnumel), ("r", self.rnumel)) if not is_static(n)]
        return self.args.size_names() + numels

    def _program_id(self) -> str:
        return "tl.program_id(0).to(tl.int64)" if self._use_int64() else "tl.program_id(0)"

    def _x_header(self) -> list[str]:
        """The rows of this step, from `xoffset`."""
        return [f"xindex = xoffset + tl.arange(0, XBLOCK){'[:, None]' if self.is_reduction else ''}",
                "xmask = xindex < xnumel"] + self._var_definitions(self._x_dims, "xindex")

    def _r_header(self) -> list[str]:
        if not self.is_reduction:
            return []
        lines = self._numel_definitions("r") + [
                 f"rbase = tl.arange(0, RBLOCK)[None, :]{'.to(tl.int64)' if self._use_int64() else ''}"]
        return lines + (self._r_definitions(looped=False) if self.persistent else [])

    def _codegen_blocks(self, code: IndentedBuffer):
        rblock = self.block_sizes().get("RBLOCK")
        for block in self.blocks:
            code.splice(block.prefix)
            if self.tiled:  # the second block dim is a second grid dim, not a loop
                code.writeline("roffset = tl.program_id(1) * RBLOCK")
                code.writelines(self._r_definitions(looped=True))
                code.splice(block.body)
            elif block.kind == "loop" and self.is_reduction and not self.persistent:
                # literal bounds: Triton 3.6's interpreter cannot take a constexpr in range()
                rnumel = self.rnumel if is_static(self.rnumel) else "rnumel"
                if rnumel == "rnumel" and V.graph.current_device().type == "cpu":
                    code.writelines(interpreter_range("roffset", 0, "rnumel", rblock))
                else:
                    code.writeline(f"for roffset in range(0, {rnumel}, {rblock}):  # (0, rnumel, RBLOCK)")
                with code.indent():
                    code.writelines(self._r_definitions(looped=True))
                    code.splice(block.body)
            else:
                code.splice(block.body)
            code.splice(block.suffix)

    def _launcher(self) -> list[str]:
        ptrs, blocks, sizes = self.pointer_names(), self.block_sizes(), self.args.size_names()
        kind = ("tiled pointwise" if self.tiled else "persistent reduction" if self.persistent else "looped reduction") \
            if self.is_reduction else "pointwise"
        numels = f"xnumel={self.xnumel}" + (f", rnumel={self.rnumel}" if self.is_reduction else "")
        takes = f"the tensors of {self.args.call_names()}" + (f" and the sizes {', '.join(sizes)}" if sizes else "")
        lines = [f"def {self.launcher_name()}({', '.join(ptrs + sizes)}):", f'    """{kind}: {numels}; takes {takes}"""']
        if self.xnumel == 0 or (self.tiled and self.rnumel == 0):
            return lines + ["    return  # nothing to compute"]
        numel_args = self.int_params()[len(sizes):]
        lines += [f"    {n} = {pexpr(self.xnumel if n == 'xnumel' else self.rnumel)}" for n in numel_args]
        if numel_args and not V.graph.sizevars.statically_known_true(sympy.Gt(self.xnumel, 0)):
            lines.append("    if xnumel == 0: return  # an empty grid")
        xnumel = "xnumel" if "xnumel" in numel_args else self.xnumel
        candidates = self.autotune_candidates(blocks)
        if len(candidates) > 1:  # max_autotune: a Launcher per candidate (compiled ahead); the first call times each
            return self._autotuned_launch_lines(lines, candidates, ptrs + self.int_params(), xnumel,
                                                [V.graph.get_dtype(n) for n in self.args.call_names()])
        grid = [self._grid_size("x", blocks["XBLOCK"])] + ([self._grid_size("r", blocks["RBLOCK"])] if self.tiled else [])
        return self._launch_lines(lines, grid, ptrs + self.int_params(), blocks,
                                  [V.graph.get_dtype(n) for n in self.args.call_names()])

    def _autotuned_launch_lines(self, lines, candidates, args, xnumel, dtypes) -> list[str]:
        """max_autotune's launcher: `_launchers_<name>`, one `Launcher` per candidate (compiled
        together ahead of the first call, with the graph's other kernels); the first call times
        each on the real tensors (runtime/triton_runtime.py, `autotune`) and keeps the fastest."""
        launchers, ints = f"_launchers_{self.name}", len(args) - len(dtypes)
        static = isinstance(xnumel, (int, sympy.Integer))
        grid = f"(cdiv({xnumel}, c['XBLOCK']),)" if static else "None"
        dtypes_text = f"({', '.join(map(str, dtypes))}{',' if len(dtypes) == 1 else ''})"
        at_call = "" if static else f", grid=(cdiv({xnumel}, launcher.meta['XBLOCK']),)"
        call = f"launcher({', '.join(args)}{at_call})"
        in_place = "".join(p + ", " for p in args if p.startswith("in_out_ptr"))
        return [f"# {self.kernel_name()}[(cdiv(xnumel, XBLOCK),)](...), max_autotune times {len(candidates)} block sizes",
                f"{launchers} = [Launcher({self.kernel_name()}, {grid}, {dtypes_text}{f', ints={ints}' if ints else ''}, **c)",
                f"    for c in {candidates!r}]", ""] + lines + [
            f"    if not _best: _best.append(autotune(lambda launcher: {call}, {launchers}, {args[0]}.is_cuda, ({in_place})))",
            "    launcher = _best[0]",
            f"    {call}"]

    def _grid_size(self, prefix, block):
        """Programs along one grid dim: a number, or (symbolic) the launcher's expression."""
        numel = self.xnumel if prefix == "x" else self.rnumel
        return cdiv(numel, block) if is_static(numel) else f"cdiv({prefix}numel, {block})"

    def _launch_lines(self, lines, grid, args, blocks, dtypes) -> list[str]:
        """The launcher: `triton_kernel0[grid](...)`, bound once to a `Launcher` (which skips
        the JIT's per-call dispatch, and can compile ahead from the pointers' dtypes). A
        grid of the launcher's `xnumel` (symbolic sizes) is handed over at each call, with
        the int arguments that follow the pointers."""
        kwargs = ", ".join(f"{k}={v}" for k, v in blocks.items())
        grid_text = f"({grid[0]},)" if len(grid) == 1 else f"({grid[0]}, {grid[1]})"
        dtypes_text = f"({', '.join(map(str, dtypes))}{',' if len(dtypes) == 1 else ''})"
        launch, ints = f"_launcher_{self.name}", len(args) - len(dtypes)
        at_call = any(isinstance(g, str) for g in grid)
        bound = f"{'None' if at_call else grid_text}, {dtypes_text}{f', ints={ints}' if ints else ''}"
        return [f"# {self.kernel_name()}[{grid_text}](..., {kwargs}), pointers of {dtypes_text}",
                f"{launch} = Launcher({self.kernel_name()}, {bound}, {kwargs})", ""] + lines + \
            [f"    {launch}({', '.join(args)}{f', grid={grid_text}' if at_call else ''})"]
