"""The standalone script `debug_accuracy` writes for a bad buffer's kernel (`repro_dir=`).

It reruns that one kernel, alone, on its inputs' saved values and compares each output with
the IR interpreter's value on the same inputs: what one attaches to a bug report. The
script and its .pt file go only where the caller asks. Inductor's nearest twin is the
repro script of its minifier (`torch/_dynamo/repro/after_aot.py`), which reruns a graph.
"""
from __future__ import annotations

from pathlib import Path

import torch


def write_repro(cg, kname, values, folder, rtol: float, atol: float) -> Path:
    """A script (and a .pt file) that reruns kernel `kname` alone on its saved inputs and
    prints each output's largest error against the IR interpreter's value."""
    kernel = cg.kernels[kname]
    source, arg_names, inplace = kernel.source, kernel.args, kernel.inplace
    group = next(g for g in cg.fused_groups() if g.kernel_name == kname)
    outs = [n for n in group.get_names() if n in values["kernel"]]
    inputs = {n: values["kernel"].get(n, values["ir"].get(n)) for n in arg_names if n not in outs}
    inputs.update((n, t) for n, t in zip(cg.graph.graph_input_names, values["args"]) if n in arg_names)
    inputs.update((n, t) for n, t in cg.graph.constants.items() if n in arg_names)
    expected = {n: values["ir"][n] for n in outs}
    layouts = {n: (tuple(t.shape), tuple(t.stride()), t.dtype) for n, t in expected.items() if n not in inplace}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{cg.graph.name}_{kname}.pt"
    torch.save({"inputs": {n: t.cpu() for n, t in inputs.items()},
                "expected": {n: t.cpu() for n, t in expected.items()}}, data)
    device = cg.graph.current_device()
    if kernel.language == "cpp":
        load = (f"kernel = load_kernels(SOURCE, [{kname!r}], cxx={cg.graph.config.cxx!r})[{kname!r}]\n"
                "kernel(*[c_void_p(buffers[n].data_ptr()) for n in ARGS])")
    else:
        load = (f"kernel = load_module(SOURCE, interpret={device.type == 'cpu'}).launch_{kname}\n"
                "kernel(*[buffers[n] for n in ARGS])")
    script = folder / f"repro_{cg.graph.name}_{kname}.py"
    script.write_text(f'''"""Reruns kernel {kname} of graph {cg.graph.name} alone (written by miniinductor.debug_accuracy).
Expected values are the IR interpreter's on the same inputs. Exit status 1 if an output departs
by more than atol + rtol * |expected| (atol={atol}, rtol={rtol})."""
import sys
from ctypes import c_void_p
from pathlib import Path
import torch
from miniinductor.runtime.cpp_builder import load_kernels
from miniinductor.runtime.triton_runtime import load_module

SOURCE = r\'\'\'
{source}
\'\'\'
ARGS = {list(arg_names)!r}
INPLACE = {inplace!r}   # output → the input whose memory it is written over
LAYOUTS = {layouts!r}
data = torch.load(Path(__file__).with_name({data.name!r}))
device = torch.device({str(device)!r})
buffers = {{n: t.to(device) for n, t in data["inputs"].items()}}
for name, (size, stride, dtype) in LAYOUTS.items():
    buffers[name] = torch.empty_strided(size, stride, dtype=dtype, device=device)
{load}
if device.type == "cuda":
    torch.cuda.synchronize()
bad = False
for name, expected in data["expected"].items():
    got, expected = buffers[INPLACE.get(name, name)].cpu().double(), expected.double()
    diff = torch.where(got == expected, 0.0, (got - expected).abs()).nan_to_num(nan=float("inf"))
    print(f"{{name}}: max abs error {{diff.max().item() if diff.numel() else 0.0:.3g}}")
    bad = bad or bool((diff > {atol} + {rtol} * expected.abs()).any())
sys.exit(1 if bad else 0)
''')
    return script
