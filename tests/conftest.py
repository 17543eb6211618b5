"""Shared test helpers: compile switch, per-test seeding, and ``check()``.

``check(fn, *args)`` is the heart of the common test template: it runs ``fn``
eagerly and compiled (each on its own faithful copies of the inputs) and
asserts that values, shapes, dtypes, strides, input mutations and aliasing
agree.  Optionally (``inductor=True``) it also compares with the real
``torch.compile(backend="inductor")``.

The compiler under test is miniinductor.  To validate the harness itself
without it, set ``MINIINDUCTOR_TEST_BACKEND`` to another Dynamo backend
(``eager``, ``aot_eager``, ``inductor``); tests that read
``miniinductor.metrics`` are skipped then.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten, tree_map

# Tests mirror the package (tests/core, tests/triton, tests/ext/<name>, tests/tools); test
# modules share their cases by module name (`from test_common import CASES`), so the folders
# holding them are on the path, as tests/ itself is (pytest puts a conftest's folder there).
for _folder in ("core", "triton", "tools"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _folder))

# The compiled-graph cache (ext/fx_graph_cache) is off in tests unless a test turns it on (its
# own do): tests patch the compiler (planted bugs, monkeypatched passes) in ways its key cannot
# see, and read the artifacts of each compile. Inductor's tests run with fresh caches likewise.
os.environ.setdefault("MINIINDUCTOR_FX_GRAPH_CACHE", "0")
BACKEND = os.environ.get("MINIINDUCTOR_TEST_BACKEND", "miniinductor")
USING_MINIINDUCTOR = BACKEND == "miniinductor"
# Extra miniinductor options for every compile, as JSON, so the same template
# runs on every target, e.g. MINIINDUCTOR_TEST_OPTIONS='{"cpu_backend": "triton"}'
# or '{"fusion": false}'.
TEST_OPTIONS = json.loads(os.environ.get("MINIINDUCTOR_TEST_OPTIONS") or "{}")

requires_miniinductor = pytest.mark.skipif(
    not USING_MINIINDUCTOR,
    reason=f"reads miniinductor.metrics; MINIINDUCTOR_TEST_BACKEND={BACKEND}",
)

# Default tolerances per output dtype: (rtol, atol).
#  * float32 / float64 / complex: torch.testing.assert_close's own defaults
#    (fp32: 1.3e-6 relative, 1e-5 absolute).  A fused kernel computes the same
#    IEEE operations as eager, only the order of accumulation in reductions
#    may differ; cases with long reductions pass wider tolerances explicitly.
#  * float16 / bfloat16: miniinductor (like Inductor) loads low-precision
#    values, computes in float32 and rounds once on store, whereas eager rounds
#    after every op.  The two can therefore differ by about one unit in the
#    last place of the low-precision type: fp16 has a 2**-10 ~ 1e-3 ulp,
#    bf16 a 2**-7 ~ 7.8e-3 ulp (we allow two: 1.6e-2).  If that is still not
#    enough, check() also accepts a match against eager run in float32 and
#    rounded once at the end ("reference in float", as Inductor's tests do).
DEFAULT_TOLERANCES = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
LOW_PRECISION = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------
# compiling
# --------------------------------------------------------------------------
def compile_fn(fn, **options):
    """Compile ``fn`` (a function or nn.Module) with the backend under test."""
    if USING_MINIINDUCTOR:
        import miniinductor

        return miniinductor.compile(fn, **{**TEST_OPTIONS, **options})
    return torch.compile(fn, backend=BACKEND, dynamic=False, **options)


def compile_inductor(fn):
    """The real Inductor, the reference compiler."""
    return torch.compile(fn, backend="inductor", dynamic=False)


def metrics():
    import miniinductor

    return miniinductor.metrics


def _bump_recompile_limit():
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 256))


_bump_recompile_limit()

# Text blocks that tests want shown at the end of the run (e.g. the OpInfo sweep
# summary), printed by pytest_terminal_summary even without ``-s``.
TERMINAL_REPORTS: list[str] = []


def pytest_terminal_summary(terminalreporter):
    for text in TERMINAL_REPORTS:
        terminalreporter.write_sep("=", "miniinductor report")
        terminalreporter.write_line(text)


def seed_for(nodeid: str) -> int:
    """A stable per-test seed (crc32 of the pytest node id)."""
    return zlib.crc32(nodeid.encode()) & 0x7FFFFFFF


@pytest.fixture(autouse=True)
def _fresh_state(request):
    """Each test starts with an empty Dynamo cache, fresh metrics and its own seed."""
    torch._dynamo.reset()
    torch.manual_seed(seed_for(request.node.nodeid))
    if USING_MINIINDUCTOR:
        try:
            metrics().reset()
        except Exception:  # core not importable yet: let the test itself fail
            pass
    yield
    torch._dynamo.reset()


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
@pytest.fixture
def poisoned_buffers(monkeypatch):
    """Wrappers compiled while it is active allocate their buffers filled with NaN (integers:
    their minimum; bool: True), so that an element a kernel fails to write shows."""
    from miniinductor.runtime import helpers
    empty = helpers.empty_strided_cpu

    def poisoned(size, stride, dtype):
        fill = float("nan") if dtype.is_floating_point else True if dtype == torch.bool else torch.iinfo(dtype).min
        return empty(size, stride, dtype).fill_(fill)
    monkeypatch.setattr(helpers, "empty_strided_cpu", poisoned)
    torch._dynamo.reset()


def clone_input(x):
    """A faithful copy: same sizes, strides and storage offset on a fresh storage.

    ``x.clone()`` would make a sliced or expanded input contiguous, and the
    point of those cases is to hand the compiler non-contiguous inputs.
    """
    if not isinstance(x, torch.Tensor):
        return x
    with torch.no_grad():
        storage = x.untyped_storage()
        new_storage = torch.UntypedStorage(storage.nbytes(), device=x.device)
        new_storage.copy_(storage)
        out = torch.empty(0, dtype=x.dtype, device=x.device)
        out.set_(new_storage, x.storage_offset(), x.size(), x.stride())
    if x.requires_grad:
        out.requires_grad_(True)
    return out


def clone_inputs(args):
    return tree_map(clone_input, args)


# --------------------------------------------------------------------------
# comparing
# --------------------------------------------------------------------------
def significant_strides(t: torch.Tensor):
    """Strides of the dims that matter: a size-1 dim's stride is arbitrary."""
    if t.numel() == 0:
        return ()
    return tuple(s for n, s in zip(t.shape, t.stride()) if n != 1)


