"""cpp_wrapper=True (ext/cpp_wrapper/codegen.py): `call` generated in C++ and compiled with the
C++ kernels. Every case is compared with eager (outputs, and gradients where it trains), and
every graph it compiled must really have a C++ wrapper (no silent fall back to Python);
what the C++ wrapper cannot do falls back with one log line, still correct.

Tolerances: the conftest defaults (float32 1.3e-6 relative, 1e-5 absolute) -- the wrapper
changes no arithmetic, the kernels and ATen calls are the ones the Python wrapper makes; the
GPT-2 block uses test_training.py's 1e-4 (chains of reductions in another order).
"""
from __future__ import annotations

import copy
import logging
import re

import pytest
import torch
from conftest import TEST_OPTIONS, check, compile_fn, input_gradients, randn, skip_unless_extension

import miniinductor
from miniinductor.compile_fx import collect_compiled
from miniinductor.tools.models import MLP, GPT2Block

pytestmark = [pytest.mark.skipif(TEST_OPTIONS.get("cpu_backend", "cpp") != "cpp",
                                 reason="the C++ wrapper calls C++ kernels"), skip_unless_extension("cpp_wrapper")]

C_ENTRY = 'extern "C" PyObject* call(PyObject* handles)'


def assert_cpp_wrappers(graphs, expected: int | None = None):
    assert graphs and (expected is None or len(graphs) == expected), len(graphs)
    for cg in graphs:
        assert C_ENTRY in cg.wrapper_source, f"{cg.graph.name} got the Python wrapper"
        assert "torch.ops." not in cg.wrapper_source.split("def call(args):")[1]   # ATen calls are in C++


def pointwise(x, y):
    return torch.relu(x * y + 1).sin()


def reductions(x):
    return x.sum(1), x.amax(0), torch.softmax(x, -1)


def matmul_views(x, w):                  # mm of a strided view with an offset, views returned
    return x[1:].t() @ w, x.t(), x[:, 2:]


def topk_and_cat(x):                     # an extern op that returns a tuple (MultiOutputs)
    values, indices = torch.topk(x, 3, dim=1)
    return values * 2, indices, torch.cat([x, x.cos()], 1)


def conv_relu(x, w, b):                  # aten.convolution: int lists through the shim
    return torch.relu(torch.nn.functional.conv2d(x, w, b, stride=2, padding=1))


CASES = {
    "pointwise": (pointwise, lambda: (randn(8, 33), randn(8, 33))),
    "reductions": (reductions, lambda: (randn(16, 40),)),
    "matmul_views": (matmul_views, lambda: (randn(9, 6), randn(8, 5))),
    "topk_and_cat": (topk_and_cat, lambda: (randn(6, 10),)),
    "conv_relu": (conv_relu, lambda: (randn(2, 3, 9, 9), randn(4, 3, 3, 3), randn(4))),
}


@pytest.mark.parametrize("name", CASES)
def test_outputs_match_eager(name):
    fn, make = CASES[name]
    with collect_compiled() as graphs:
        check(fn, *make(), compiled=compile_fn(fn, cpp_wrapper=True))
    assert_cpp_wrappers(graphs, 1)


@pytest.mark.parametrize("name", ["pointwise", "reductions", "matmul_views"])
def test_gradients_match_eager(name):
    fn, make = CASES[name]
    args = [a.requires_grad_() for a in make()]
    eager_args = [a.detach().clone().requires_grad_() for a in args]
    with collect_compiled() as graphs:
        actual = compile_fn(fn, cpp_wrapper=True)(*args)
        _, grads = input_gradients(actual, args)     # the backward graph runs here
    expected = fn(*eager_args)
    torch.testing.assert_close(actual, expected)
    _, expected_grads = input_gradients(expected, eager_args)
    torch.testing.assert_close(grads, expected_grads)
    assert_cpp_wrappers(graphs, 2)                   # forward and backward


