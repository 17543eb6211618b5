"""Training a compiled model and an eager copy side by side (miniinductor.real_models):
every step's loss, output, gradient, parameter and buffer errors.

`compare_training(name)` trains a compiled model and an eager deepcopy of it side by side for
`steps` SGD steps (momentum 0.9; the optimizers run eagerly, as users run them), each step on
a new batch (`make_batch`, the same for both), and returns a JSON-able dict:
* ``losses``: [[eager, compiled]] per step;
* ``outputs``: per step, the relative error of the main output (logits);
* ``grads``: per step, {parameter: relative error of its gradient}, where the relative
  error is ||g_compiled - g_eager|| / max(||g_eager||, GRAD_FLOOR x the step's largest
  ||g_eager||) (a missing gradient on either side: inf). The floor is for gradients
  that are mathematically zero -- the attention key bias, since softmax ignores the
  per-row constant q . b_k -- which hold rounding noise on both sides (||g|| ~ 1e-9);
  any other gradient is far above it, and its error is relative to its own norm;
* ``params`` and ``buffers``: {name: the largest relative error after an optimizer
  step}, the norms floored likewise at GRAD_FLOOR x the largest parameter (buffer)
  norm: a key bias starts at zero and moves by the rounding noise of its gradient, and
  a BatchNorm whose input is a 1x1 convolution of a BatchNorm's output has a running
  mean of ~1e-9;
* ``max_grad_rel`` / ``worst_grad`` (the largest gradient error, [step, parameter]),
  ``seconds`` (wall time, compiling included).

With `sync` (the default), after each step's comparisons the compiled side's
parameters, buffers and momentum are set to the eager side's (in place, as an
optimizer writes them), so every step measures the compiled forward and backward from
the same state, and errors do not compound. Without it the two train apart, and
where training is chaotic the errors measure the model more than the compiler: on
ResNet-18 (BatchNorm over 2 images, ReLU) a rounding-sized difference in the parameters
after step 0 grows by orders of magnitude within two steps, in float64 too and under
Inductor as well, while each step's compiled gradient is as close to the float64 gradient
at its own parameters as eager's is (the figures: docs/what_works.md).

`compile(model)` defaults to ``torch.compile(model, backend="miniinductor")``.
"""
from __future__ import annotations

import copy
import math
import time
from typing import Callable

import torch
import torch.nn as nn

from .models import main_output, make_batch, make_model

# -------------------------------------------------------------------------- comparing
#: the denominator of a gradient's relative error is floored at this fraction of the
#: step's largest gradient norm: see `compare_training`
GRAD_FLOOR = 1e-3


def _norm(t: torch.Tensor) -> float:
    return float(t.detach().double().norm())


def _rel(actual: torch.Tensor, expected: torch.Tensor, floor: float = 0.0) -> float:
    """||actual - expected|| / max(||expected||, floor, tiny) (Frobenius norms, in float64)."""
    if actual.shape != expected.shape:
        return math.inf
    return _norm(actual.double() - expected.double()) / max(_norm(expected), floor, 1e-30)


def _relative_errors(compiled: dict, eager: dict, floor_fraction: float) -> dict:
    """{name: _rel(compiled[name], eager[name], floor)}, the floor `floor_fraction` x the
    largest eager norm; a None on one side only: inf; on both: left out."""
    norms = [_norm(t) for t in eager.values() if t is not None]
    floor = floor_fraction * max(norms, default=0.0)
    errors = {}
    for n, e in eager.items():
        c = compiled[n]
        if e is None and c is None:
            continue
        errors[n] = math.inf if e is None or c is None else _rel(c, e, floor)
    return errors


def _floating_buffers(model: nn.Module) -> dict:
    return {n: b for n, b in model.named_buffers() if b.is_floating_point() or n.endswith("num_batches_tracked")}


def _miniinductor_backend():
    """"miniinductor", the name users write, where the installed entry point registers it;
    else (a checkout on sys.path, not pip-installed) the same backend function."""
    from torch._dynamo.backends.registry import lookup_backend

    import miniinductor
    try:
        lookup_backend("miniinductor")
        return "miniinductor"
    except Exception:
        return miniinductor.backend


