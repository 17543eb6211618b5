"""The cases of tests/core/test_training_patterns.py, each in a process of its own:

    python tests/training_patterns_cases.py OUT_DIR CASE [CASE ...]

imports torch and miniinductor once (seconds), then forks one child per CASE, two at a
time, so that every case pays no imports and a crash (a segfault) ends only its own child.
A child runs its case (compiled with miniinductor and eagerly, from the same seed), writes
its output to OUT_DIR/CASE.log and, if every comparison held, a last line `RESULT {json}`
with what was compared and the largest differences seen; a failed comparison raises. This
process writes each child's exit status to OUT_DIR/CASE.exit (negative: the signal that
killed it). Run it with TRITON_INTERPRET=1 (read when Triton is imported, here): the
`cpu_backend="triton"` case needs it; the C++ cases never touch Triton.

Tolerances (float32; the compiled code runs the same ATen matmuls/convolutions as eager,
only fused pointwise chains and reductions may round or accumulate in another order):
  * STEP_TOL 1e-4: losses, gradients and parameters after a few optimizer steps of small
    models with LayerNorm/BatchNorm (chains of mean/variance reductions and their backward,
    whose accumulation order differs from eager's by a few float32 ulps, which the steps
    carry on into the parameters: an Adam step divides by sqrt(v), amplifying them);
  * EXACT_TOL 1e-6 (float32 assert_close's default scale): pointwise-only graphs, such as
    an optimizer step or an in-place update, that do the same IEEE operations as eager.
"""
from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from forking import child_main, fork_each
from torch.utils.checkpoint import checkpoint

import miniinductor

STEP_TOL = dict(rtol=1e-4, atol=1e-4)
EXACT_TOL = dict(rtol=1.3e-6, atol=1e-6)
DOUBLE_TOL = dict(rtol=1e-9, atol=1e-9)   # float64 BatchNorm statistics: reductions only
STEPS = 3


class Stats:
    """The largest absolute difference seen per kind of value, and how many were compared."""

    def __init__(self):
        self.max_err: dict[str, float] = {}
        self.compared = 0

    def close(self, kind: str, actual, expected, what: str, tol=STEP_TOL):
        assert isinstance(actual, torch.Tensor), f"{what}: compiled gave {type(actual).__name__}"
        torch.testing.assert_close(actual, expected, **tol, msg=lambda m: f"{what}: {m}")
        err = (actual.double() - expected.double()).abs().max().item() if actual.numel() else 0.0
        self.max_err[kind] = max(self.max_err.get(kind, 0.0), err)
        self.compared += 1

    def grads_and_params(self, compiled_model, eager_model, step, tol=STEP_TOL, grads=True):
        params_c = dict(named(compiled_model, "named_parameters"))
        params_e = dict(named(eager_model, "named_parameters"))
        assert params_c.keys() == params_e.keys() and params_e
        for name, p in params_e.items():
            q = params_c[name]
            if grads:
                assert p.grad is not None and q.grad is not None, f"step {step}: {name} has no grad"
                self.close("grad", q.grad, p.grad, f"step {step}: grad of {name}", tol)
            self.close("param", q, p, f"step {step}: {name}", tol)

    def buffers(self, compiled_model, eager_model, what, tol=STEP_TOL):
        bufs_c = dict(named(compiled_model, "named_buffers"))
        for name, b in named(eager_model, "named_buffers"):
            self.close("buffer", bufs_c[name], b, f"{what}: buffer {name}", tol)

    def result(self, **extra) -> dict:
        return {"compared": self.compared, "max_err": self.max_err, **extra}


def named(model, method):
    """(name, tensor) without the `_orig_mod.` prefix a compiled module adds."""
    return [(n.replace("_orig_mod.", ""), t) for n, t in getattr(model, method)()]


class Net(nn.Module):
    """Embedding → Linear → GELU → LayerNorm → Linear: the small transformer-ish mix."""

    def __init__(self, vocab=32, dim=16, out=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, out)
        self.norm = nn.LayerNorm(2 * dim)

    def forward(self, tokens):
        return self.fc2(self.norm(F.gelu(self.fc1(self.emb(tokens)))))


class CheckpointedNet(Net):
    """The same, with the middle recomputed in the backward (activation checkpointing)."""

    def forward(self, tokens):
        h = self.emb(tokens)
        h = checkpoint(lambda t: self.norm(F.gelu(self.fc1(t))), h, use_reentrant=False)
        return self.fc2(h)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