def training_step(module, x, rtol=1.3e-6, atol=1e-5):
    """Forward + backward of `module` compiled with cpp_wrapper vs eager: outputs, the
    input's and every parameter's gradient. Returns the graphs it compiled."""
    reference = copy.deepcopy(module)
    x_c, x_e = x.clone().requires_grad_(), x.clone().requires_grad_()
    with collect_compiled() as graphs:
        out = compile_fn(module, cpp_wrapper=True)(x_c)
        grad_out = torch.randn_like(out)
        out.backward(grad_out)
    ref = reference(x_e)
    ref.backward(grad_out)
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    torch.testing.assert_close(x_c.grad, x_e.grad, rtol=rtol, atol=atol)
    for (name, p), q in zip(module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=rtol, atol=atol, msg=name)
    return graphs


def test_mlp_training_step():
    torch.manual_seed(0)
    assert_cpp_wrappers(training_step(MLP([32, 64, 64, 10]), randn(5, 32)), 2)


def test_gpt2_block_training_step():
    torch.manual_seed(0)
    graphs = training_step(GPT2Block(d_model=32, n_head=2, max_seq=16), randn(2, 16, 32), rtol=1e-4, atol=1e-4)
    assert_cpp_wrappers(graphs, 2)


def test_six_layer_mlp_inference_and_freezing():
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model, x = torch.nn.Sequential(*layers).eval(), randn(1, 64)
    for freezing in (False, True):     # frozen: the weights are constants the wrapper passes in
        torch._dynamo.reset()
        with torch.no_grad(), collect_compiled() as graphs:
            out = miniinductor.compile(model, cpp_wrapper=True, freezing=freezing)(x)
            torch.testing.assert_close(out, model(x))
        assert_cpp_wrappers(graphs, 1)


def test_the_trace_and_explain_show_the_cpp_wrapper(tmp_path):
    fn, make = CASES["matmul_views"]
    with collect_compiled() as graphs:
        compile_fn(fn, cpp_wrapper=True, trace=str(tmp_path))(*make())
    traced = list(tmp_path.rglob("output_code.py"))
    assert traced and C_ENTRY in traced[0].read_text()
    assert "aoti_torch_cpu_mm_out" in traced[0].read_text()
    assert C_ENTRY in graphs[0].wrapper_source


@pytest.mark.parametrize("why, options", [
    ("Triton kernels", {"cpu_backend": "triton"}),
    ("symbolic sizes", {"dynamic": True}),
])
def test_unsupported_graphs_fall_back_with_one_line(why, options, caplog):
    if options.get("cpu_backend") == "triton":
        pytest.importorskip("triton")
    x, y = randn(8, 33), randn(8, 33)
    with caplog.at_level(logging.INFO, logger="miniinductor"), collect_compiled() as graphs:
        out = miniinductor.compile(pointwise, cpp_wrapper=True, **options)(x, y)
    torch.testing.assert_close(out, pointwise(x, y))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cpp_wrapper:")]
    assert len(lines) == len(graphs) == 1 and why in lines[0], lines
    assert C_ENTRY not in graphs[0].wrapper_source


def test_extern_without_a_c_shim_falls_back(caplog):
    def fn(x):        # linalg_inv_ex has no aoti_torch_cpu_ function
        return torch.linalg.inv(x) + 1
    x = randn(4, 4) + 4 * torch.eye(4)
    with caplog.at_level(logging.INFO, logger="miniinductor"), collect_compiled() as graphs:
        out = compile_fn(fn, cpp_wrapper=True)(x)
    torch.testing.assert_close(out, fn(x))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cpp_wrapper:")]
    assert len(lines) == len(graphs) == 1 and "aten.linalg_inv_ex.default has no C shim function" in lines[0]
    assert C_ENTRY not in graphs[0].wrapper_source


def test_schema_arguments_reach_the_shim():
    def fn(x):        # sort.stable: an optional bool and kwargs; cumsum: an optional dtype
        values, indices = torch.sort(x, dim=0, descending=True, stable=True)
        return values.cumsum(1), indices
    with collect_compiled() as graphs:
        check(fn, randn(7, 5), compiled=compile_fn(fn, cpp_wrapper=True))
    assert_cpp_wrappers(graphs, 1)
    assert "aoti_torch_cpu_sort_stable(" in graphs[0].wrapper_source


