"""The capture level of the compiled-graph cache (ext/fx_graph_cache/capture.py): a second
compile of the same Dynamo graph, in inference with a trivial AOTAutograd wrapper, skips
AOTAutograd and lowering and gives the same bits; everything else bypasses it (its reason in
the log) and stays correct, the ATen level still caching its graphs.

As test_fx_graph_cache.py: the cache on, in a folder of this module's own, a function of its
own per test; outputs compared with eager (assert_close's float32 defaults), a hit's with the
miss's bitwise.
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
from miniinductor.capture import aot
from miniinductor.ext import fx_graph_cache
from miniinductor.ext.fx_graph_cache.store import read_entry, read_record

pytestmark = skip_unless_extension("fx_graph_cache")
folder, cache = fx_cache_common.folder, fx_cache_common.cache   # the fixtures
REPO = Path(__file__).resolve().parents[3]


def compiled_run(fn, *args, grad=False, **options):
    """A fresh compile of `fn` and its output, with what the capture level and the ATen level did."""
    torch._dynamo.reset()
    capture, aten = dict(fx_graph_cache.capture_counters), dict(fx_graph_cache.counters)
    with torch.set_grad_enabled(grad):
        out = miniinductor.compile(fn, **options)(*args)
    return out, changes(fx_graph_cache.capture_counters, capture), changes(fx_graph_cache.counters, aten)


SCRIPT = """
import sys, torch, miniinductor
from miniinductor import compile_fx
from miniinductor.capture import aot
from miniinductor.ext import fx_graph_cache
from miniinductor.ext.fx_graph_cache.store import read_entry, read_record
calls = {"aot_autograd": 0, "compile_graph": 0}
def counted(module, name):
    real = getattr(module, name)
    def run(*args, **kwargs):
        calls[name] += 1
        return real(*args, **kwargs)
    setattr(module, name, run)
counted(aot, "aot_autograd")
counted(compile_fx, "compile_graph")
returned = []   # what the backend's callable returns (AOTAutograd's on a miss, the capture level's on a hit)
real_compile_fx = compile_fx.compile_fx
def spy(gm, example_inputs, config):
    fn = real_compile_fx(gm, example_inputs, config)
    out = fn(*example_inputs)
    returned.append([type(out).__name__, len(out), [type(t).__name__ for t in out]])
    return fn
compile_fx.compile_fx = spy
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32)).eval()
x = torch.randn(8, 16)
with torch.no_grad():
    out = miniinductor.compile(model)(x)
    expected = model(x)
torch.save({"out": out, "expected": expected, "calls": calls, "returned": returned,
            "capture": dict(fx_graph_cache.capture_counters), "aten": dict(fx_graph_cache.counters)}, sys.argv[1])
"""


def test_a_second_process_hits_at_the_capture_level(cache, tmp_path):
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
    assert cold["capture"]["miss"] == 1 and "miss capture: no entry for this graph" in cold_log
    assert "stored capture at" in cold_log and cold["calls"] == {"aot_autograd": 1, "compile_graph": 1}
    assert warm["capture"] == {"hit": 1, "miss": 0, "bypass": 0, "rebuilt": 0} and "hit capture" in warm_log
    assert warm["calls"] == {"aot_autograd": 0, "compile_graph": 0}   # neither AOTAutograd nor lowering ran
    assert warm["aten"]["hit"] == 1   # the inference graph's entry, loaded
    assert cold["returned"] == warm["returned"] == [["list", 1, ["Tensor"]]]   # what AOTAutograd's callable returns
    assert torch.equal(cold["out"], warm["out"])
    torch.testing.assert_close(warm["out"], warm["expected"])


def test_an_in_process_hit_skips_aot_autograd(cache, caplog, monkeypatch):
    def f(x, y):
        return torch.relu(x @ y) + torch.sigmoid(x).sum(1, keepdim=True)
    x, y = torch.randn(6, 5), torch.randn(5, 5)
    first, captured, _ = compiled_run(f, x, y)
    assert captured == {"miss": 1}
    traced = []
    real = aot.aot_autograd
    monkeypatch.setattr(aot, "aot_autograd", lambda **kw: traced.append(1) or real(**kw))
    again, captured, aten = compiled_run(f, x, y)
    assert captured == {"hit": 1} and aten == {"hit": 1} and traced == []
    assert torch.equal(first, again)
    torch.testing.assert_close(again, f(x, y))


def test_a_mutated_input_bypasses(cache, caplog):
    def f(x):
        x.add_(1)
        return x * 2
    x = torch.randn(4, 4)
    for run in range(2):
        before = x.clone()
        out, captured, _ = compiled_run(f, x)
        assert captured == {"bypass": 1} and "bypass capture: input 0 is mutated" in messages(caplog)
        torch.testing.assert_close(x, before + 1)   # the mutation is applied, once
        torch.testing.assert_close(out, (before + 1) * 2)
    assert "as an earlier compile of this graph found" in messages(caplog)   # the second bypassed at once


def test_a_view_of_an_input_bypasses(cache, caplog):
    def f(x):
        return x.t(), x.sin()
    x = torch.randn(3, 5)
    for _ in range(2):
        (t, s), captured, _ = compiled_run(f, x)
        assert captured == {"bypass": 1} and "output 0 is alias_of_input" in messages(caplog)
        assert t.data_ptr() == x.data_ptr() and t._base is x   # AOTAutograd's wrapper made it a view of x
        torch.testing.assert_close(s, x.sin())


def test_an_output_aliasing_another_is_what_aot_autograd_returns(cache, caplog):
    """In inference AOTAutograd tracks no alias between outputs (only those that require grad:
    collect_metadata_analysis.py): both are `non_alias`, its wrapper returns the compiled
    graph's outputs as they are, one storage, so a hit returns the same."""
    def f(x):
        y = x.cos()
        return y, y.view(-1)
    x = torch.randn(3, 5)
    runs = []
    for _ in range(2):
        (y, flat), captured, _ = compiled_run(f, x)
        assert flat.data_ptr() == y.data_ptr()   # still one storage
        torch.testing.assert_close(flat, x.cos().view(-1))
        runs.append((y, captured))
    assert runs[0][1] == {"miss": 1} and runs[1][1] == {"hit": 1} and torch.equal(runs[0][0], runs[1][0])