def batch(n=6, seq=5, vocab=32, out=8):
    return torch.randint(0, vocab, (n, seq)), torch.randn(n, seq, out)


def pair(model, **options):
    eager = copy.deepcopy(model)
    return miniinductor.compile(model, **options), eager


# --------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------
def backward_inside(options, sizes=(6,) * STEPS) -> dict:
    """A whole training step compiled: forward, loss, backward(), gradient clipping and the
    optimizer step (one batch size per step)."""
    stats = Stats()
    model_c = Net()
    model_e = copy.deepcopy(model_c)
    opt_c, opt_e = (torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model_c, model_e))

    def train_step(model, opt, tokens, target):
        opt.zero_grad()
        loss = F.mse_loss(model(tokens), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)   # their norm is 1.8 at the first step: clipped
        opt.step()
        return loss.detach()

    compiled_step = miniinductor.compile(train_step, **options)
    for step, n in enumerate(sizes):
        tokens, target = batch(n)
        loss_e = train_step(model_e, opt_e, tokens, target)
        loss_c = compiled_step(model_c, opt_c, tokens, target)
        stats.close("loss", loss_c, loss_e, f"step {step}: loss")
        stats.grads_and_params(model_c, model_e, step)
    assert miniinductor.metrics.graphs_compiled >= 2, "the forward and the backward were compiled"
    return stats.result(graphs=miniinductor.metrics.graphs_compiled)


def case_backward_inside_cpp():
    return backward_inside({})


def case_backward_inside_triton():
    assert os.environ.get("TRITON_INTERPRET") == "1"
    return backward_inside({"cpu_backend": "triton"})


def case_backward_inside_dynamic():
    """Symbolic batch sizes: each graph (and, lazily inside backward(), its backward) is
    compiled once, generic in the sizes: none per size (`scalar_tensor(s0)`, `true_divide`
    and LayerNorm's `sym_float(s1)` are lowered)."""
    result = backward_inside({"dynamic": True}, sizes=(6, 7, 6, 8))
    assert miniinductor.metrics.specializations == 0, miniinductor.metrics.specializations
    return {**result, "specializations": miniinductor.metrics.specializations}


def compiled_optimizer(make_opt) -> dict:
    """`torch.compile(opt.step)`: forward and backward eager, the update compiled."""
    stats = Stats()
    model_c = Net()
    model_e = copy.deepcopy(model_c)
    opt_c, opt_e = make_opt(model_c.parameters()), make_opt(model_e.parameters())
    step_c = miniinductor.compile(opt_c.step)
    for step in range(STEPS):
        tokens, target = batch()
        for model, opt_step in ((model_e, opt_e.step), (model_c, step_c)):
            model.zero_grad()
            F.mse_loss(model(tokens), target).backward()
            opt_step()
        stats.grads_and_params(model_c, model_e, step, EXACT_TOL)
        for p_c, p_e in zip(model_c.parameters(), model_e.parameters()):
            for key, value in opt_e.state[p_e].items():
                stats.close("state", opt_c.state[p_c][key], value, f"step {step}: optimizer state {key}", EXACT_TOL)
    assert miniinductor.metrics.graphs_compiled >= 1
    extern = [op for op in miniinductor.metrics.fallback_ops if "_foreach" in op]
    assert not extern, f"the update ran foreach ops in ATen, not in our kernels: {extern}"
    return stats.result(graphs=miniinductor.metrics.graphs_compiled)


def case_optimizer_sgd_momentum():
    return compiled_optimizer(lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9))


def case_optimizer_adam_foreach():
    return compiled_optimizer(lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=True))


def case_optimizer_adamw():
    return compiled_optimizer(lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1))


