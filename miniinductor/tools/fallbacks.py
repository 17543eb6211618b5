"""`python -m miniinductor fallbacks`: which ATen ops a model runs as ATen calls, and why.

  fallbacks MODEL [--train | --eval] [--device cpu]
      compile MODEL (a zoo name: tools/zoo; a real model's: tools/real_models; or any
      torchvision classification model, built by `torchvision.models.get_model` with random
      weights and 10 classes), run it once -- with --train (the default) forward and
      backward, so both graphs are compiled -- and print, per graph, its fallbacks (ops with
      no lowering, or whose lowering declined) and its externs by design (GEMMs,
      convolutions, attention, random numbers), each op with its count and reason
      (tools/debug/census.py, the same as `explain(...).fallbacks`).
  fallbacks --compare-inductor
      our lowering and decomposition tables against Inductor's: Inductor's lowerings (less
      its `make_fallback` ops) and its decomposition table (`select_decomp_table()`) against
      our lowerings (every extension's) and our decomposition table (every extension's, training);
      the counts, then every ATen op Inductor lowers or decomposes that we do neither to.

Mirrors nothing in Inductor. Simplified: ops are compared overload by overload (a lowering
registered for a packet covers all its overloads, as `find_lowering` reads it); only
`aten` ops are listed as missing.
"""
from __future__ import annotations

import argparse
import collections
import sys

import torch

from ..compile_fx import collect_compiled
from ..compile_fx import compile as mi_compile
from .debug.census import census, census_lines

IMAGE = 64   # the side of a torchvision model's random images (2 of them)


def build(name: str, train: bool):
    """(model, run(compiled model) -> None): the model, and one call of it (a backward
    through its loss when `train`)."""
    from . import real_models, zoo
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name in zoo.ZOO:
        entry = zoo.ZOO[name]
        args, target = entry.make_inputs(entry.config, gen)
        model = zoo.WithLoss(entry.make_model(entry.config), entry.loss_fn) if train else entry.make_model(entry.config)
        return model, (lambda m: m(target, *args).backward()) if train else (lambda m: m(*args))
    if name in real_models.MODELS:
        model, inputs, loss_fn = real_models.build(name)
        return model, (lambda m: loss_fn(m(**inputs)).backward()) if train else (lambda m: m(**inputs))
    tv = real_models.import_torchvision()
    if tv is None or name not in tv.models.list_models():
        known = ", ".join(list(zoo.ZOO) + real_models.MODELS)
        raise KeyError(f"unknown model {name!r}: not in the zoo, the real models ({known}) or torchvision")
    model = tv.models.get_model(name, weights=None, num_classes=10)
    x, target = torch.randn(2, 3, IMAGE, IMAGE, generator=gen), torch.randint(0, 10, (2,), generator=gen)
    loss = torch.nn.functional.cross_entropy
    return model, (lambda m: loss(real_models.main_output(m(x)), target).backward()) if train else (lambda m: m(x))


def run_census(name: str, train: bool = True, device: str = "cpu", **options):
    """The CompiledGraphs of one call of model `name` (forward and backward when `train`)."""
    model, call = build(name, train)
    model = model.to(device).train(train)
    torch._dynamo.reset()
    with collect_compiled() as graphs, torch.set_grad_enabled(train), torch.device(device):
        call(mi_compile(model, **options))
    return graphs


def print_census(name: str, graphs, train: bool) -> None:
    print(f"miniinductor fallbacks: {name} ({'training' if train else 'inference'}), {len(graphs)} graph(s)")
    for line in census_lines(graphs):
        print(line)
    merged, externs = census(graphs), census(graphs, externs=True)
    print(f"total: {sum(e.count for e in merged.values())} fallback call(s) of {len(merged)} op(s); "
          f"{sum(e.count for e in externs.values())} extern call(s) of {len(externs)} op(s)")


def _overloads(keys) -> set:
    """Every aten/prims OpOverload a table's keys cover (a packet: all of its overloads)."""
    found = set()
    for key in keys:
        if isinstance(key, torch._ops.OpOverloadPacket):
            found |= {getattr(key, o) for o in key.overloads()}
        elif isinstance(key, torch._ops.OpOverload):
            found.add(key)
    return found


def compare_inductor() -> dict:
    """{"inductor": ..., "ours": ..., "missing": {packet: [overloads]}}: the sets of overloads
    lowered or decomposed by each, and the aten ones only Inductor handles."""
    import torch._inductor.decomposition as inductor_decomp
    import torch._inductor.lowering as inductor_lowering

    from ..capture.decompositions import decomposition_table
    from ..lowering.registry import lowerings
    lowered = _overloads(inductor_lowering.lowerings) - _overloads(inductor_lowering.fallbacks)
    decomposed = _overloads(inductor_decomp.select_decomp_table())
    ours_lowered, ours_decomposed = _overloads(lowerings), _overloads(decomposition_table(True, "cpp", None))
    inductor, ours = lowered | decomposed, ours_lowered | ours_decomposed
    missing = collections.defaultdict(list)
    for op in sorted(inductor - ours, key=str):
        if op.namespace == "aten" and not op.name().endswith("_out") and op._overloadname != "out":
            missing[str(op.overloadpacket)].append(op._overloadname)
    return dict(inductor_lowered=lowered, inductor_decomposed=decomposed, ours_lowered=ours_lowered,
                ours_decomposed=ours_decomposed, inductor=inductor, ours=ours, missing=dict(missing))


def print_compare() -> None:
    c = compare_inductor()
    print("miniinductor fallbacks --compare-inductor: ATen/prims overloads lowered or decomposed")
    print(f"  Inductor: {len(c['inductor_lowered'])} lowered (less its fallbacks), "
          f"{len(c['inductor_decomposed'])} decomposed, {len(c['inductor'])} in all")
    print(f"  ours:     {len(c['ours_lowered'])} lowered, {len(c['ours_decomposed'])} decomposed, {len(c['ours'])} in all")
    print(f"  both: {len(c['inductor'] & c['ours'])}; Inductor only: {len(c['inductor'] - c['ours'])}; "
          f"ours only: {len(c['ours'] - c['inductor'])}")
    print(f"aten ops Inductor lowers or decomposes that we do neither to ({len(c['missing'])} ops; "
          "out= overloads left out):")
    for packet, overloads in c["missing"].items():
        print(f"  {packet}: {', '.join(overloads)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="a zoo, real_models or torchvision model name")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--train", dest="train", action="store_true", default=True,
                      help="forward and backward (the default)")
    mode.add_argument("--eval", dest="train", action="store_false", help="inference only, under no_grad")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compare-inductor", action="store_true",
                        help="compare our lowering and decomposition tables with Inductor's")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if args.compare_inductor:
        print_compare()
        return 0
    if args.model is None:
        print("miniinductor fallbacks: error: give a MODEL or --compare-inductor", file=sys.stderr)
        return 2
    try:
        graphs = run_census(args.model, args.train, args.device)
    except KeyError as exc:
        print(f"miniinductor fallbacks: error: {exc.args[0]}", file=sys.stderr)
        return 2
    print_census(args.model, graphs, args.train)
    return 0
