"""The compiled-graph cache (ext/fx_graph_cache): a second compile of the same graph is a hit
that skips lowering and gives the same outputs; what differs on a miss is named; a corrupted
entry is rebuilt, never run; the option and $MINIINDUCTOR_FX_GRAPH_CACHE turn it off.

Every test runs with the cache on (tests/conftest.py turns it off for the rest of the suite)
in a folder of this module's own, each with a function of its own so that entries of one
test never meet another's. Outputs are compared with eager on seeded random inputs with
assert_close's float32 defaults; a hit runs the very wrapper the miss generated, so its
outputs must equal the miss's bitwise.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fx_cache_common
import torch
from conftest import skip_unless_extension
from fx_cache_common import changes, messages

import miniinductor
from miniinductor.compile_fx import collect_compiled, last_compiled
from miniinductor.config import Config
from miniinductor.ext import fx_graph_cache
from miniinductor.tools.debug import planted_bugs

pytestmark = skip_unless_extension("fx_graph_cache")
folder, cache = fx_cache_common.folder, fx_cache_common.cache   # the fixtures
REPO = Path(__file__).resolve().parents[3]


def compiled_run(fn, *args, **options):
    """A fresh compile of `fn` and its output: its cache messages and counters changed."""
    torch._dynamo.reset()
    before = dict(fx_graph_cache.counters)
    out = miniinductor.compile(fn, **options)(*args)
    return out, changes(fx_graph_cache.counters, before)


SCRIPT = """
import sys, torch, miniinductor
from miniinductor.compile_fx import last_compiled
from miniinductor.ext import fx_graph_cache
def f(x, w):
    return torch.softmax(x @ w, -1) * torch.tanh(x).sum(-1, keepdim=True)
torch.manual_seed(0)
x, w = torch.randn(8, 16), torch.randn(16, 16)
out = miniinductor.compile(f)(x, w)
torch.save({"out": out, "x": x, "w": w, "counters": dict(fx_graph_cache.counters),
            "passes": [r.name for r in last_compiled()[-1].passes]}, sys.argv[1])
