"""The fallback census over the corpus (benchmarks/corpus_cases.py, CPU size, inference):
every op that ran as an ATen call for want of a lowering (`explain(...).fallbacks`; the
extern-by-design ones, GEMMs, convolutions, attention, sorting, random numbers, left out).

    python benchmarks/corpus_census.py                      # every kind
    python benchmarks/corpus_census.py models,timm,hf       # some kinds

A model's training graphs: `python -m miniinductor fallbacks MODEL` (docs/lowering_coverage.md).
"""
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
torch.set_num_threads(1)
from corpus_cases import all_cases  # noqa: E402

import miniinductor  # noqa: E402

kinds = sys.argv[1].split(",") if len(sys.argv) > 1 else ["models", "timm", "hf", "patterns"]
total, per_case, n = collections.Counter(), {}, 0
for case in all_cases("cpu"):
    if case.kind not in kinds:
        continue
    model, inputs = case.build("cpu", "cpu")
    try:
        with torch.no_grad():
            if isinstance(inputs, dict):
                keys = list(inputs)
                result = miniinductor.explain(lambda *xs: model(**dict(zip(keys, xs))), *inputs.values())
            else:
                result = miniinductor.explain(model, *inputs)
        fb = {op: e.count for op, e in result.fallbacks.items()}
    except Exception as exc:
        fb = {f"ERROR {type(exc).__name__}": 1}
    n += 1
    if fb:
        per_case[case.name] = fb
        total.update(fb)
    print(f"{case.name:45s} {fb or 'no fallback'}", flush=True)
print(f"\n{n} cases; {len(per_case)} with a fallback; ops: {dict(total)}")