def test_the_report_shows_the_cpp_call(tmp_path):
    fn, make = CASES["pointwise"]
    result = miniinductor.explain(fn, *make(), cpp_wrapper=True)
    html = result.write_report(tmp_path / "report.html").read_text()
    visible = re.sub(r"<details>.*?</details>", "", html, flags=re.S)   # folded: the kernels only
    assert re.search(r"extern (&quot;|&#x27;|\")C(&quot;|&#x27;|\") PyObject\* call", visible)


def test_debug_accuracy_under_cpp_wrapper():
    # it records every buffer through a Python wrapper of the same plan; the run it judges
    # is the C++ one
    fn, make = CASES["reductions"]
    report = miniinductor.debug_accuracy(fn, *make(), backward=False, cpp_wrapper=True)
    assert report.outputs_agree and report.culprit is None and report.checks
    assert all(C_ENTRY in cg.wrapper_source for cg in report.graphs)


# ---------------------------------------------------------------------------------- the GPU
# A GPU graph's C++ `call` launches its Triton kernels through the CUDA driver (cuLaunchKernel,
# ext/cpp_wrapper/cuda.h) and calls ATen through the shim's aoti_torch_cuda_ functions.
# Same tolerances as above: the kernels are the Python wrapper's, only the launching differs.
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
GPU_ENTRY = 'extern "C" PyObject* call(PyObject* handles, PyObject* args)'


def assert_gpu_cpp_wrappers(graphs, expected: int):
    """Each graph got the C++ wrapper, every Triton kernel is launched from C++, and the
    kernels were bound into its launch table (no fallback to the Python wrapper)."""
    assert len(graphs) == expected, len(graphs)
    for cg in graphs:
        assert GPU_ENTRY in cg.wrapper_source, f"{cg.graph.name} got the Python wrapper"
        for name in cg.kernels:
            assert f'"{name}", stream, {{' in cg.wrapper_source, name
        assert cg.call.__globals__["_bound"] == [None], cg.call.__globals__["_bound"]


def only_cpp(cg):
    """From now on the Python wrapper of `cg` raises: a later call must be the C++ one."""
    def refuse(args):
        raise AssertionError("the Python wrapper ran")
    cg.call.__globals__["_python_call"] = refuse


def cuda_args(make):
    return [a.cuda() for a in make()]


@needs_gpu
@pytest.mark.parametrize("name", CASES)
def test_gpu_outputs_match_eager(name):
    fn, make = CASES[name]
    compiled = compile_fn(fn, cpp_wrapper=True)
    with collect_compiled() as graphs:
        check(fn, *cuda_args(make), compiled=compiled)
    assert_gpu_cpp_wrappers(graphs, 1)
    only_cpp(graphs[0])
    check(fn, *cuda_args(make), compiled=compiled)   # fresh inputs, the C++ call alone


@needs_gpu
def test_gpu_training_step():
    torch.manual_seed(0)
    assert_gpu_cpp_wrappers(training_step(MLP([32, 64, 64, 10]).cuda(), randn(5, 32).cuda()), 2)


@needs_gpu
def test_gpu_misaligned_input_runs_the_python_wrapper():
    # Triton compiled the kernels for 16-byte aligned pointers: an input 4 bytes into its
    # storage must not reach them; `call` hands that call to the Python wrapper, whose
    # launcher compiles a variant for it
    fn, _ = CASES["pointwise"]
    compiled = compile_fn(fn, cpp_wrapper=True)
    x, y = randn(8, 33).cuda(), randn(8, 33).cuda()
    with collect_compiled() as graphs:
        check(fn, x, y, compiled=compiled)
    assert_gpu_cpp_wrappers(graphs, 1)
    base = randn(8 * 33 + 1).cuda()
    x_off = base[1:].view(8, 33)                # data_ptr % 16 == 4
    assert x_off.data_ptr() % 16 == 4
    python_calls = []
    real = graphs[0].call.__globals__["_python_call"]
    graphs[0].call.__globals__["_python_call"] = lambda args: (python_calls.append(1), real(args))[1]
    torch.testing.assert_close(compiled(x_off, y), fn(x_off, y))
    assert python_calls == [1]
    torch.testing.assert_close(compiled(x, y), fn(x, y))   # aligned again: C++
    assert python_calls == [1]