def case_foreach_ops():
    """Every foreach overload we decompose (capture/decompositions.py), against eager."""
    from miniinductor.ext.combo.decompositions import foreach_decompositions
    stats = Stats()
    xs = [torch.randn(5), torch.randn(3, 4), torch.randn(2, 3, 2)]
    ys, zs = ([torch.rand_like(x) + 0.5 for x in xs] for _ in range(2))   # positive: sqrt, pow, div
    calls = {
        "Scalar": lambda f: f(ys, 0.7), "List": lambda f: f(ys, zs), "ScalarList": lambda f: f(ys, [0.5, 1.5, -2.0]),
        "Tensor": lambda f: f(ys, torch.tensor(1.3)), "default": lambda f: f(ys),
        "ScalarAndTensor": lambda f: f(1.7, ys),
    }
    addc = {"Scalar": lambda f: f(xs, ys, zs, 0.3), "ScalarList": lambda f: f(xs, ys, zs, [0.5, 1.5, -2.0])}
    lerp = {"Scalar": lambda f: f(xs, ys, 0.3), "ScalarList": lambda f: f(xs, ys, [0.5, 1.5, -2.0]),
            "List": lambda f: f(xs, ys, zs)}
    special = {"_foreach_addcmul": addc, "_foreach_addcdiv": addc, "_foreach_lerp": lerp,
               "_foreach_norm": {"Scalar": lambda f: f(xs, 3.0)}}
    ops = list(foreach_decompositions())
    cases = [(special.get(op.__name__.split(".")[0], calls)[op._overloadname], op) for op in ops]

    def every_op():   # one graph calling them all: one compile
        return [call(op) for call, op in cases]
    for op, actual, expected in zip(ops, miniinductor.compile(every_op)(), every_op(), strict=True):
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            stats.close("foreach", a, e, f"{op}: element {i}", dict(rtol=1.3e-6, atol=1e-5))
    left = [op for op in miniinductor.metrics.fallback_ops if "_foreach" in op]
    assert not left, f"foreach ops still run by ATen: {left}"
    return stats.result(overloads=len(ops), graphs=miniinductor.metrics.graphs_compiled)


def train_model(model_c, model_e, steps=STEPS, micro=1) -> Stats:
    """SGD steps of a compiled model (backward outside the compiled call, as usual), with
    `micro` batches whose gradients accumulate before each optimizer step."""
    stats = Stats()
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model_c, model_e)]
    for step in range(steps):
        for opt in opts:
            opt.zero_grad()
        for k in range(micro):
            tokens, target = batch()
            losses = []
            for model in (model_c, model_e):
                loss = F.mse_loss(model(tokens), target) / micro
                loss.backward()
                losses.append(loss.detach())
            stats.close("loss", *losses, f"step {step}.{k}: loss")
        stats.grads_and_params(model_c, model_e, step)   # the accumulated gradients
        for opt in opts:
            opt.step()
        stats.grads_and_params(model_c, model_e, step, grads=False)
    return stats


def case_checkpointing():
    stats = train_model(*pair(CheckpointedNet()))
    return stats.result(graphs=miniinductor.metrics.graphs_compiled)


def case_gradient_accumulation():
    stats = train_model(*pair(Net()), micro=4)
    return stats.result(graphs=miniinductor.metrics.graphs_compiled)


def case_compiled_autograd():
    """`compiled_autograd`: the backward graph is captured by Dynamo at backward() time
    (through the autograd engine) and compiled by our backend as a graph of its own. With
    `freezing=True`, which must leave that graph's parameters inputs: it runs without grad
    mode, like inference, but the optimizer steps between the calls change them."""
    from torch._dynamo.utils import counters
    stats = Stats()
    model_c = Net()
    model_e = copy.deepcopy(model_c)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model_c, model_e)]

    def train_step(model, tokens, target):
        loss = F.mse_loss(model(tokens), target)
        loss.backward()
        return loss.detach()

    with torch._dynamo.config.patch(compiled_autograd=True):   # read by torch.compile itself
        compiled_step = miniinductor.compile(train_step, freezing=True)
        for step in range(STEPS):
            for opt in opts:
                opt.zero_grad()
            tokens, target = batch()
            loss_e = train_step(model_e, tokens, target)
            loss_c = compiled_step(model_c, tokens, target)
            stats.close("loss", loss_c, loss_e, f"step {step}: loss")
            stats.grads_and_params(model_c, model_e, step)
            for opt in opts:
                opt.step()
    captured = counters["compiled_autograd"]["captures"]
    assert captured > 0, f"compiled autograd captured no backward: {dict(counters['compiled_autograd'])}"
    return stats.result(graphs=miniinductor.metrics.graphs_compiled, compiled_autograd_captures=captured)


