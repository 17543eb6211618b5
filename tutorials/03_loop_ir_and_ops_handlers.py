# %% [markdown]
# # Tutorial 3: The define-by-run loop IR and `V.ops` handlers
#
# In this tutorial you will learn:
#
# * how miniinductor (like Inductor) describes a tensor *before any code exists*: as a
#   Python closure `inner_fn(index)` that computes one element by calling `ops.*`;
# * how to build a `Pointwise` and a `Reduction` node by hand, and store them in a
#   `ComputedBuffer`;
# * how the *same closure* is read in several ways just by installing a different
#   handler with `V.set_ops_handler(...)`: printed (`PrintHandler`), analysed for its
#   memory dependencies (`RecordingHandler`), interpreted with torch tensors
#   (`tools/debug/interpreter.py`) and compiled to C (a miniature of `CppKernel`);
# * why "fusion is composing closures".
#
# This is the IR phase (`miniinductor/ir/`, `miniinductor/ops_handler.py`,
# `miniinductor/virtualized.py`). Tutorial 5 shows how ATen ops are lowered into it.

# %%
import torch

from miniinductor.ir.indexing import index_vars
from miniinductor.ir.nodes import ComputedBuffer, Layout, Pointwise, Reduction
from miniinductor.ops_handler import ALL_OPS, PrintHandler, RecordingHandler
from miniinductor.tools.debug.interpreter import evaluate_buffer
from miniinductor.virtualized import V, ops

torch.manual_seed(0)
cpu = torch.device("cpu")

# Two inputs that our IR will read by *name*: x is [4, 8] row-major, y is [8].
x = torch.randn(4, 8)
y = torch.randn(8)
eager = torch.relu(x * 2.0 + y)   # what we are going to describe

# %% [markdown]
# ## 1. A loop body is a closure over `ops`
#
# `inner_fn` receives the loop indices (`[i0, i1]`) and returns the value of one
# element. Memory is addressed by *flat* offsets: element `(i0, i1)` of the
# row-major `x` is at `8*i0 + i1`, and broadcasting `y` over rows means ignoring `i0`.
#
# `ops` is a proxy (`miniinductor/virtualized.py`): `ops.add(a, b)` forwards to
# whatever *handler* is currently installed. The closure itself has no idea whether it
# is being printed, analysed, evaluated or compiled.

# %%


def inner_fn(index):
    i0, i1 = index
    a = ops.load("x", 8 * i0 + i1)
    b = ops.load("y", i1)
    two = ops.constant(2.0, torch.float32)
    return ops.relu(ops.add(ops.mul(a, two), b))


node = Pointwise(device=cpu, dtype=torch.float32, inner_fn=inner_fn, ranges=[4, 8])
print(node)

# %% [markdown]
# `str(node)` already ran `inner_fn`: `Pointwise.__str__` installs a `PrintHandler` and
# calls the closure with *symbolic* indices, SymPy symbols `i0, i1`. Every `ops` call
# returns a name (`tmp3`), which the next call receives as its argument.
#
# There is no handler outside a `with` block, by design: a handler can never leak.

# %%
try:
    ops.add("tmp0", "tmp1")
except RuntimeError as exc:
    print("RuntimeError:", exc)
print(f"\nThe OpsHandler protocol lists {len(ALL_OPS)} ops, e.g.", ALL_OPS[:6], "...")

# %% [markdown]
# ## 2. Reading #1: print it, explicitly
#
# The same thing by hand. `index_vars("i", ranges)` makes the symbols `i0, i1`
# (integer, non-negative), and `V.set_ops_handler(handler)` is a context manager:

# %%
symbols = index_vars("i", node.ranges)
with V.set_ops_handler(PrintHandler()) as printer:
    result = node.inner_fn(symbols)
print("\n".join(printer.lines))
print("returned:", result)
assert result == "tmp5" and len(printer.lines) == 6

# %% [markdown]
# ## 3. Storing it: `ComputedBuffer` and `Layout`
#
# A `Pointwise` is a *value*; to exist in memory it needs a name and a `Layout`
# (device, dtype, size, stride). `ComputedBuffer(name, layout, data)` is exactly what
# one kernel computes. Its `store_body(index)` runs `inner_fn` and then `ops.store`s
# the result at the offset the layout gives.