def test_training_is_not_cached_at_the_capture_level(cache, caplog):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh())
    x = torch.randn(5, 4)

    def step():
        model.zero_grad()
        model(x).square().mean().backward()
        return [p.grad.clone() for p in model.parameters()]
    expected = step()
    for _ in range(2):
        caplog.clear()
        grads, captured, aten = compiled_run(step, grad=True)
        assert captured["bypass"] == 1 and "bypass capture: gradients are needed" in messages(caplog)
        torch.testing.assert_close(grads, expected)
    assert "hit forward" in messages(caplog) and "hit backward" in messages(caplog)   # the ATen level's
    for path in (cache / "aotgraph").rglob("*.entry"):   # (the graph after backward() needs no grad: it may hit)
        record = read_record(path)[1]
        assert "bypass" in record or read_entry(cache / record["entry"])[0]["details"]["graph"] == "inference"


def test_inputs_sharing_storage(cache, caplog):
    def f(a, b):
        return a * 2 + b.sum()
    x = torch.randn(6, 4)
    for _ in range(2):   # f(x, x): Dynamo passes x once: one input, cached
        out, captured, _ = compiled_run(f, x, x)
        torch.testing.assert_close(out, f(x, x))
    assert captured == {"hit": 1}
    for _ in range(2):   # two inputs of one storage: AOTAutograd's business, bypassed
        out, captured, _ = compiled_run(f, x[1:], x)
        assert captured == {"bypass": 1} and "inputs 0 and 1 share storage" in messages(caplog)
        torch.testing.assert_close(out, f(x[1:], x))


def test_a_changed_grad_mode_or_requires_grad_misses(cache, caplog):
    def f(x):
        return torch.exp(x) - x.mean()
    x = torch.randn(8, 3)
    first, captured, _ = compiled_run(f, x)
    assert captured == {"miss": 1}
    caplog.clear()
    out, captured, _ = compiled_run(f, x, grad=True)   # x requires no grad: inference still
    assert captured == {"miss": 1} and "grad mode differs (entry False, now True)" in messages(caplog)
    torch.testing.assert_close(out, f(x))
    caplog.clear()
    wants_grad = x.clone().requires_grad_()
    out, captured, _ = compiled_run(f, wants_grad)   # under no_grad: inference still
    assert captured == {"miss": 1} and "input 0's requires_grad differs (entry False, now True)" in messages(caplog)
    assert not out.requires_grad
    torch.testing.assert_close(out, f(x))
    again, captured, _ = compiled_run(f, x)
    assert captured == {"hit": 1} and torch.equal(again, first)


def test_a_truncated_inference_entry_is_rebuilt(cache, caplog):
    def f(x):
        return torch.cos(x) * x + 1
    x = torch.randn(16, 4)
    first, _, _ = compiled_run(f, x)
    stored = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stored inference")][-1]
    entry = Path(stored.split(" at ")[-1])
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    caplog.clear()
    out, captured, aten = compiled_run(f, x)
    assert captured == {"rebuilt": 1} and aten == {"rebuilt": 1}
    assert "names an unusable inference entry" in messages(caplog) and "rebuilt inference" in messages(caplog)
    assert torch.equal(out, first)
    again, captured, _ = compiled_run(f, x)   # both entries whole again
    assert captured == {"hit": 1} and torch.equal(again, first)


def test_freezing_and_option_changes(cache, caplog):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4).eval()
    x = torch.randn(2, 4)
    out, captured, _ = compiled_run(model, x, freezing=True)
    assert captured == {"bypass": 1} and "the capture pass freeze_parameters" in messages(caplog)
    torch.testing.assert_close(out, model(x))
    compiled_run(model, x)
    caplog.clear()
    out, captured, _ = compiled_run(model, x, fusion=False)
    assert captured == {"miss": 1} and "option fusion differs (entry True, now False)" in messages(caplog)
    torch.testing.assert_close(out, model(x))