def case_batchnorm_train_eval():
    """BatchNorm's running statistics through train → eval → train, then in float64."""
    stats = Stats()
    model_c, model_e = pair(ConvBN())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model_c, model_e)]
    target = torch.randn(4, 2)

    def train(dtype, tol, phase):
        for step in range(2):
            x = torch.randn(4, 3, 6, 6, dtype=dtype)
            for opt in opts:
                opt.zero_grad()
            losses = []
            for model in (model_c, model_e):
                loss = F.mse_loss(model(x), target.to(dtype))
                loss.backward()
                losses.append(loss.detach())
            stats.close("loss", *losses, f"{phase} step {step}: loss", tol)
            stats.grads_and_params(model_c, model_e, f"{phase} {step}", tol)
            stats.buffers(model_c, model_e, f"{phase} step {step}", tol)
            for opt in opts:
                opt.step()

    def evaluate(dtype, tol, phase):
        for model in (model_c, model_e):
            model.eval()
        x = torch.randn(4, 3, 6, 6, dtype=dtype)
        with torch.no_grad():
            stats.close("eval", model_c(x), model_e(x), f"{phase}: eval output", tol)
        stats.buffers(model_c, model_e, f"{phase}: after eval (unchanged)", tol)
        for model in (model_c, model_e):
            model.train()

    train(torch.float32, STEP_TOL, "train")
    evaluate(torch.float32, STEP_TOL, "eval")
    train(torch.float32, STEP_TOL, "train again")
    for model in (model_c, model_e):
        model.double()
    # start the float64 phase from equal states: the float32 steps' last-ulp differences
    # (within STEP_TOL) would otherwise dominate a float64 comparison
    model_c._orig_mod.load_state_dict(model_e.state_dict())
    train(torch.float64, DOUBLE_TOL, "double train")
    evaluate(torch.float64, DOUBLE_TOL, "double eval")
    tracked = dict(named(model_c, "named_buffers"))["bn.num_batches_tracked"].item()
    assert tracked == 6, f"num_batches_tracked {tracked}, eager counts 6"
    return stats.result(graphs=miniinductor.metrics.graphs_compiled)


def case_input_mutation_and_views():
    """In-place updates of inputs inside the compiled function, and views of inputs returned:
    values, inputs after the call, and which outputs share storage with which inputs."""
    from conftest import check

    def mutate(x, acc, scale):
        acc.add_(x * scale)          # accumulate into an input
        x.mul_(2).clamp_(max=1.0)     # chained in-place ops on another
        return (acc * x).sum()

    def mutate_view(x):
        x[:, 1:].mul_(-1)             # a slice of an input updated in place
        x.t()[0].add_(1)              # and a view through a transpose
        return x.sum(0)

    def views(x):
        return x[1:], x.t(), x.view(-1), x.unsqueeze(0).expand(2, *x.shape), x + 1

    def view_and_mutate(x, y):
        y.copy_(x.relu())
        return y.view(-1)[::2], x.transpose(0, 1)

    stats = Stats()
    for fn, args in ((mutate, (torch.randn(4, 5), torch.randn(4, 5), torch.randn(5))),
                     (mutate_view, (torch.randn(4, 5),)),
                     (views, (torch.randn(4, 5),)),
                     (view_and_mutate, (torch.randn(4, 5), torch.randn(4, 5)))):
        torch._dynamo.reset()
        check(fn, *args)
        stats.compared += 1
    return stats.result(functions=stats.compared, graphs=miniinductor.metrics.graphs_compiled)


def case_inference_mode():
    """The same compiled module under torch.inference_mode(), no_grad and in training."""
    stats = Stats()
    model_c, model_e = pair(Net())
    tokens, target = batch()
    with torch.inference_mode():
        out_c, out_e = model_c(tokens), model_e(tokens)
        stats.close("output", out_c, out_e, "inference_mode output")
        assert out_c.is_inference(), "an inference-mode output is an inference tensor"
        tokens2 = torch.randint(0, 32, (6, 5))     # an inference tensor as input
        stats.close("output", model_c(tokens2), model_e(tokens2), "inference_mode output, second call")
    with torch.no_grad():
        stats.close("output", model_c(tokens), model_e(tokens), "no_grad output")
    stats.grads_and_params(*[m for m in (model_c, model_e)], 0, grads=False)
    train_stats = train_model(model_c, model_e, steps=2)   # and training still works after
    stats.max_err.update({f"train_{k}": v for k, v in train_stats.max_err.items()})
    stats.compared += train_stats.compared
    return stats.result(graphs=miniinductor.metrics.graphs_compiled)


CASES = {name.removeprefix("case_"): fn for name, fn in globals().items() if name.startswith("case_")}


def run_child(name: str, out_dir: Path):
    """In a forked child: run one case with stdout and stderr in its log; never returns."""
    def body():
        torch.manual_seed(0)
        return CASES[name]()
    child_main(out_dir / f"{name}.log", body)


def main(out_dir: Path, names: list[str], workers: int = 2):
    fork_each([(name, out_dir) for name in names], run_child, out_dir, workers)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