@needs_gpu
def test_gpu_six_layer_mlp_inference():
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model, x = torch.nn.Sequential(*layers).cuda().eval(), randn(1, 256).cuda()
    torch._dynamo.reset()
    with torch.no_grad(), collect_compiled() as graphs:
        compiled = miniinductor.compile(model, cpp_wrapper=True)
        torch.testing.assert_close(compiled(x), model(x))
    assert_gpu_cpp_wrappers(graphs, 1)
    assert "aoti_torch_cuda_" in graphs[0].wrapper_source
    only_cpp(graphs[0])
    with torch.no_grad():
        x2 = randn(1, 256).cuda()
        torch.testing.assert_close(compiled(x2), model(x2))


@needs_gpu
def test_gpu_call_from_a_new_thread():
    # a thread that has not touched the GPU has no current CUDA context (autograd's backward
    # thread is one): the C++ call makes the kernels' context current before launching
    import threading
    fn, make = CASES["reductions"]
    compiled = compile_fn(fn, cpp_wrapper=True)
    with collect_compiled() as graphs:
        check(fn, *cuda_args(make), compiled=compiled)
    assert_gpu_cpp_wrappers(graphs, 1)
    only_cpp(graphs[0])
    args, results = cuda_args(make), []
    thread = threading.Thread(target=lambda: results.append(compiled(*args)))
    thread.start()
    thread.join()
    assert len(results) == 1, "the call in the thread raised"
    torch.testing.assert_close(results[0], fn(*args))


@needs_gpu
def test_gpu_cpp_wrapper_recorded_in_a_cuda_graph():
    # cudagraphs=True records the C++ call: its launches go to the current (capture) stream
    fn, make = CASES["reductions"]
    with collect_compiled() as graphs:
        compiled = miniinductor.compile(fn, cpp_wrapper=True, cudagraphs=True)
        for _ in range(3):   # warm-up and record, then replays
            args = cuda_args(make)
            torch.testing.assert_close(compiled(*args), fn(*args))
    assert_gpu_cpp_wrappers(graphs, 1)


