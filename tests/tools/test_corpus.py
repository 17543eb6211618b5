"""benchmarks/corpus.py's correctness check, through the code path its runs take (run_case):
two generated patterns and one named one pass through miniinductor, and the same output
against a perturbed eager reference is reported FAIL (a check that cannot fail checks nothing)."""
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def corpus():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("corpus_bench", BENCH / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCH))


CASES = ["p001-", "p005-", "softmax-cumsum"]


def _run(corpus, perturb):
    args = corpus.parse(["--device", "cpu", "--compilers", "eager,miniinductor", "--no-timing", "--kinds", "patterns",
                         "--only", ",".join(CASES)])
    cases = corpus.select(args)
    assert len(cases) == len(CASES), [c.name for c in cases]
    records = []
    for case in cases:
        corpus.run_case(case, args, records.append, perturb_reference=perturb)
    return {r["case"]: r for r in records if r["compiler"] == "miniinductor"}


def test_patterns_pass(corpus):
    records = _run(corpus, 0.0)
    assert all(r["status"] == "PASS" for r in records.values()), records
    assert all(r["err"] < 1e-4 for r in records.values())


def test_perturbed_reference_fails(corpus):
    records = _run(corpus, 1e-2)             # eager's outputs scaled by 1.01: 1e-2 of the scale, over 1e-4
    assert len(records) == len(CASES)
    assert all(r["status"] == "FAIL" for r in records.values()), records


def test_compare_catches_nan_and_shape(corpus):
    import torch
    a = torch.ones(3)
    assert corpus.compare([a], [a.clone()], 1e-4)[0] == 0.0
    assert corpus.compare([a], [torch.tensor([1.0, float("nan"), 1.0])], 1e-4)[0] == float("inf")
    assert corpus.compare([a], [torch.ones(4)], 1e-4)[0] == float("inf")
