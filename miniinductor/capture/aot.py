"""Capture: Dynamo's FX graph → AOTAutograd → ATen forward (and backward) graphs.

Mirrors `compile_fx` in `torch/_inductor/compile_fx.py`. `aot_module_simplified` traces
the Dynamo graph through the ATen dispatcher with our decomposition table, functionalizes
it (no in-place ops or aliasing left inside), and -- when gradients are needed -- splits it
into a forward and a backward graph. Each is handed to `compile_fx_inner` (our compiler
proper); AOTAutograd stitches the compiled pieces into an autograd.Function. A graph with
symbolic sizes is first made static, one specialisation per concrete shape (specialize.py).
"""
from __future__ import annotations

import functools

import torch

from torch._functorch.aot_autograd import aot_module_simplified

from .decompositions import decomposition_table
from .specialize import Specializer, has_symbolic_inputs


def compile_fx(gm, example_inputs, config):
    from ..compile_fx import compile_fx_inner

    if has_symbolic_inputs(example_inputs):  # dynamic shapes: one static compile per shape
        return Specializer(gm, functools.partial(compile_fx, config=config))

    def compiler(name):
        return functools.partial(compile_fx_inner, config=config, name=name, dynamo_gm=gm)
    return aot_module_simplified(
        gm, example_inputs,
        fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=decomposition_table(training=_needs_grad(gm, example_inputs)),
    )


def _needs_grad(gm, example_inputs) -> bool:
    """Will AOTAutograd build a backward graph? (grad mode on and something requires grad)"""
    if not torch.is_grad_enabled():
        return False
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)] + list(gm.parameters())
    return any(t.requires_grad for t in tensors)
