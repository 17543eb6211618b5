"""Input mutations written in place (capture/aot.py keeps them in the graph as
`aten.copy_(input, new_value)`; GraphLowering.mutate_input stores the new value into the
input's own memory; the scheduler runs readers of the old value first).

Each case runs on both backends (C++, and Triton through its interpreter), is compared
with eager by conftest.check (outputs, and every input after the call), and looks at the
compiled graph: the new value is computed into the input (a MutationLayout buffer, bound
`bufN = argM_1` in the wrapper), never copied back, and the memory plan never hands an
input's memory to another buffer.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton decorates anything

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import check, requires_miniinductor  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.compile_fx import collect_compiled  # noqa: E402

pytestmark = requires_miniinductor
BACKENDS = {"cpp": {}, "triton": {"cpu_backend": "triton"}}


def compiled_graphs(fn, *args, backend="cpp"):
    """check(fn, *args) on `backend`; returns the graphs it compiled."""
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        check(fn, *args, compiled=miniinductor.compile(fn, **BACKENDS[backend]))
    for cg in graphs:
        assert "copy_(" not in cg.wrapper_source and "aten.copy" not in cg.wrapper_source, cg.wrapper_source
        inputs = set(cg.graph.graph_inputs)
        assert not (set(cg.plan.reuse.values()) & (inputs | set(cg.scheduler.mutations))), cg.plan
        assert not any(n in cg.scheduler.mutations for freed in cg.plan.frees.values() for n in freed
                       if n not in cg.graph.output_names()), cg.plan
    return graphs


def mutated(graphs) -> dict[str, str]:
    """buffer → input it is computed into, over all graphs."""
    return {b: i for cg in graphs for b, i in cg.scheduler.mutations.items()}


def randn(*size):
    return torch.randn(*size)


def add_(x):
    x.add_(1)
    return x.sum()


def add_and_return(x):
    x.add_(1)
    return x


def strided_mul_(x):
    x[::2].mul_(2)


def copy_from(x, y):
    x.copy_(y)
    return x + 1


def mutated_twice(x):
    x.add_(1)
    x.mul_(x)
    return x.sum()


def transposed_reader(x):
    """The old x read at the transposed element: that reader cannot share the kernel that
    overwrites x."""
    y = x.t() + 1
    x.mul_(2)
    return y


def swap(a, b):
    """Each new value reads the other input's old one."""
    t = a.clone()
    a.copy_(b)
    b.copy_(t)


def flip_into_itself(x):
    x.copy_(x.flip(0))


def transpose_into_itself(x):
    """x's new element (i, j) is twice its old (j, i): stored apart first, then into x."""
    x.copy_(x.t() * 2)


def matmul_into_input(x, w):
    """An ATen fallback (mm) reads x, which is then overwritten."""
    x.copy_(x @ w)
    return x.sum(0)


def cast_broadcast(x, y):
    x.copy_(y)   # float64 [4] into float32 [3, 4]


CASES = {
    "add_": (add_, lambda: (randn(8, 5),)),
    "add_and_return": (add_and_return, lambda: (randn(6),)),
    "strided_mul_": (strided_mul_, lambda: (randn(9),)),
    "copy_": (copy_from, lambda: (randn(7), randn(7))),
    "mutated_twice": (mutated_twice, lambda: (randn(5, 3),)),
    "transposed_reader": (transposed_reader, lambda: (randn(5, 5),)),
    "swap": (swap, lambda: (randn(5), randn(5))),
    "flip_into_itself": (flip_into_itself, lambda: (randn(6),)),
    "transpose_into_itself": (transpose_into_itself, lambda: (randn(5, 5),)),
    "matmul_into_input": (matmul_into_input, lambda: (randn(5, 5), randn(5, 5))),
    "cast_broadcast": (cast_broadcast, lambda: (randn(3, 4), torch.randn(4, dtype=torch.float64))),
    # inputs whose memory is not contiguous: the store goes through their strides
    "non_contiguous_transposed": (add_, lambda: (randn(5, 8).t(),)),
    "non_contiguous_view": (add_and_return, lambda: (randn(6, 10)[1:, ::3],)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_user_mutation(case, backend):
    fn, make_args = CASES[case]
    torch.manual_seed(0)
    graphs = compiled_graphs(fn, *make_args(), backend=backend)
    n_inputs_mutated = len({i for i in mutated(graphs).values()})
    assert n_inputs_mutated == (2 if case == "swap" else 1), mutated(graphs)


def test_readers_first_and_explained():
    """transposed_reader: the kernel storing into x comes after the one reading x's old
    value at transposed elements, and the fusion decision says why they stay apart;
    explain shows which kernel writes into the input."""
    torch._dynamo.reset()
    result = miniinductor.explain(transposed_reader, randn(5, 5))
    (cg,) = result.graphs
    ((buf, arg),) = cg.scheduler.mutations.items()
    writer = next(k for k in cg.kernels.values() if buf in k.buffers)
    assert f"{buf} -> {arg} (in place)" in str(result), str(result)
    assert any(not d.fused and "overwrites in place" in d.reason for d in result.decisions), \
        [str(d) for d in result.decisions]
    order = list(cg.kernels.values())
    reader = next(k for k in order if arg in k.args and k is not writer)
    assert order.index(reader) < order.index(writer)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batchnorm_train_running_stats(backend):
    """BatchNorm in training: AOTAutograd's forward graph updates the running statistics
    (and num_batches_tracked) in place; three steps of SGD give eager's outputs, gradients,
    parameters and statistics."""
    torch.manual_seed(0)
    make = lambda: torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())  # noqa: E731
    model_e = make()
    model_c = make()
    model_c.load_state_dict(model_e.state_dict())
    opt_e, opt_c = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model_e, model_c))
    torch._dynamo.reset()
    compiled = miniinductor.compile(model_c, **BACKENDS[backend])
    with collect_compiled() as graphs:
        for _ in range(3):
            x = torch.randn(16, 6)
            outs = []
            for run, opt in ((model_e, opt_e), (compiled, opt_c)):
                opt.zero_grad()
                out = run(x)
                (out * torch.linspace(-1, 1, 8)).sum().backward()
                opt.step()
                outs.append(out.detach())
            torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
            for (name, a), b in zip(model_e.state_dict().items(), model_c.state_dict().values()):
                torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}")
            for (name, a), b in zip(model_e.named_parameters(), model_c.parameters()):
                torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}.grad: {m}")
    forward = next(cg for cg in graphs if cg.graph.name == "forward")
    assert len(forward.scheduler.mutations) == 3, forward.scheduler.mutations   # mean, var, count


def test_copy_into_an_input_our_kernels_do_not_take():
    """A complex input's copy_ stays an ATen call (no kernel stores complex numbers); the
    scheduler still runs the readers of the old value before it."""
    def fn(x, y):
        z = x * 2
        x.add_(y)
        return z, x.abs()
    torch._dynamo.reset()
    x, y = (torch.randn(6, dtype=torch.complex64) for _ in range(2))
    with collect_compiled() as graphs:
        check(fn, x, y, compiled=miniinductor.compile(fn))
    (cg,) = graphs
    (copy,) = [n for n in cg.scheduler.nodes if "copy_" in str(getattr(n.node, "op", ""))]
    assert cg.scheduler.overwritten == {"arg0_1": [copy.get_name()]}
    readers = [g for g in cg.scheduler.schedule if "arg0_1" in g.read_names() and g is not copy]
    assert readers and all(cg.scheduler.schedule.index(g) < cg.scheduler.schedule.index(copy) for g in readers)
