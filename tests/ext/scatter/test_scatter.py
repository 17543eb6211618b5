"""ext/scatter: index_put, scatter_add, scatter, scatter_reduce("sum"), index_add and embedding's
backward as a copy + a scatter kernel (atomic read-modify-write stores), against eager.

Every case runs on both backends (C++, and Triton through its interpreter), with fresh random
non-zero inputs, duplicate indices wherever the op accumulates (so that an add that is lost
or done twice shows), and the compiled wrappers' buffers poisoned with NaN (an element the
copy or the scatter fails to write shows). Each also checks that the op became our kernels:
a ScatterBuffer in the graph, no ATen call of it in the wrapper.

Tolerances: the C++ scatter is a serial loop that adds in eager's order (ATen's CPU
index_put/scatter_add loops serially too), so its results are compared exactly (rtol=atol=0).
Triton's atomic adds may land in any order: each destination sums a handful of O(1) float32
values, whose reordered sums differ by a few ulps: rtol=atol=1e-5.
"""
from __future__ import annotations

import contextlib
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton decorates anything

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import extension_on  # noqa: E402

import miniinductor  # noqa: E402
from miniinductor.compile_fx import collect_compiled  # noqa: E402
from miniinductor.ext.scatter.ir import ScatterBuffer  # noqa: E402

pytestmark = [pytest.mark.skipif(not extension_on("scatter"), reason="the scatter extension is off"),
              pytest.mark.usefixtures("poisoned_buffers")]
aten = torch.ops.aten   # (its index_put takes None for a dim without an index tensor: x[:, i])
BACKENDS = {"cpp": {}, "triton": {"cpu_backend": "triton"}}
TOL = {"cpp": dict(rtol=0, atol=0), "triton": dict(rtol=1e-5, atol=1e-5)}


def nonzero(*size, dtype=torch.float32):
    """Random values away from zero (a lost add of a value near 0 would hide)."""
    x = torch.rand(*size) + 0.5
    return (x * torch.where(torch.rand(*size) < 0.5, -1.0, 1.0)).to(dtype)


def scatters(graphs) -> list[ScatterBuffer]:
    return [b for cg in graphs for b in cg.graph.buffers if isinstance(b, ScatterBuffer)]


def compile_and_compare(fn, args, backend, expect_scatter=True, **options):
    """fn compiled on `backend` vs eager on clones of `args`; returns the compiled graphs."""
    torch._dynamo.reset()
    expected = fn(*[a.clone() for a in args])
    with collect_compiled() as graphs:
        got = miniinductor.compile(fn, **BACKENDS[backend], **options)(*[a.clone() for a in args])
    torch.testing.assert_close(got, expected, **TOL[backend])
    found = scatters(graphs)
    source = "\n".join(cg.wrapper_source for cg in graphs)
    if expect_scatter:
        assert found, source
        assert not any(op in source for op in ("aten.index_put", "aten.scatter", "aten.index_add")), source
    else:
        assert not found and "aten.index_put" in source, source
    return graphs


