"""The trace folder: every artifact of one compiled graph, written to disk as files.

Phase 7 (debug). In: a `CompiledGraph` (and, optionally, Dynamo's FX GraphModule). Out:
a folder. Mirrors `torch/_inductor/debug.py` (`DebugContext`, what `TORCH_COMPILE_DEBUG=1`
writes under `torch_compile_debug/`): same idea, same kind of file names.

    fx_graph.py            Dynamo's FX graph (or, without it, the ATen graph): runnable,
                           `python fx_graph.py` runs it on random inputs of the traced shapes
    aten_graph.py / .txt   the graph after AOTAutograd and decomposition (runnable / readable,
                           with the user source line of every node)
    ir_pre_fusion.txt      the loop IR of every buffer, as lowering left it
    ir_post_fusion.txt     the same buffers grouped by kernel, dead ones dropped
    schedule.txt           the kernels and extern calls in order, with their reads
    fusion_decisions.json  every pair the scheduler considered: fused?, why, bytes saved
    memory_plan.txt/.json  lifetimes, reuse, live bytes after each step, eager's peak
    output_code.py         the generated wrapper module (`call(args)`)
    symbols.txt            (symbolic sizes only) each size symbol: traced value, range, the
                           input it is read from; and the guards Dynamo checks before a call
    kernels.cpp            the C++ kernels with the prelude: `g++ -fsyntax-only -fopenmp` checks it
    kernels.py             (instead, or as well) the Triton kernels' modules, one after another
    fusion_graph.dot/.svg/.png   the fusion graph (SVG/PNG only when graphviz's `dot` exists)
    report.html            the self-contained HTML report (report.py)

`write_trace` writes one graph's folder; `trace_compiled_graph` is the hook for the
`trace` option / `$MINIINDUCTOR_TRACE`: a numbered subfolder per graph, the root printed once.
"""
from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import torch

from ...logs import plural
from ...runtime.cpp_builder import PRELUDE
from ...scheduler import FusedGroup
from .fusion_graph import render_fusion_graph
from .memory import eager_peak
from .report import write_report
from .sizes import describe_sizes

_HEADER = '''\
"""{title}

Written by miniinductor's trace. Run it (`python {filename}`) to execute the graph on
random inputs with the traced shapes, dtypes and strides.
"""
import math  # noqa: F401
import torch
from torch import device, tensor  # noqa: F401  (used by printed graphs)

inf, nan = float("inf"), float("nan")
'''


def _example_of(node):
    return node.meta.get("val", node.meta.get("example_value"))


def _tensor_expr(t: torch.Tensor, small_literal: bool = False) -> str:
    dtype = str(t.dtype)
    if small_literal and t.numel() <= 64 and t.device.type == "cpu":
        try:
            return f"torch.tensor({t.detach().tolist()!r}, dtype={dtype})"
        except Exception:  # a fake tensor has no data: fall through to a random one
            pass
    hint = lambda s: int(s.node.hint) if isinstance(s, torch.SymInt) else s   # noqa: E731 (symbolic: traced size)
    return f"_random({tuple(map(hint, t.shape))!r}, {tuple(map(hint, t.stride()))!r}, {dtype})"


_RANDOM = '''

def _random(shape, stride, dtype):
    """A tensor of the given layout: normal for floats, zeros (always in range) otherwise."""
    out = torch.empty_strided(shape, stride, dtype=dtype)
    return out.normal_() if out.is_floating_point() else out.zero_()


'''