def test_gpu_wrapper_source_builds_without_a_gpu(monkeypatch):
    """The GPU wrapper's C++ (cuda.h and the `call` codegen.py writes around it) must
    build on a machine without CUDA, as CI's is: a CPU graph of Triton kernels, generated as if
    for cuda:0, is compiled (not loaded: libtorch_cuda is not there to load it against)."""
    pytest.importorskip("triton")
    from miniinductor.ext.cpp_wrapper import codegen as cw
    from miniinductor.ext.cpp_wrapper import runtime
    init = cw.CppWrapperCodeGen.__init__

    def as_gpu(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.device = torch.device("cuda", 0)
    built = []

    def build_only(source, cxx=None, cuda=False):
        built.append((source, runtime.build_cpp_wrapper(source, cxx, cuda)))
        raise RuntimeError("built, not loaded")
    monkeypatch.setattr(cw.CppWrapperCodeGen, "__init__", as_gpu)
    monkeypatch.setattr(cw.CppWrapperCodeGen, "_check_device", lambda *args: None)
    monkeypatch.setattr(runtime, "load_cpp_wrapper", build_only)

    def fn(x, w, b):
        return torch.relu(torch.addmm(b, x, w) * 2).sum(1), x.sin()
    with pytest.raises(Exception, match="built, not loaded"):
        miniinductor.compile(fn, cpu_backend="triton", cpp_wrapper=True)(randn(8, 16), randn(16, 32), randn(32))
    (source, library), = built
    assert library.exists()
    assert "aoti_torch_cuda_mm_out(" in source and "#define MI_KERNELS 2" in source
    assert len(re.findall(r'mi_launch\(\d, "triton_\w+", stream, \{', source)) == 2


def test_symbolic_sizes_fall_back_once_not_per_shape(caplog):
    """A graph with symbolic sizes and extern ops gets the Python wrapper, compiled once for
    every shape: the C++ wrapper's steps need numbers, so it declines before writing any
    (it raised TypeError there once, and each shape was compiled again on its own)."""
    def fn(x, w):
        return torch.relu(x @ w) + x.sum()
    compiled = miniinductor.compile(fn, cpp_wrapper=True, dynamic=True)
    miniinductor.metrics.reset()
    with caplog.at_level(logging.INFO, logger="miniinductor"), collect_compiled() as graphs:
        for n in (5, 9, 13):
            check(fn, randn(n, 8), randn(8, 6), compiled=compiled)
    assert miniinductor.metrics.specializations == 0 and len(graphs) == 1
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cpp_wrapper:")]
    assert len(lines) == 1 and "symbolic sizes" in lines[0], lines


def test_a_static_graph_with_an_int_input():
    # a backward compiled per shape takes its sizes as plain ints (capture/specialize.py,
    # PerShape): they are numbers in the code, and only the tensors are handed to C++
    from torch.fx.experimental.proxy_tensor import make_fx

    from miniinductor.compile_fx import compile_graph
    from miniinductor.config import Config
    fn = lambda x, n, w: ((x * n + 1) @ w,)   # noqa: E731
    x, w = randn(4, 5), randn(5, 2)
    cg = compile_graph(make_fx(fn)(x, 3, w), [x, 3, w], Config(cpp_wrapper=True))
    assert C_ENTRY in cg.wrapper_source and "to_handles([args[0], args[2]])" in cg.wrapper_source
    x, w = randn(4, 5), randn(5, 2)
    torch.testing.assert_close(cg.call([x, 3, w]), fn(x, 3, w))


def test_bind_launch_table_entries(monkeypatch, caplog):
    """What Python writes into a GPU wrapper's launch table (ext/cpp_wrapper/runtime.py), with
    stand-ins for the library, the launchers and Triton's compiled kernels: each kernel's
    CUfunction, grid, warps, shared memory and scratch; an empty grid's zeros; and the first
    kernel the table cannot take ends the binding with the reason, logged once."""
    import contextlib
    import types

    from miniinductor.ext.cpp_wrapper import runtime
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())

    class Lib:
        def __init__(self):
            self.rows = {}

        def mi_init(self):
            return 1

        def mi_bind(self, row, *entry):
            self.rows[row] = entry

    def launch(name, launcher):
        scope = {} if launcher is None else {f"_launcher_{name}": launcher}
        exec(f"def launch_{name}(): pass", scope)
        return scope[f"launch_{name}"]

    def launcher(function, grid, ints=0, **metadata):
        md = types.SimpleNamespace(**{"num_warps": 4, "shared": 1024, "global_scratch_size": 0, "num_ctas": 1, **metadata})
        return types.SimpleNamespace(ints=ints, grid3=grid, compiled=types.SimpleNamespace(metadata=md, function=function))
    launches = [launch("k0", launcher(0xAB, (8, 2, 1))), launch("k1", None),
                launch("k2", launcher(0xCD, (3, 1, 1), global_scratch_size=128))]
    lib = Lib()
    assert runtime.bind_launch_table(lib, launches, 0) is None
    assert lib.rows == {0: (0xAB, 8, 2, 1, 4, 1024, 0), 1: (None, 0, 0, 0, 0, 0, 0), 2: (0xCD, 3, 1, 1, 4, 1024, 128)}
    lib = Lib()
    with caplog.at_level(logging.INFO, logger="miniinductor"):
        why = runtime.bind_launch_table(lib, [launches[0], launch("k3", launcher(0xEF, (1, 1, 1), num_ctas=2)),
                                              launch("k4", launcher(0x12, None, ints=2))], 0)
    assert why == "launch_k3 needs clusters" and list(lib.rows) == [0]
    assert [r.getMessage() for r in caplog.records if "cpp_wrapper:" in r.getMessage()] == [
        "cpp_wrapper: the Python wrapper launches this graph's kernels (launch_k3 needs clusters)"]