@torch.no_grad()
def _copy_state(params_c, params_e, opt_c, opt_e, buffers_c, buffers_e):
    """The compiled side's parameters, momentum and buffers set to the eager side's, in place."""
    for n, p in params_e.items():
        params_c[n].copy_(p)
        momentum = opt_e.state.get(p, {}).get("momentum_buffer")
        if momentum is not None:
            opt_c.state[params_c[n]]["momentum_buffer"].copy_(momentum)
    for n, b in buffers_e.items():
        buffers_c[n].copy_(b)


def compare_training(name: str, *, device: str = "cpu", steps: int = 3, lr: float = 0.05, seed: int = 0,
                     sync: bool = True, compile: Callable | None = None) -> dict:
    """Train `name` compiled and eagerly side by side for `steps` SGD steps; the dict the
    module docstring describes. `sync`: the compiled side restarts from eager's state after
    each step. `compile(model)` defaults to ``torch.compile(model, backend="miniinductor")``."""
    start = time.perf_counter()
    if compile is None:
        compile = lambda m: torch.compile(m, backend=_miniinductor_backend())
    model = make_model(name, seed).to(device)
    gen = torch.Generator().manual_seed(seed + 1)
    eager = copy.deepcopy(model)
    compiled = compile(model)
    opt_c, opt_e = [torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9) for m in (model, eager)]
    params_c, params_e = dict(model.named_parameters()), dict(eager.named_parameters())
    result = {"model": name, "device": device, "steps": steps, "sync": sync, "losses": [], "outputs": [],
              "grads": [], "params": {}, "buffers": {}}

    def worst(kind, errors):
        for n, e in errors.items():
            result[kind][n] = max(result[kind].get(n, 0.0), e)

    for _ in range(steps):
        inputs, loss_fn = make_batch(name, gen)
        inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        out_e, out_c = eager(**inputs), compiled(**inputs)
        loss_e, loss_c = loss_fn(out_e), loss_fn(out_c)
        loss_e.backward()
        loss_c.backward()
        result["losses"].append([loss_e.item(), loss_c.item()])
        result["outputs"].append(_rel(main_output(out_c), main_output(out_e)))
        grads_e = {n: p.grad for n, p in params_e.items() if p.requires_grad}
        assert any(g is not None for g in grads_e.values()), f"{name}: no parameter got a gradient"
        result["grads"].append(_relative_errors({n: params_c[n].grad for n in grads_e}, grads_e, GRAD_FLOOR))
        for opt in (opt_c, opt_e):
            opt.step()
            opt.zero_grad()
        worst("params", _relative_errors(params_c, params_e, GRAD_FLOOR))
        buffers_c, buffers_e = _floating_buffers(model), _floating_buffers(eager)
        worst("buffers", _relative_errors({n: b.double() for n, b in buffers_c.items()},
                                          {n: b.double() for n, b in buffers_e.items()}, GRAD_FLOOR))
        if sync:
            _copy_state(params_c, params_e, opt_c, opt_e, buffers_c, buffers_e)
    rows = [(rel, k, n) for k, grads in enumerate(result["grads"]) for n, rel in grads.items()]
    top = max(rows, default=(0.0, 0, ""))
    result["max_grad_rel"], result["worst_grad"] = top[0], [top[1], top[2]]
    result["seconds"] = time.perf_counter() - start
    return result


def summarize(result: dict) -> dict:
    """The worst of each kind of error over all steps: loss (relative), output, gradient,
    parameter and buffer (relative norms, see `compare_training`)."""
    return {
        "loss": max(abs(c - e) / max(abs(e), 1e-30) for e, c in result["losses"]),
        "output": max(result["outputs"]),
        "grad": result["max_grad_rel"],
        "param": max(result["params"].values(), default=0.0),
        "buffer": max(result["buffers"].values(), default=0.0),
    }