def graph_module_source(gm: torch.fx.GraphModule, title: str, filename: str) -> str:
    """A runnable Python module: the GraphModule's readable source plus a `__main__`."""
    body = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    # AOTAutograd's graphs print as `class <lambda>(torch.nn.Module)`: give the class a name
    body = re.sub(r"^class .*?\(torch\.nn\.Module\):", "class GraphModule(torch.nn.Module):", body, count=1)
    inputs = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = _example_of(node)
        if isinstance(val, torch.Tensor):
            inputs.append(_tensor_expr(val))
        elif isinstance(val, (int, float, bool)):
            inputs.append(repr(val))
        elif isinstance(val, torch.SymInt):
            inputs.append(repr(int(val.node.hint)) if getattr(val.node, "hint", None) is not None else "1")
        else:
            inputs.append("None")
    attrs = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = _get_attr(gm, node.target)
            if isinstance(value, torch.Tensor):
                attrs.append(f"    _set_attr(module, {node.target!r}, {_tensor_expr(value, small_literal=True)})")
    main = ["", "", "def example_inputs():", f"    return [{', '.join(inputs)}]", "", "",
            "def _set_attr(module, target, value):",
            "    *path, name = target.split('.')",
            "    for part in path:",
            "        if not hasattr(module, part):",
            "            setattr(module, part, torch.nn.Module())",
            "        module = getattr(module, part)",
            "    setattr(module, name, value)", "", "",
            "def make_module():",
            "    module = GraphModule()",
            *attrs,
            "    return module", "", "",
            'if __name__ == "__main__":',
            "    outputs = make_module()(*example_inputs())",
            "    flat = outputs if isinstance(outputs, (list, tuple)) else [outputs]",
            "    for k, out in enumerate(flat):",
            "        print(k, tuple(out.shape) if isinstance(out, torch.Tensor) else out)", ""]
    return _HEADER.format(title=title, filename=filename) + _RANDOM + body.rstrip() + "\n" + "\n".join(main)