# %%
buf0 = ComputedBuffer("buf0", Layout(cpu, torch.float32, size=[4, 8], stride=[8, 1]), node)
print(buf0)

# %% [markdown]
# ## 4. Reading #2: which memory does it touch? (`RecordingHandler`)
#
# The scheduler must know what each buffer reads and writes, and at which index, to
# decide what can be fused. It does not parse anything: it runs the body under a
# `RecordingHandler`, which keeps every `load`/`store` as a `MemoryDep(name, index)`.

# %%
with V.set_ops_handler(RecordingHandler()) as recorder:
    buf0.store_body(symbols)
print("reads: ", [str(d) for d in recorder.reads])
print("writes:", [str(d) for d in recorder.writes])
assert {d.name for d in recorder.reads} == {"x", "y"}
assert [d.name for d in recorder.writes] == ["buf0"]

# %% [markdown]
# ## 5. Reading #3: evaluate it with torch (`tools/debug/interpreter.py`)
#
# `InterpreterHandler` binds each loop variable to an `arange` tensor shaped to
# broadcast along its own dimension (`i0` is `[[0],[1],[2],[3]]`, `i1` is
# `[[0,1,...,7]]`), so one run of the closure computes *all* elements at once:
# `ops.load("x", 8*i0 + i1)` becomes a gather from `x`'s memory, `ops.relu` is
# `torch.relu`. `evaluate_buffer(buf, memory)` allocates the buffer, runs the body and
# returns it. This gives a reference value straight from the IR, no C++ involved:

# %%
memory = {"x": x, "y": y}
value = evaluate_buffer(buf0, memory)
print(value)
torch.testing.assert_close(value, eager)
print("IR interpreted with torch == eager")

# %% [markdown]
# ## 6. Reading #4: compile it to C
#
# A code generator is also just a handler: each `ops.*` call *emits a line of C* and
# returns the name of the variable it assigned. Here is a complete (if tiny) one, the
# essence of `CppKernel` in `miniinductor/codegen/cpp.py`: loads become array reads at
# the printed index, arithmetic becomes C expressions, the store becomes an assignment,
# and the body is wrapped in one loop per range. (The real `CppKernel` adds common
# subexpression elimination, dtypes, reductions, OpenMP pragmas and fusion of several
# buffers into one loop nest -- tutorial 6 prints its output.)

# %%
from miniinductor.ir.indexing import cexpr


class TinyCHandler:
    C_EXPR = {"add": "{} + {}", "mul": "{} * {}", "relu": "({0} > 0.0f ? {0} : 0.0f)"}

    def __init__(self):
        self.lines, self.params = [], []

    def _emit(self, expr):
        name = f"tmp{len(self.lines)}"
        self.lines.append(f"float {name} = {expr};")
        return name

    def _param(self, name):
        if name not in self.params:
            self.params.append(name)
        return name

    def __getattr__(self, op):  # add, mul, relu, ...
        return lambda *args: self._emit(self.C_EXPR[op].format(*args))

    def load(self, name, index):
        return self._emit(f"{self._param(name)}[{cexpr(index)}]")

    def constant(self, value, dtype):
        return self._emit(f"{float(value)}f")

    def store(self, name, index, value):
        self.lines.append(f"{self._param(name)}[{cexpr(index)}] = {value};")


def tiny_codegen(buf: ComputedBuffer, kernel_name: str):
    handler = TinyCHandler()
    with V.set_ops_handler(handler):
        buf.store_body(symbols)          # the body, as C statements
    params = ", ".join(f"float* {p}" for p in handler.params)
    lines = [f'extern "C" void {kernel_name}({params}) {{']
    for depth, (var, size) in enumerate(zip(symbols, buf.get_size()), start=1):
        lines.append("    " * depth + f"for (long {var} = 0; {var} < {size}; {var}++) {{")
    lines += ["    " * (len(symbols) + 1) + line for line in handler.lines]
    for depth in range(len(symbols), -1, -1):
        lines.append("    " * depth + "}")
    return "\n".join(lines), handler.params


