"""The IR on its own: index simplification and printing, the IR interpreter (which checks
lowering apart from codegen), and the errors users see for bad set-ups."""
import ctypes

import pytest
import torch
import torch.nn.functional as F

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.config import Config
from miniinductor.ir.indexing import FloorDiv, ModularIndexing, cexpr, evaluate, index_vars, simplify_with_ranges
from miniinductor.ir.interpreter import graph_outputs, run_graph
from miniinductor.runtime import cpp_builder

i0, i1 = index_vars("i", [0, 0])


@pytest.mark.parametrize("expr, ranges, expected", [
    (FloorDiv(64 * i0 + i1, 64), {i0: 8, i1: 64}, i0),
    (ModularIndexing(64 * i0 + i1, 1, 64), {i0: 8, i1: 64}, i1),
    (i1 + 8192 * FloorDiv(128 * i0 + i1, 8192) + 128 * ModularIndexing(128 * i0 + i1, 128, 64),
     {i0: 128, i1: 128}, 128 * i0 + i1),
    (6 * FloorDiv(3 * i0 + i1, 6) + ModularIndexing(3 * i0 + i1, 1, 6), {i0: 8, i1: 3}, 3 * i0 + i1),
])
def test_simplify_with_ranges(expr, ranges, expected):
    simplified = simplify_with_ranges(expr, ranges)
    assert simplified == expected
    for a in range(ranges[i0]):      # and the value is the same at every point of the range
        for b in range(ranges[i1]):
            assert evaluate(simplified, {i0: a, i1: b}) == evaluate(expr, {i0: a, i1: b})


def test_unsimplifiable_index_prints_with_parentheses():
    expr = ModularIndexing(3 * i0 + i1, 1, 5)
    text = cexpr(expr)
    assert text.replace(" ", "") == "((3*i0+i1)%5)"
    assert eval(text.replace("/", "//"), {"i0": 2, "i1": 1}) == (3 * 2 + 1) % 5


def test_reshape_of_transposed_input_reads_the_right_elements():
    f = lambda x: x.reshape(8, 3) + 1  # noqa: E731
    x = torch.randn(6, 4).t()
    torch.testing.assert_close(miniinductor.compile(f)(x), f(x))


GRAPHS = {
    "softmax": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(5, 7),)),
    "layer_norm": (lambda x, w: F.layer_norm(x, (7,), w), lambda: (torch.randn(5, 7), torch.randn(7))),
    "views": (lambda x: x.t()[1:, ::2].reshape(-1) * 2, lambda: (torch.randn(4, 6),)),
    "cat_pad": (lambda x, y: F.pad(torch.cat([x, y], 1), (1, 2), value=-1.0), lambda: (torch.randn(3, 2), torch.randn(3, 4))),
    "gather": (lambda x, i: torch.gather(x, 1, i) + x.sum(1, keepdim=True),
               lambda: (torch.randn(4, 6), torch.randint(0, 6, (4, 3)))),
    "argmax_mm": (lambda x, w: (x @ w).argmax(-1), lambda: (torch.randn(4, 6), torch.randn(6, 5))),
    # window reads at clamped positions (ClampIndex) and the index from the best value
    "max_pool_padded": (lambda x: torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1]),
                        lambda: (torch.randint(-2, 3, (2, 3, 7, 6)).float(),)),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_interpreter_matches_eager(name):
    """Every buffer evaluated from the IR alone (no C++) gives eager's outputs."""
    fn, make_inputs = GRAPHS[name]
    inputs = make_inputs()
    torch._dynamo.reset()
    with collect_compiled() as graphs:
        miniinductor.compile(fn)(*inputs)
    (compiled,) = graphs
    graph = compiled.graph
    # the graph's placeholders follow Dynamo's order: map them back by value
    example = {n: t for n, t in zip(graph.graph_input_names, compiled.graph.example_inputs)}
    ordered = [next(x for x in inputs if tuple(x.shape) == tuple(example[n].shape) and x.dtype == example[n].dtype)
               for n in graph.graph_input_names]
    outputs = graph_outputs(graph, run_graph(graph, ordered))
    expected = fn(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want)


def test_unknown_option_lists_close_matches():
    with pytest.raises(ValueError, match="did you mean fusion"):
        miniinductor.compile(lambda x: x, fusoin=False)