def _get_attr(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def aten_graph_text(gm: torch.fx.GraphModule) -> str:
    """The ATen graph, readable: its code with shapes, then each node's user source line."""
    lines = [gm.print_readable(print_output=False, include_stride=True, include_device=True).rstrip(), "",
             "# node -> user source line (from the stack trace Dynamo recorded)"]
    for node in gm.graph.nodes:
        trace = node.meta.get("stack_trace") or ""
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
        if frames:
            file, line, _, code = frames[-1]
            lines.append(f"#   {node.name:24s} {Path(file).name}:{line}  {code.strip()}")
    return "\n".join(lines) + "\n"


def ir_post_fusion_text(cg) -> str:
    lines = [f"# {cg.graph.name}: loop IR after fusion, grouped by kernel; "
             "buffers marked 'registers' are never written to memory"]
    for item in cg.scheduler.schedule:
        if isinstance(item, FusedGroup):
            removed = cg.kernels[item.kernel_name].removed
            lines.append(f"\n## {item}")
            for node in item.nodes:
                tag = "   # kept in registers" if node.get_name() in removed else ""
                text = str(node.node).splitlines()
                lines += [text[0] + tag] + text[1:]
        else:
            lines.append(f"\n## extern\n{item.node}")
    live = {n.get_name() for n in cg.scheduler.nodes}
    dead = [b.get_name() for b in cg.graph.buffers if b.get_name() not in live]
    if dead:
        lines.append(f"\n# eliminated as dead code: {', '.join(dead)}")
    return "\n".join(lines) + "\n"


def schedule_text(cg) -> str:
    lines = [f"# {cg.graph.name}: {plural(len(cg.scheduler.nodes), 'node')} before fusion -> "
             f"{plural(len(cg.kernels), 'kernel')} + {plural(len(cg.scheduler.schedule) - len(cg.kernels), 'extern call')}", ""]
    for item in cg.scheduler.schedule:
        if isinstance(item, FusedGroup):
            kernel = cg.kernels[item.kernel_name]
            lines.append(f"{item}  moves {kernel.bytes_moved} bytes")
            lines.append(f"    from {', '.join(kernel.origins) or '(origins not recorded)'}")
            for node in item.nodes:
                lines.append(f"    {node}")
        else:
            lines.append(f"extern: {item.node}")
            lines.append(f"    {item}")
    return "\n".join(lines) + "\n"


def memory_plan_json(cg) -> dict:
    plan = cg.plan
    return {
        "graph": cg.graph.name,
        "peak_bytes": plan.peak_bytes,
        "eager_peak_bytes": eager_peak(cg),
        "steps": [{"index": k, "label": s.label, "allocs": list(s.allocs), "reads": sorted(s.reads),
                   "defines": sorted(s.defines), "frees": plan.frees.get(k, []),
                   "live_bytes": plan.timeline[k]} for k, s in enumerate(plan.steps)],
        "reuse": dict(plan.reuse),
        "lifetimes": {n: list(span) for n, span in plan.lifetimes.items()},
    }


def kernels_cpp(cg) -> str:
    parts = [f"// {cg.graph.name}: the C++ kernels miniinductor generated, with the prelude they are built with.",
             "// Check them with: g++ -std=c++17 -fopenmp -fsyntax-only kernels.cpp", PRELUDE]
    for k in cg.kernels.values():
        if k.language == "cpp":
            parts += [f"// {k.name}: arguments {', '.join(k.args)}"
                      + (f"; kept in registers: {', '.join(sorted(k.removed))}" if k.removed else ""), k.source]
    return "\n".join(parts) + "\n"


def kernels_py(cg) -> str:
    """The Triton kernels, one module after another (each with its imports and launcher)."""
    parts = [f"# {cg.graph.name}: the Triton kernels miniinductor generated, one module each, in order."]
    for k in cg.kernels.values():
        if k.language == "triton":
            parts += ["", "", f"# {'-' * 70} {k.name}: arguments {', '.join(k.args)}"
                      + (f"; kept in registers: {', '.join(sorted(k.removed))}" if k.removed else ""), k.source]
    return "\n".join(parts) + "\n"


def write_trace(compiled_graph, folder, fx_graph_module=None, timings=None) -> Path:
    """Write every artifact of `compiled_graph` into `folder` (created); return its path."""
    cg, folder = compiled_graph, Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    aten = cg.graph.module
    fx_gm = fx_graph_module if fx_graph_module is not None else getattr(cg, "fx_graph_module", None)
    if fx_gm is not None:
        fx_src = graph_module_source(fx_gm, f"Dynamo's FX graph captured for {cg.graph.name}.", "fx_graph.py")
    else:
        fx_src = graph_module_source(aten, f"The FX graph of {cg.graph.name} (Dynamo's graph was not recorded, "
                                     "so this is the ATen graph after AOTAutograd).", "fx_graph.py")
    files = {
        "fx_graph.py": fx_src,
        "aten_graph.py": graph_module_source(aten, f"The ATen graph of {cg.graph.name} (after AOTAutograd and "
                                             "decomposition).", "aten_graph.py"),
        "aten_graph.txt": aten_graph_text(aten),
        "ir_pre_fusion.txt": str(cg.graph) + "\n",
        "ir_post_fusion.txt": ir_post_fusion_text(cg),
        "schedule.txt": schedule_text(cg),
        "fusion_decisions.json": json.dumps({"graph": cg.graph.name, "decisions": [
            dataclasses.asdict(d) for d in cg.scheduler.decisions]}, indent=1) + "\n",
        "memory_plan.txt": f"{cg.graph.name}: eager estimate peak {eager_peak(cg)} bytes\n{cg.plan}\n",
        "memory_plan.json": json.dumps(memory_plan_json(cg), indent=1) + "\n",
        "output_code.py": cg.wrapper_source,
    }
    if cg.graph.sizevars.symbolic:
        files["symbols.txt"] = "\n".join(describe_sizes(cg.graph.sizevars)) + "\n"
    languages = {k.language for k in cg.kernels.values()}
    if "cpp" in languages or not languages:
        files["kernels.cpp"] = kernels_cpp(cg)
    if "triton" in languages:
        files["kernels.py"] = kernels_py(cg)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    render_fusion_graph(cg, folder, "fusion_graph")
    write_report([cg], folder / "report.html", title=f"miniinductor: {cg.graph.name}", timings=timings,
                 fx_graph_modules=[fx_gm])
    return folder


_announced: set[str] = set()


def trace_compiled_graph(compiled_graph, root, fx_graph_module=None) -> Path:
    """The `trace` option's hook: write into `root/<NNN>_<graph name>/`; print root once."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    existing = [int(m.group(1)) for p in root.iterdir() if (m := re.match(r"(\d+)_", p.name))]
    index = max(existing, default=-1) + 1
    folder = write_trace(compiled_graph, root / f"{index:03d}_{compiled_graph.graph.name}", fx_graph_module)
    if str(root) not in _announced:
        _announced.add(str(root))
        print(f"miniinductor: writing compile traces to {root}", file=sys.stderr)
    return folder