cpp, params = tiny_codegen(buf0, "kernel0")
print(cpp)
print("kernel parameters (buffer names, in order):", params)
assert params == ["x", "y", "buf0"]

# %% [markdown]
# To close the loop, build that C++ with miniinductor's runtime (`load_kernels`
# compiles a shared library into the kernel cache and loads it with `ctypes`) and call
# it on the tensors' data pointers:

# %%
from ctypes import c_void_p

from miniinductor.runtime.cpp_builder import load_kernels

kernel0 = load_kernels(cpp, ["kernel0"])["kernel0"]
out = torch.empty(4, 8)
kernel0(c_void_p(x.data_ptr()), c_void_p(y.data_ptr()), c_void_p(out.data_ptr()))
torch.testing.assert_close(out, eager)
print("IR compiled to C++ == eager")

# %% [markdown]
# ## 7. Reading #5: your own handler
#
# A handler is *any object* with a method per op. Here is a ten-line one that counts
# arithmetic and memory operations -- the beginning of a cost model. Values flowing
# through it are just `None`.

# %%


class CountingHandler:
    def __init__(self):
        self.counts = {}

    def __getattr__(self, name):
        def op(*args):
            self.counts[name] = self.counts.get(name, 0) + 1
        return op


with V.set_ops_handler(CountingHandler()) as counter:
    buf0.store_body(symbols)
print(counter.counts)
assert counter.counts == {"load": 2, "constant": 1, "mul": 1, "add": 1, "relu": 1, "store": 1}

# %% [markdown]
# ## 8. Reductions
#
# `Reduction(ranges, reduction_ranges, reduction_type, inner_fn)`: `inner_fn(index,
# rindex)` yields the values to fold, over reduction variables `r0, ...`. Here: the sum
# of each row of `buf0`.

# %%


def row_values(index, rindex):
    return ops.load("buf0", 8 * index[0] + rindex[0])


row_sum = Reduction(cpu, torch.float32, row_values, ranges=[4], reduction_ranges=[8],
                    reduction_type="sum", src_dtype=torch.float32)
buf1 = ComputedBuffer("buf1", Layout(cpu, torch.float32, [4], [1]), row_sum)
print(buf1)

value = evaluate_buffer(buf1, memory)  # memory already holds buf0 from section 5
torch.testing.assert_close(value, eager.sum(dim=1))
print("row sums from the IR == eager:", value)

# %% [markdown]
# ## 9. Fusion is composing closures
#
# `buf1` *loads* `buf0`: two kernels, and `buf0` makes a round trip through memory.
# But a consumer does not need a producer's memory, only its *loader*. If the reduction
# calls the producer's `inner_fn` instead of `ops.load("buf0", ...)`, the producer is
# inlined into the consumer: one loop nest, `buf0` never exists. This is what lowering
# does for every pointwise value until something forces it into memory ("realizes" it,
# tutorial 5), and what the scheduler does when it fuses kernels.

# %%


def fused_row_values(index, rindex):
    return node.inner_fn([index[0], rindex[0]])   # inline the Pointwise's body


fused = ComputedBuffer("buf2", Layout(cpu, torch.float32, [4], [1]),
                       Reduction(cpu, torch.float32, fused_row_values, [4], [8], "sum", torch.float32))
print(fused)

with V.set_ops_handler(RecordingHandler()) as recorder:
    fused.store_body(index_vars("i", [4]), index_vars("r", [8]))
print("fused reads:", sorted({d.name for d in recorder.reads}), "(buf0 is gone)")
assert {d.name for d in recorder.reads} == {"x", "y"}

value = evaluate_buffer(fused, {"x": x, "y": y})
torch.testing.assert_close(value, eager.sum(dim=1))
print("fused row sums == eager")

# %% [markdown]
# ## Summary
#
# * The loop IR is *define-by-run*: `Pointwise`/`Reduction` hold a closure, not a
#   data structure of expressions.
# * Handlers give the closure its meaning: print, record deps, interpret, compile,
#   count -- installed only through `with V.set_ops_handler(...)`.
# * Inlining one closure into another is fusion.
#
# Next: [tutorial 4](04_sympy_indexing_and_views.py), the SymPy index expressions
# inside those `ops.load` calls.
print("tutorial 3 done")
