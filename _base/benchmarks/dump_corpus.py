"""Dump the generated code of a corpus of graphs, and compare two dumps byte for byte.

    python benchmarks/dump_corpus.py dump OUT [--options JSON] [--only bench,zoo,real]
    python benchmarks/dump_corpus.py compare OUT_BEFORE OUT_AFTER

For a refactor that must not change what the compiler emits (issue 35: "byte-identical for
the default options"), dump before, dump after, compare. The corpus: every workload of
benchmarks/bench_cpu.py (inference), every model of the zoo (miniinductor/zoo.py) and every
real model that can be built here (miniinductor/real_models/), the last two trained one SGD
step so that forward and backward graphs are both compiled. Each compiled graph's wrapper
module (the C++ kernels are embedded in it) is copied to OUT/<entry>/<k>_wrapper.py, in
compile order; the kernel cache is OUT/cache, fresh for each dump, so that no timed choice
(oneDNN against ATen, GEMM autotuning) is read from an earlier run, and its path is written
as `<cache>` so that two dumps compare. `compare` lists every file that differs or exists on
one side only, with the first differing line, and exits 1 if any does.

Two dumps of the same tree (2026-11-28, this machine, the whole corpus: 97 graphs, 3:50
each) differed in one file: bench_gpt2_block, where oneDNN's linear against ATen's addmm is
chosen by timing each run (lowering/onednn.py). For a byte-identical check, dump both sides
with that choice fixed too (`--options '{"onednn_linear": false}'`, and compare the default
run separately, knowing that file may move), or make the choice read a shared timing cache.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _entries(only: set[str]):
    """(name, run(compile)) pairs: run compiles and runs one corpus entry with `compile`."""
    import torch

    if "bench" in only:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import bench_cpu

        for case in bench_cpu.CASES:
            def run(compile, case=case):
                fn, args = case.setup()
                with torch.no_grad():
                    compile(fn)(*args)
            yield f"bench_{case.name}", run
    if "zoo" in only:
        from miniinductor import zoo
        for name in zoo.ZOO:
            yield f"zoo_{name}", lambda compile, name=name: zoo.compare_training(name, compile, steps=1)
    if "real" in only:
        from miniinductor import real_models
        for name in real_models.MODELS:
            if real_models.available(name):
                yield f"real_{name}", lambda compile, name=name: real_models.compare_training(
                    name, steps=1, sync=False, compile=compile)


def dump(out: Path, options: dict, only: set[str]) -> int:
    if out.exists():
        shutil.rmtree(out)
    cache = out / "cache"
    cache.mkdir(parents=True)
    os.environ["MINIINDUCTOR_CACHE_DIR"] = str(cache)   # read when miniinductor is imported
    import torch

    import miniinductor
    from miniinductor import metrics

    def compile(fn):
        return miniinductor.compile(fn, **options)
    count = 0
    for name, run in _entries(only):
        torch._dynamo.reset()
        metrics.reset()
        torch.manual_seed(0)
        run(compile)
        folder = out / name
        folder.mkdir()
        for k, path in enumerate(metrics.output_code_paths):
            text = Path(path).read_text().replace(str(cache), "<cache>")
            (folder / f"{k:03d}_wrapper.py").write_text(text)
        count += len(metrics.output_code_paths)
        print(f"{name}: {len(metrics.output_code_paths)} graphs", flush=True)
    (out / "corpus.json").write_text(json.dumps({"options": options, "only": sorted(only), "graphs": count}))
    print(f"{count} graphs dumped to {out}")
    return 0


def compare(before: Path, after: Path) -> int:
    def files(root):
        return {p.relative_to(root) for p in root.rglob("*_wrapper.py") if "cache" not in p.parts}
    a, b = files(before), files(after)
    differing = 0
    for rel in sorted(a | b):
        if rel not in a or rel not in b:
            print(f"{rel}: only in {before if rel in a else after}")
            differing += 1
            continue
        x, y = (before / rel).read_text(), (after / rel).read_text()
        if x != y:
            differing += 1
            diff = list(difflib.unified_diff(x.splitlines(), y.splitlines(), lineterm="", n=0))
            print(f"{rel}: differs; first change: {diff[2:4]}")
    print(f"compared {len(a | b)} files ({len(a & b)} on both sides): {differing} differ")
    return 1 if differing else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--options", default="{}", help="miniinductor options as JSON (default: none, the defaults)")
    d.add_argument("--only", default="bench,zoo,real", help="which parts of the corpus (bench, zoo, real)")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args.out, json.loads(args.options), set(args.only.split(",")))
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