def dups(n, high):
    """n indices in [-high, high) with every destination hit at least twice (some negative)."""
    base = torch.arange(n) % max(n // 2, 1) % high
    return torch.where(torch.rand(n) < 0.3, base - high, base)[torch.randperm(n)]


CASES = {
    "index_put_acc": (lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True) * 2,
                      lambda: (nonzero(7, 5), dups(12, 7), nonzero(12, 5))),
    "index_put_acc_broadcast_values": (lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                                       lambda: (nonzero(6, 4), dups(10, 6), nonzero(4))),
    # two index tensors broadcast ([3, 1] with [4]), adjacent dims (the result's middle) ...
    "index_put_acc_2d_adjacent": (lambda x, i, j, v: aten.index_put(x, [None, i, j], v, True),
                                  lambda: (nonzero(2, 5, 6), torch.randint(-5, 5, (3, 1)),
                                           torch.randint(-6, 6, (4,)), nonzero(2, 3, 4))),
    # ... and separated by a plain dim (the indexed dims' values go in front)
    "index_put_acc_2d_apart": (lambda x, i, j, v: aten.index_put(x, [i, None, j], v, True),
                               lambda: (nonzero(5, 3, 6), torch.randint(-5, 5, (3, 1)),
                                        torch.randint(0, 6, (4,)), nonzero(3, 4, 3))),
    "index_put_unique": (lambda x, i, v: torch.index_put(x, (i,), v) + 1,
                         lambda: (nonzero(9, 3), torch.randperm(9)[:6] - 4, nonzero(6, 3))),
    "index_add": (lambda x, i, s: x.index_add(1, i, s, alpha=-0.5),
                  lambda: (nonzero(3, 6), dups(10, 6) % 6, nonzero(3, 10))),   # (eager's index_add takes no negative index)
    "scatter_add": (lambda x, i, s: torch.scatter_add(x, 1, i, s),
                    lambda: (nonzero(4, 5), torch.randint(0, 5, (4, 9)), nonzero(4, 11))),
    "scatter_reduce_sum": (lambda x, i, s: x.scatter_reduce(0, i, s, "sum"),
                           lambda: (nonzero(5, 3), torch.randint(0, 5, (8, 3)), nonzero(8, 3))),
    "scatter_src": (lambda x, i, s: torch.scatter(x, 1, i, s),
                    lambda: (nonzero(3, 7), torch.stack([torch.randperm(7)[:4] for _ in range(3)]), nonzero(3, 4))),
    "scatter_value": (lambda x, i: torch.scatter(x, 0, i, -2.5),
                      lambda: (nonzero(6, 4), torch.stack([torch.randperm(6)[:3] for _ in range(4)], 1))),
    "index_put_acc_float64": (lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                              lambda: (nonzero(5, 3, dtype=torch.float64), dups(9, 5), nonzero(9, 3, dtype=torch.float64))),
    "scatter_add_int32": (lambda x, i, s: torch.scatter_add(x, 0, i, s),
                          lambda: (torch.randint(1, 50, (4, 3), dtype=torch.int32), torch.randint(0, 4, (7, 3)),
                                   torch.randint(1, 50, (7, 3), dtype=torch.int32))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_scatter_ops(case, backend):
    torch.manual_seed(hash(case) % 1000)
    fn, make = CASES[case]
    compile_and_compare(fn, make(), backend)


def test_float16_cpp_rounds_each_add_as_eager():
    """C++ adds float16 in float32 and rounds after each add, as ATen's serial loop: exact."""
    torch.manual_seed(1)
    compile_and_compare(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                        (nonzero(5, 4, dtype=torch.float16), dups(11, 5), nonzero(11, 4, dtype=torch.float16)), "cpp")


def test_float16_triton_on_cpu_declines():
    """Triton's float16 atomic add needs sm90: under the interpreter (a CPU graph) ATen runs it."""
    torch.manual_seed(2)
    compile_and_compare(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                        (nonzero(5, 4, dtype=torch.float16), dups(11, 5), nonzero(11, 4, dtype=torch.float16)),
                        "triton", expect_scatter=False)


@contextlib.contextmanager
def deterministic():
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_mode(backend):
    """Deterministic algorithms: Triton's atomic adds decline (ATen's index_put runs); the
    serial C++ loop is deterministic and stays our kernel."""
    torch.manual_seed(3)
    args = (nonzero(6, 3), dups(10, 6), nonzero(10, 3))
    with deterministic():
        compile_and_compare(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), args, backend,
                            expect_scatter=backend == "cpp")


def test_extension_off_runs_aten():
    torch.manual_seed(4)
    compile_and_compare(lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
                        (nonzero(6, 3), dups(10, 6), nonzero(10, 3)), "cpp", expect_scatter=False,
                        extensions=["cpu_fast"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_runs_alone_between_copy_and_readers(backend):
    """The copy, the scatter and a reader of the result share loop shapes (a scatter_add whose
    index has self's shape), yet stay three kernels in that order: the fusion rule says why."""
    torch.manual_seed(5)
    fn = lambda x, i, s: torch.scatter_add(x * 3, 0, i, s) * 2  # noqa: E731
    graphs = compile_and_compare(fn, (nonzero(4, 5), torch.randint(0, 4, (4, 5)), nonzero(4, 5)), backend)
    (cg,) = graphs
    (scatter,) = scatters(graphs)
    names = [k.buffers for k in cg.kernels.values()]
    at = next(k for k, bufs in enumerate(names) if scatter.get_name() in bufs)
    assert names[at] == [scatter.get_name()], names
    assert any(scatter.target in bufs for bufs in names[:at]), names
    assert any(d.reason.startswith(f"{scatter.get_name()} is a scatter") for d in cg.scheduler.decisions), \
        [str(d) for d in cg.scheduler.decisions]


def train_step(model, x, grad_out):
    model.zero_grad()
    out = model(x)
    out.backward(grad_out)
    return out.detach(), [p.grad.clone() for p in model.parameters()]


class TokenEmbeddingLayerNorm(torch.nn.Module):
    def __init__(self, vocab, dim, padding_idx=None):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim, padding_idx=padding_idx)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, tokens):
        return self.norm(self.emb(tokens))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model", ["embedding", "embedding_layernorm"])
def test_embedding_training(model, backend):
    """nn.Embedding (+ LayerNorm), forward and backward: the weight's gradient is our scatter
    kernel (embedding_dense_backward → index_put(accumulate=True)), equal to eager's. Tokens
    repeat (a batch of 4x12 over a vocabulary of 10, one of them the padding index)."""
    torch.manual_seed(6)
    make = (lambda: torch.nn.Embedding(10, 8, padding_idx=3)) if model == "embedding" \
        else (lambda: TokenEmbeddingLayerNorm(10, 8, padding_idx=3))
    eager = make()
    with torch.no_grad():   # non-zero affine parameters
        for p in eager.parameters():
            p.copy_(nonzero(*p.shape))
    ours = make()
    ours.load_state_dict(eager.state_dict())
    tokens = torch.randint(0, 10, (4, 12))
    grad_out = nonzero(4, 12, 8)
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        got = train_step(miniinductor.compile(ours, **BACKENDS[backend]), tokens, grad_out)
    expected = train_step(eager, tokens, grad_out)
    # LayerNorm's backward sums a row of 8 in another order than eager's: float32 ulps
    tol = TOL[backend] if model == "embedding" else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, expected, **tol)
    assert any(cg.graph.name == "backward" for cg in graphs if scatters([cg])), [cg.graph.name for cg in graphs]