"""


def test_a_second_process_hits_and_skips_lowering(cache, tmp_path):
    script = tmp_path / "compile_once.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "MINIINDUCTOR_LOGS": "cache"}
    runs = []
    for name in ("cold", "warm"):
        done = subprocess.run([sys.executable, str(script), str(tmp_path / f"{name}.pt")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append((torch.load(tmp_path / f"{name}.pt"), done.stderr))
    (cold, cold_log), (warm, warm_log) = runs
    assert cold["counters"]["miss"] == 1 and "miss inference: no entry for this graph" in cold_log
    assert warm["counters"] == {"hit": 1, "miss": 0, "bypass": 0, "rebuilt": 0} and "hit inference" in warm_log
    assert "lower" in cold["passes"] and "lower" not in warm["passes"]   # the hit ran no lowering
    assert torch.equal(cold["out"], warm["out"])
    x, w = warm["x"], warm["w"]
    torch.testing.assert_close(warm["out"], torch.softmax(x @ w, -1) * torch.tanh(x).sum(-1, keepdim=True))


def test_a_changed_option_misses_and_names_it(cache, caplog):
    def f(x):
        return torch.relu(x * 2 + 1).sum(0)
    x = torch.randn(16, 8)
    first, done = compiled_run(f, x)
    second, hit = compiled_run(f, x)
    assert done == {"miss": 1} and hit == {"hit": 1} and torch.equal(first, second)
    caplog.clear()
    out, missed = compiled_run(f, x, fusion=False)
    assert missed == {"miss": 1} and "option fusion differs (entry True, now False)" in messages(caplog)
    torch.testing.assert_close(out, f(x))


def test_a_changed_stride_misses_and_says_so(cache, caplog):
    def f(x):
        return (x.exp() + x).sum(1)
    x = torch.randn(8, 16)
    compiled_run(f, x)
    caplog.clear()
    transposed = torch.randn(16, 8).t()
    out, missed = compiled_run(f, transposed)
    assert missed == {"miss": 1}
    assert "input 0's stride differs (entry [16, 1], now [1, 8])" in messages(caplog)
    torch.testing.assert_close(out, f(transposed))


def test_a_truncated_entry_is_rebuilt_not_run(cache, caplog):
    def f(x, y):
        return torch.sigmoid(x) * y - x.mean()
    x, y = torch.randn(32, 4), torch.randn(32, 4)
    compiled_run(f, x, y)
    path = Path(last_stored(caplog))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    caplog.clear()
    out, rebuilt = compiled_run(f, x, y)
    assert rebuilt == {"rebuilt": 1} and "is corrupted" in messages(caplog) and "truncated" in messages(caplog)
    torch.testing.assert_close(out, f(x, y))
    again, hit = compiled_run(f, x, y)   # the rebuilt entry is whole again
    assert hit == {"hit": 1} and torch.equal(again, out)


def last_stored(caplog) -> str:
    stored = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stored")]
    return [m for m in stored if not m.startswith("stored capture")][-1].split(" at ")[-1]   # the ATen level's


def entries(folder: Path) -> set:
    return set((folder / "fxgraph").rglob("*.entry"))


def test_the_option_and_the_variable_turn_it_off(cache, monkeypatch):
    def f(x):
        return torch.cos(x) * 3
    x = torch.randn(64)
    before = entries(cache)
    out, changed = compiled_run(f, x, fx_graph_cache=False)
    assert changed == {} and entries(cache) == before
    torch.testing.assert_close(out, f(x))
    monkeypatch.setenv("MINIINDUCTOR_FX_GRAPH_CACHE", "0")
    assert Config().fx_graph_cache is False
    out, changed = compiled_run(f, x)
    assert changed == {} and entries(cache) == before
    torch.testing.assert_close(out, f(x))


def test_training_hits_forward_and_backward(cache, caplog):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    x = torch.randn(6, 8)

    def step():
        model.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]
    expected = step()
    torch._dynamo.reset()
    step_fn = miniinductor.compile(step)
    first, second = [], []
    for runs in (first, second):
        before = dict(fx_graph_cache.counters)
        runs.append(step_fn())
        runs.append(changes(fx_graph_cache.counters, before))
        torch._dynamo.reset()
        step_fn = miniinductor.compile(step)
    # the forward, the backward (and the graph after backward(), which gathers the gradients)
    assert first[1]["miss"] == second[1]["hit"] >= 2 and set(first[1]) == {"miss"} and set(second[1]) == {"hit"}
    assert "hit forward" in messages(caplog) and "hit backward" in messages(caplog)
    torch.testing.assert_close(second[0], expected)
    assert torch.equal(first[0][0], second[0][0]) and all(map(torch.equal, first[0][1], second[0][1]))


def test_freezing_keys_on_the_parameters_values(cache, caplog):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        out, done = compiled_run(model, x, freezing=True)
        torch.testing.assert_close(out, model(x))
        model[0].weight.add_(torch.randn(8, 8))
        caplog.clear()
        out, missed = compiled_run(model, x, freezing=True)
        assert missed == {"miss": 1} and "constant tensors differ" in messages(caplog)
        torch.testing.assert_close(out, model(x))
        again, hit = compiled_run(model, x, freezing=True)   # constants come back from the entry
        assert hit == {"hit": 1} and torch.equal(again, out)


def test_collecting_tools_and_planted_bugs_bypass_it(cache, caplog):
    def f(x):
        return torch.tanh(x) + 1
    x = torch.randn(10)
    with collect_compiled() as graphs:
        _, bypassed = compiled_run(f, x)
    assert bypassed == {"bypass": 1} and graphs[0].scheduler is not None and "collected" in messages(caplog)
    with planted_bugs.wrong_lowering(torch.ops.aten.tanh):   # the cache takes no part
        buggy, untouched = compiled_run(f, x)
    assert untouched == {}
    torch.testing.assert_close(buggy, f(x) + 1)   # the bug is seen: no entry hid it
    out, _ = compiled_run(f, x)
    torch.testing.assert_close(out, f(x))   # ... and none kept it
    assert last_compiled()[-1].passes is not None


def test_torch_trace_bypasses_it(cache, caplog, monkeypatch, tmp_path):
    """Under TORCH_TRACE the compile runs in full: tlparse's pages read the lowered graph (a hit
    would log the output code only, with no provenance or fusion decisions)."""
    def f(x):
        return torch.sigmoid(x) * 3
    x = torch.randn(12)
    handler = torch._logging._internal.LazyTraceHandler(str(tmp_path / "trace"))   # as TORCH_TRACE=dir makes
    monkeypatch.setattr(torch._logging._internal.trace_log, "handlers", [handler])
    out, bypassed = compiled_run(f, x)
    assert bypassed == {"bypass": 1} and "TORCH_TRACE" in messages(caplog)
    torch.testing.assert_close(out, f(x))