def tolerances_for(dtype, rtol=None, atol=None):
    d_rtol, d_atol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


def _leaves(out):
    leaves, spec = tree_flatten(out)
    return leaves, spec


def _storage_key(t):
    return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else None


def alias_pattern(outputs, inputs):
    """Which outputs share storage with which inputs and with which other outputs."""
    outs = [o for o in outputs if isinstance(o, torch.Tensor)]
    ins = [i for i in inputs if isinstance(i, torch.Tensor)]
    out_keys = [_storage_key(o) for o in outs]
    in_keys = [_storage_key(i) for i in ins]
    out_in = {(a, b) for a, ka in enumerate(out_keys) for b, kb in enumerate(in_keys)
              if ka is not None and ka == kb}
    out_out = {(a, b) for a, ka in enumerate(out_keys) for b, kb in enumerate(out_keys)
               if a < b and ka is not None and ka == kb}
    return out_in, out_out


def assert_same_values(actual, expected, *, rtol=None, atol=None, what="output",
                       reference_in_float=None):
    """Values and metadata of one tensor (or a Python scalar)."""
    if not isinstance(expected, torch.Tensor):
        if isinstance(expected, float):
            torch.testing.assert_close(actual, expected, rtol=rtol or 1.3e-6,
                                       atol=atol or 1e-5, equal_nan=True, msg=what)
        else:
            assert actual == expected, f"{what}: {actual!r} != {expected!r}"
        return
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual)}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != eager {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != eager {expected.dtype}"
    assert actual.device == expected.device, f"{what}: device {actual.device} != {expected.device}"
    r, a = tolerances_for(expected.dtype, rtol, atol)
    try:
        torch.testing.assert_close(actual, expected, rtol=r, atol=a, equal_nan=True,
                                   check_stride=False, msg=lambda m: f"{what}: {m}")
    except AssertionError:
        if reference_in_float is None:
            raise
        # Low precision: accept a match with eager-in-float32, rounded once.
        torch.testing.assert_close(actual, reference_in_float, rtol=r, atol=a,
                                   equal_nan=True, check_stride=False,
                                   msg=lambda m: f"{what} (vs eager and vs eager-in-fp32): {m}")


def assert_same_strides(actual, expected, what="output"):
    if not isinstance(expected, torch.Tensor):
        return
    assert significant_strides(actual) == significant_strides(expected), (
        f"{what}: strides {actual.stride()} != eager {expected.stride()} "
        f"(shape {tuple(expected.shape)})"
    )


def _upcast(x):
    if isinstance(x, torch.Tensor) and x.dtype in LOW_PRECISION:
        return x.float()
    return x


def _eager_in_float(fn, args, expected_leaves):
    """Eager on float32 copies of low-precision inputs, outputs rounded back."""
    try:
        out = fn(*tree_map(_upcast, clone_inputs(args)))
    except Exception:
        return None
    leaves, _ = _leaves(out)
    if len(leaves) != len(expected_leaves):
        return None
    res = []
    for got, exp in zip(leaves, expected_leaves):
        if isinstance(got, torch.Tensor) and isinstance(exp, torch.Tensor):
            got = got.to(exp.dtype)
        res.append(got)
    return res


def compare_outputs(actual, expected, *, rtol=None, atol=None, check_strides=True,
                    ref_in_float=None, label="compiled"):
    a_leaves, a_spec = _leaves(actual)
    e_leaves, e_spec = _leaves(expected)
    assert a_spec == e_spec, f"{label}: output structure {a_spec} != eager {e_spec}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        what = f"{label} output {i}"
        rif = ref_in_float[i] if ref_in_float is not None else None
        assert_same_values(a, e, rtol=rtol, atol=atol, what=what, reference_in_float=rif)
        if check_strides:
            assert_same_strides(a, e, what=what)


def check(fn, *args, rtol=None, atol=None, inductor=False, check_strides=True,
          check_aliasing=True, compiled=None):
    """Run ``fn`` eagerly and compiled on copies of ``args`` and compare everything.

    * values (per-dtype tolerances, NaNs equal), shapes, dtypes;
    * strides of every output (ignoring size-1 dims), since the compiler aims
      to return the same layout as eager;
    * the inputs after the call (catches wrong or missing input mutations);
    * aliasing: an output that is a view of an input (or of another output)
      in eager must be one in the compiled run too, and vice versa (catches
      two outputs handed the same reused buffer);
    * with ``inductor=True``, the real Inductor's outputs as well.

    Returns the compiled outputs.
    """
    low_precision = any(isinstance(a, torch.Tensor) and a.dtype in LOW_PRECISION
                        for a in tree_flatten(args)[0])

    eager_args = clone_inputs(args)
    expected = fn(*eager_args)
    expected_leaves, _ = _leaves(expected)
    ref_in_float = _eager_in_float(fn, args, expected_leaves) if low_precision else None

    if compiled is None:
        compiled = compile_fn(fn)
    comp_args = clone_inputs(args)
    actual = compiled(*comp_args)

    compare_outputs(actual, expected, rtol=rtol, atol=atol, check_strides=check_strides,
                    ref_in_float=ref_in_float)
    # Inputs after the call: mutations must match eager's.
    for i, (a, e) in enumerate(zip(tree_flatten(comp_args)[0], tree_flatten(eager_args)[0])):
        assert_same_values(a, e, rtol=rtol, atol=atol, what=f"input {i} after the call")
    if check_aliasing:
        a_pat = alias_pattern(_leaves(actual)[0], tree_flatten(comp_args)[0])
        e_pat = alias_pattern(expected_leaves, tree_flatten(eager_args)[0])
        assert a_pat[0] == e_pat[0], (
            f"(output, input) storage sharing {sorted(a_pat[0])} != eager {sorted(e_pat[0])}")
        assert a_pat[1] == e_pat[1], (
            f"(output, output) storage sharing {sorted(a_pat[1])} != eager {sorted(e_pat[1])}")

    if inductor:
        torch._dynamo.reset()
        ind_out = compile_inductor(fn)(*clone_inputs(args))
        # Both compilers against eager already agree within tolerance; here the
        # two compiled results are compared with the same tolerances.
        compare_outputs(actual, ind_out, rtol=rtol, atol=atol, check_strides=False,
                        ref_in_float=ref_in_float, label="miniinductor vs inductor")
    return actual


def input_gradients(outputs, inputs, seed=1, draw_dtype=None):
    """(how many outputs require grad, the gradients of every input tensor that requires
    grad) for output gradients drawn from a fixed seed (in `draw_dtype`, default each
    output's dtype), taken as a training loop takes them: after the (compiled) call,
    outside it.  An unused input's gradient is None."""
    outs = [o for o in tree_flatten(outputs)[0]
            if isinstance(o, torch.Tensor) and o.requires_grad]
    ins = [t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    grad_outs = [torch.randn(o.shape, generator=gen, dtype=draw_dtype or o.dtype).to(o.dtype)
                 for o in outs]
    grads = ()
    if outs and ins:
        grads = torch.autograd.grad(outs, ins, grad_outs, allow_unused=True)
    return len(outs), grads


def check_grads(fn, *args, rtol=None, atol=None, compiled=None):
    """check() for a training step: outputs of the compiled call, then the gradients of
    every input that requires grad, each compared with eager on its own input copies."""
    eager_args, comp_args = clone_inputs(args), clone_inputs(args)
    expected = fn(*eager_args)
    actual = (compiled or compile_fn(fn))(*comp_args)
    compare_outputs(actual, expected, rtol=rtol, atol=atol, check_strides=False)
    n_expected, expected_grads = input_gradients(expected, eager_args)
    n_actual, actual_grads = input_gradients(actual, comp_args)
    assert n_expected > 0 and expected_grads, "nothing to differentiate"
    assert n_actual == n_expected, f"{n_actual} outputs require grad, eager {n_expected}"
    for i, (a, e) in enumerate(zip(actual_grads, expected_grads)):
        assert (a is None) == (e is None), f"gradient {i}: {a} vs eager {e}"
        if e is not None:
            assert_same_values(a, e, rtol=rtol, atol=atol, what=f"gradient {i}")
    return actual


# --------------------------------------------------------------------------
# random inputs (never all zeros)
# --------------------------------------------------------------------------
def randn(*shape, dtype=torch.float32, requires_grad=False):
    return torch.randn(*shape, dtype=dtype, requires_grad=requires_grad)


def randpos(*shape, dtype=torch.float32):
    """Strictly positive floats in [0.1, 2.1): for log, sqrt, rsqrt, pow bases."""
    return (torch.rand(*shape) * 2 + 0.1).to(dtype)


def randint(*shape, low=-10, high=10, dtype=torch.int64, nonzero=False):
    x = torch.randint(low, high, shape, dtype=torch.int64)
    if nonzero:
        x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype)


def randbool(*shape):
    return torch.rand(*shape) > 0.5


def check_training_step(module, compiled, x, grad_out, rtol=1e-4, atol=1e-4):
    """One forward+backward through `compiled` and through `module` eagerly, each on its own
    copy of `x`; the outputs, x's gradient and every parameter's gradient must agree."""
    x_c = x.detach().clone().requires_grad_(True)
    x_e = x.detach().clone().requires_grad_(True)
    module.zero_grad()
    out = compiled(x_c)
    out.backward(grad_out)
    grads = {n: p.grad.clone() for n, p in module.named_parameters()}
    module.zero_grad()
    ref = module(x_e)
    ref.backward(grad_out)
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    torch.testing.assert_close(x_c.grad, x_e.grad, rtol=rtol, atol=atol)
    for name, p in module.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, rtol=rtol, atol=atol, msg=name)
    return out


def extension_on(name: str) -> bool:
    """Whether the extension `name` (miniinductor/ext/) runs under MINIINDUCTOR_TEST_OPTIONS:
    every one does unless its `extensions` (or `preset`: "core") leaves `name` out."""
    if not USING_MINIINDUCTOR:
        return True
    from miniinductor.config import Config
    return Config.build(options=dict(TEST_OPTIONS)).uses(name)


def skip_unless_extension(name: str):
    """A `pytestmark` for the tests of extension `name`: skipped while it is off."""
    return pytest.mark.skipif(not extension_on(name), reason=f"the {name} extension is off (MINIINDUCTOR_TEST_OPTIONS)")
