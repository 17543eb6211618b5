"""Lowering: build the loop IR of `torch.where(cond, a, b)`.

Phase: lowering. Mirrors the `where` lowering in `torch/_inductor/lowering.py`.

A lowering receives IR nodes for tensor arguments (or plain Python numbers) and returns
a `StorageBox(Pointwise(device, dtype, inner_fn, size))`: nothing is computed here, we only
describe, for every output index, how to compute the value from loads. `inner_fn(index)`
is called later with symbolic indices, under whichever ops handler is installed (printing,
recording dependencies, generating C++ or Triton).

Tools (all in `miniinductor/lowering/pointwise.py`, imported below):
  * `promote((a, b), KIND.DEFAULT)` → (compute dtype, output dtype): eager's type promotion
    of the two value arguments (the condition takes no part in it);
  * `broadcast_shapes(*sizes)` → the common shape of all tensors;
  * `loader_in(x, size, dtype)` → `load(index)`: x broadcast to `size`, cast to `dtype`
    (a Python number becomes `ops.constant`);
  * `device_of(args)`; `is_ir(x)`; `ops.where(c, x, y)`, `ops.to_dtype(v, dtype)`.

Worked example: cond [4, 1] bool, a [4, 8] float32, b = 0 (a Python int): size [4, 8];
the condition is loaded as bool at the broadcast index, a as float32, b becomes
`ops.constant(0, float32)`; the result is float32 [4, 8].

If your lowering raises NotImplementedError the graph quietly runs `aten.where` as an ATen
fallback (an "extern call"); the check counts that as not done.
Hints: compute the size from the IR arguments only (`is_ir`); load the condition as
torch.bool; cast the result to the output dtype only when it differs from the compute dtype.
Run: python -m miniinductor exercise run 2
"""
import torch  # noqa: F401  (for your solution)

from miniinductor.ir.nodes import Pointwise, StorageBox  # noqa: F401
from miniinductor.lowering.pointwise import KIND, broadcast_shapes, device_of, is_ir, loader_in, promote  # noqa: F401
from miniinductor.virtualized import ops  # noqa: F401

TARGET = "miniinductor.lowering.pointwise.where"


def where(cond, a, b):
    raise NotImplementedError("write the where lowering")