def test_missing_compiler_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIINDUCTOR_CACHE_DIR", str(tmp_path))
    cpp_builder.compiler_version.cache_clear()
    with pytest.raises(cpp_builder.CppCompileError, match="apt-get install g\\+\\+"):
        cpp_builder.build('extern "C" void k() {}', cxx="no-such-compiler-xyz")


def test_kernel_cache_is_reused_and_written_atomically(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIINDUCTOR_CACHE_DIR", str(tmp_path))
    source = 'extern "C" void k(float* out) { out[0] = 42; }'
    first = cpp_builder.build(source)
    assert first.exists() and first.parent.parent == tmp_path
    assert cpp_builder.build(source) == first            # same source: same file, no rebuild
    leftovers = [p for p in tmp_path.rglob("*") if p.is_dir() and p.parent != tmp_path]
    assert not leftovers, f"temporary build folders left behind: {leftovers}"
    out = torch.zeros(1)
    cpp_builder.load_kernels(source, ["k"])["k"](ctypes.c_void_p(out.data_ptr()))
    assert out.item() == 42


def test_a_prelude_that_cannot_be_precompiled_is_tried_once(monkeypatch, tmp_path):
    """A compiler that refuses to precompile the prelude still builds (from the header's text),
    and is asked to precompile once per process, not once per graph."""
    monkeypatch.setenv("MINIINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    log = tmp_path / "calls.log"
    cxx = tmp_path / "no-pch-g++"
    cxx.write_text(f'#!/bin/sh\necho "$@" >> {log}\n'
                   'case "$*" in *c++-header*) exit 1;; esac\nexec g++ "$@"\n')
    cxx.chmod(0o755)
    cpp_builder.compiler_version.cache_clear()
    outs = []
    for value in (41, 42, 43):        # three graphs, three builds
        source = f'extern "C" void k(float* out) {{ out[0] = {value}; }}'
        out = torch.full((1,), float("nan"))
        cpp_builder.load_kernels(source, ["k"], cxx=str(cxx))["k"](ctypes.c_void_p(out.data_ptr()))
        outs.append(out.item())
    assert outs == [41, 42, 43]
    calls = log.read_text().splitlines()
    assert sum("c++-header" in c for c in calls) == 1, calls
    assert sum("-include" in c for c in calls) == 3, calls


def test_fallback_all_runs_everything_in_aten():
    miniinductor.metrics.reset()
    torch._dynamo.reset()
    f = lambda x: torch.softmax(x * 2, -1)  # noqa: E731
    x = torch.randn(4, 5)
    torch.testing.assert_close(miniinductor.compile(f, fallback_all=True)(x), f(x))
    assert miniinductor.metrics.generated_kernel_count == 0
    assert miniinductor.metrics.fallback_count > 0
    assert Config.from_options({"fallback_all": True}).fallback_all


def test_fallback_ops_runs_only_those_in_aten():
    miniinductor.metrics.reset()
    torch._dynamo.reset()
    f = lambda x: torch.exp(x * 2) + 1  # noqa: E731
    x = torch.randn(4, 5)
    torch.testing.assert_close(miniinductor.compile(f, fallback_ops=["aten.mul.Tensor"])(x), f(x))
    assert dict(miniinductor.metrics.fallback_ops) == {"aten.mul.Tensor": 1}
    assert miniinductor.metrics.generated_kernel_count == 1   # exp and add still lowered
    assert Config.from_options({"fallback_ops": "aten.mul.Tensor"}).fallback_ops == ("aten.mul.Tensor",)


def test_prelude_is_precompiled_once_and_used(monkeypatch, tmp_path):
    """The prelude (cpp_prelude.h) is precompiled into a .gch once per flags and compiler;
    kernels compiled against it call its functions (mi_expf) and get the same results."""
    monkeypatch.setenv("MINIINDUCTOR_CACHE_DIR", str(tmp_path))
    source = 'extern "C" void k(const float* x, float* out) { for (int i = 0; i < 64; i++) out[i] = mi_expf(x[i]); }'
    cpp_builder.build(source)
    (pch,) = tmp_path.glob("prelude-*/mi_prelude.h.gch")
    built = pch.stat().st_mtime_ns
    cpp_builder.build(source.replace("64", "63"))          # a second library: the same .gch, not rebuilt
    assert pch.stat().st_mtime_ns == built
    x, out = torch.randn(64) * 10, torch.full((64,), float("nan"))
    cpp_builder.load_kernels(source, ["k"])["k"](ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()))
    torch.testing.assert_close(out, torch.exp(x), rtol=2e-7, atol=0)
