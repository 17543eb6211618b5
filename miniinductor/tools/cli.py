"""Command-line entry point: ``python -m miniinductor <command>`` (or ``miniinductor``).

Commands:
  demo     compile a GPT-2 block with miniinductor, check it against eager and
           Inductor, print kernels/fallbacks/timings and write a markdown + HTML report.
  tour     one small model through every phase (FX graph, ATen graph, loop IR, fused
           groups, kernels, wrapper, memory plan, timings), each artifact explained.
  explain  compile a built-in model (``gpt2_block``, ``mlp``, ...) or a function of your
           own (``path/file.py:function``), print its kernels and fusion decisions, and
           write the trace folder and the HTML report.
  passes   every pass in order, its stage and extension, and whether it runs under
           the given options (``--options '{"extensions": []}'``, ``--preset core``).
  fallbacks  the census of a model's ATen calls (fallbacks and externs by design, forward
           and backward); ``--compare-inductor``: our lowering and decomposition tables vs Inductor's.
  lines    line counts: the core path against its budget, the Triton backend, each
           extension, the tools; the largest file and the longest function.
  accuracy the same targets through ``miniinductor.debug_accuracy``: forward and backward,
           every buffer checked; prints the first wrong buffer and its kernel, or, if none departs
           while the results differ from eager, where the error comes from (a wrong
           decomposition...); exit 1 unless clean.

Mistakes (a bad path, a missing function, an unknown option) print one line on stderr
and exit with status 2; ``--traceback`` shows the full Python traceback instead.
Real Inductor has no CLI of its own; its nearest tools are ``TORCH_COMPILE_DEBUG=1``
and ``tlparse``.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import sys
from pathlib import Path

import torch

import miniinductor
from miniinductor import passes
from miniinductor.codegen.policy import policy_for
from miniinductor.config import EXTENSIONS, Config
from miniinductor.tools import demo, exercises, fallbacks, linecount, tour
from miniinductor.tools.debug.compare import compare, max_abs_error
from miniinductor.tools.debug.explain import decision_lines, kernel_lines
from miniinductor.tools.debug.provenance import provenance_lines
from miniinductor.tools.models import MLP, GPT2Block
from miniinductor.tools.zoo import ZOO

from ..logs import plural


class CLIError(Exception):
    """A user mistake: reported as one line, without a traceback."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (not usage text + error) and exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --------------------------------------------------------------------------- built-in models
def _one_shape(name, shapes, default):
    if not shapes:
        return default
    if len(shapes) != 1:
        raise CLIError(f"built-in model {name!r} takes one input; got {len(shapes)} --shape flags")
    return shapes[0]


def _gpt2_block(shapes, randn):
    # default: the demo's block and input, so that both print the same kernels, same names
    B, T, C = _need_rank("gpt2_block", _one_shape("gpt2_block", shapes, demo.DEFAULT_SHAPE), 3)
    heads = demo.DEFAULT_HEADS if C % demo.DEFAULT_HEADS == 0 else 1
    return GPT2Block(C, heads, max_seq=T).eval(), [randn(B, T, C)]


def _mlp(shapes, randn):
    shape = _one_shape("mlp", shapes, (8, 64))
    return MLP([shape[-1], 128, 10]).eval(), [randn(*shape)]


def _layer_norm(shapes, randn):
    shape = _one_shape("layer_norm", shapes, (32, 64))
    return torch.nn.LayerNorm(shape[-1]), [randn(*shape)]


def softmax(x):
    return torch.softmax(x, dim=-1)


def pointwise(x):
    return torch.tanh(x) * torch.sigmoid(x) + 1.0


BUILTINS = {
    "gpt2_block": ("a GPT-2 transformer block, input [B, T, C] (default "
                   f"{','.join(map(str, demo.DEFAULT_SHAPE))}, the demo's)", _gpt2_block),
    "mlp": ("Linear-ReLU-Linear, input [N, C] (default 8,64)", _mlp),
    "layer_norm": ("nn.LayerNorm over the last dim, input (default 32,64)", _layer_norm),
    "softmax": ("softmax over the last dim, input (default 32,64)",
                lambda shapes, randn: (softmax, [randn(*_one_shape("softmax", shapes, (32, 64)))])),
    "pointwise": ("tanh(x) * sigmoid(x) + 1, input (default 1024)",
                  lambda shapes, randn: (pointwise, [randn(*_one_shape("pointwise", shapes, (1024,)))])),
}


def _zoo_model(name):
    """The zoo's model `name` in eval mode, with the inputs the zoo makes at its config."""
    def build(shapes, randn):
        if shapes:
            raise CLIError(f"zoo model {name!r} makes its own inputs (config {ZOO[name].config}); --shape is not taken")
        entry, probe = ZOO[name], randn(0)
        args, _ = entry.make_inputs(dict(entry.config), torch.Generator().manual_seed(0))
        inputs = [a.to(probe.device, probe.dtype if a.is_floating_point() else a.dtype) for a in args]
        return entry.make_model(dict(entry.config)).eval(), inputs
    return build


BUILTINS.update({name: (f"the zoo's {name} (miniinductor/tools/zoo), forward only, at its config", _zoo_model(name))
                 for name in ZOO})


def _need_rank(name, shape, rank):
    if len(shape) != rank:
        raise CLIError(f"built-in model {name!r} needs a {rank}-d --shape; got {','.join(map(str, shape))}")
    return shape


# --------------------------------------------------------------------------- parsing helpers
def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(s < 0 for s in shape):
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: expected sizes separated by commas, like 8,64")
    return shape


def parse_option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"bad option {text!r}: expected KEY=VALUE, like fusion=false")
    lowered = value.lower()
    if lowered in ("true", "false"):
        return key, lowered == "true"
    if lowered == "none":
        return key, None
    for convert in (int, float):
        try:
            return key, convert(value)
        except ValueError:
            pass
    return key, value


def load_user_function(target: str):
    """`path/file.py:function` → (the callable, the module it came from)."""
    path_text, _, name = target.rpartition(":")
    if not path_text or not name:
        raise CLIError(f"{target!r}: say which function to compile, as path/file.py:function")
    path = Path(path_text)
    if not path.is_file():
        raise CLIError(f"no such file: {path}")
    spec = importlib.util.spec_from_file_location(f"miniinductor_user_{path.stem}", path)
    if spec is None:
        raise CLIError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))   # its own imports of neighbouring files work
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise CLIError(f"importing {path} failed: {_one_line(exc)}") from exc
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        defined = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                   and getattr(v, "__module__", None) == module.__name__]
        close = difflib.get_close_matches(name, defined, n=3)
        hint = (f"; did you mean {', '.join(close)}?" if close
                else f" (it defines: {', '.join(defined) or 'nothing'})")
        raise CLIError(f"{path} has no function {name!r}{hint}")
    fn = getattr(module, name)
    if isinstance(fn, type):
        if not issubclass(fn, torch.nn.Module):
            raise CLIError(f"{path}:{name} is a class but not a torch.nn.Module")
        try:
            fn = fn().eval()    # an nn.Module class with a no-argument constructor
        except Exception as exc:
            raise CLIError(f"constructing {name}() failed: {_one_line(exc)}") from exc
    if not callable(fn):
        raise CLIError(f"{path}:{name} is not callable")
    return fn, module


def _one_line(exc: BaseException) -> str:
    exc = getattr(exc, "inner_exception", None) or exc
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def resolve_target(args):
    """(name, fn, example inputs) for a built-in model name or a user file."""
    try:
        dtype = getattr(torch, args.dtype)
        torch.empty(0, dtype=dtype)
    except (AttributeError, TypeError):
        raise CLIError(f"unknown dtype {args.dtype!r} (e.g. float32, float64, bfloat16)") from None
    try:
        device = torch.device(args.device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:
        raise CLIError(f"device {args.device!r} is not usable: {_one_line(exc)}") from None
    torch.manual_seed(args.seed)

    def randn(*shape):
        return torch.randn(*shape, dtype=dtype, device=device)

    def to_device(fn):
        return fn.to(device=device, dtype=dtype) if isinstance(fn, torch.nn.Module) else fn

    target = args.target
    if target in BUILTINS:
        fn, inputs = BUILTINS[target][1](args.shape, randn)
        return target, to_device(fn), inputs
    if ":" not in target and not target.endswith(".py"):
        close = difflib.get_close_matches(target, BUILTINS, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise CLIError(f"unknown model {target!r}: {hint}built-in models are {', '.join(BUILTINS)}; "
                       "or give path/file.py:function")
    fn, module = load_user_function(target)
    name = target.rpartition(":")[2]
    if args.shape:
        inputs = [randn(*s) for s in args.shape]
    elif callable(getattr(module, "example_inputs", None)):
        try:
            inputs = module.example_inputs()
        except Exception as exc:
            raise CLIError(f"example_inputs() in {module.__file__} failed: {_one_line(exc)}") from exc
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    else:
        raise CLIError(f"no example inputs for {name}: define example_inputs() in "
                       f"{target.rpartition(':')[0]} or pass --shape (e.g. --shape 8,64 per input)")
    return name, to_device(fn), inputs


# --------------------------------------------------------------------------- explain
def print_summary(name, inputs, result, error: float) -> None:
    shapes = ", ".join(str(list(x.shape)) for x in inputs if hasattr(x, "shape"))
    print(f"miniinductor explain {name}: {plural(len(result.graphs), 'graph')}, inputs {shapes}")
    print("\n".join(kernel_lines(result) + decision_lines(result.decisions)))
    print(f"max abs error vs eager: {error:.3e}")


def print_provenance(result) -> None:
    """`explain --provenance`: each kernel's user source lines (provenance.py)."""
    print("provenance: the user source lines (file:line) each kernel came from")
    print("\n".join(provenance_lines(result.graphs)))


def explain_command(args) -> int:
    name, fn, inputs = resolve_target(args)
    for out in ([] if args.no_trace else [Path(args.trace)]) + [Path(args.report).parent]:
        try:   # fail before compiling, not after
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CLIError(f"cannot create folder {out}: {exc.strerror or exc}") from None
    options = {"pass_snapshots": True, **dict(args.option or [])}   # the report's pass viewer
    try:
        miniinductor.compile(fn, **options)   # checks the options; compiles nothing yet
    except (ValueError, TypeError) as exc:
        raise CLIError((str(exc).strip().splitlines() or [repr(exc)])[0]) from None
    with torch.no_grad():
        try:
            expected = fn(*inputs)
        except Exception as exc:
            raise CLIError(f"running {name} eagerly failed: {_one_line(exc)}") from exc
        try:
            if args.compare:
                comparison = compare(fn, *inputs, **options)
                if comparison["miniinductor"].error:
                    raise RuntimeError(comparison["miniinductor"].error)
                result, timings = comparison.explain, comparison.timings()
            else:
                result, timings = miniinductor.explain(fn, *inputs, **options), None
        except Exception as exc:
            raise CLIError(f"compiling {name} failed: {_one_line(exc)} (--traceback shows where)") from exc

    print_summary(name, inputs, result, max_abs_error(result.outputs, expected))
    if args.provenance:
        print_provenance(result)
    if args.compare:
        print(comparison)
    try:
        if not args.no_trace:
            folders = result.write_trace(args.trace)
            print(f"trace folder: {Path(args.trace).resolve()} ({', '.join(p.name for p in folders)})")
        report = result.write_report(args.report, title=f"miniinductor explain: {name}", timings=timings)
    except OSError as exc:
        raise CLIError(f"cannot write {exc.filename or 'output'}: {exc.strerror or exc}") from exc
    print(f"report: {Path(report).resolve()}")
    return 0


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """What explain and accuracy share: the model, its inputs, options."""
    parser.add_argument("target", metavar="MODEL",
                        help="a built-in model (" + ", ".join(BUILTINS) + ") or path/file.py:function")
    parser.add_argument("--shape", type=parse_shape, action="append", metavar="N,M,...",
                        help="shape of one random input (repeat for more inputs); overrides example_inputs()")
    parser.add_argument("--dtype", default="float32",
                        help="dtype of --shape inputs and built-in models (default float32)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--seed", type=int, default=0, help="random seed for inputs and weights (default 0)")
    parser.add_argument("-o", "--option", type=parse_option, action="append", metavar="KEY=VALUE",
                        help="a miniinductor option, e.g. -o fusion=false (repeatable)")
    parser.add_argument("--traceback", action="store_true", help="show the Python traceback of an error")


#: explain's default report: a name of its own, so that it never overwrites the demo's
#: miniinductor_report.html
EXPLAIN_REPORT = "miniinductor_explain.html"


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--trace", default="miniinductor_trace", metavar="DIR",
                        help="trace folder to write (default ./miniinductor_trace)")
    parser.add_argument("--no-trace", action="store_true", help="do not write the trace folder")
    parser.add_argument("--report", default=EXPLAIN_REPORT, metavar="FILE",
                        help=f"HTML report to write (default ./{EXPLAIN_REPORT}; the demo's is "
                             "./miniinductor_report.html)")
    parser.add_argument("--compare", action="store_true",
                        help="also run eager and real Inductor; their table goes into the report")
    parser.add_argument("--provenance", action="store_true",
                        help="print, per kernel, the user source lines (file:line) it came from")


EXPLAIN_EPILOG = "built-in models:\n" + "\n".join(f"  {k:12s} {v[0]}" for k, v in BUILTINS.items()) + """

a file of your own:
  miniinductor explain path/model.py:forward       # inputs from example_inputs() in model.py
  miniinductor explain path/ops.py:f --shape 8,64 --shape 64  # two random inputs
"""


# --------------------------------------------------------------------------- accuracy
def accuracy_command(args) -> int:
    name, fn, inputs = resolve_target(args)
    if args.shape and not args.no_backward:   # random --shape inputs: their gradients are checked too
        inputs = [x.requires_grad_() if x.is_floating_point() else x for x in inputs]
    options = ({"pass_snapshots": True} if args.report else {}) | dict(args.option or [])   # the report's pass viewer
    levels = [lv for lv in args.levels.split(",") if lv] if args.levels != "none" else []
    try:
        report = miniinductor.debug_accuracy(fn, *inputs, backward=not args.no_backward, rtol=args.rtol,
                                             atol=args.atol, levels=levels, repro_dir=args.repro_dir,
                                             seed=args.seed, **options)
    except ValueError as exc:
        raise CLIError((str(exc).strip().splitlines() or [repr(exc)])[0]) from None
    except Exception as exc:
        raise CLIError(f"checking {name} failed: {_one_line(exc)} (--traceback shows where)") from exc
    print(f"miniinductor accuracy {name}:")
    print(report)
    if report.culprit is not None:
        print(f"kernel {report.culprit.kernel} source:\n{report.kernel_source or '(an extern ATen call)'}")
    if args.report:
        print(f"report: {Path(report.write_report(args.report)).resolve()}")
    return 0 if report.clean else 1


def add_accuracy_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--no-backward", action="store_true", help="check the forward graph only")
    parser.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance per element (default 1e-4)")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance per element (default 1e-5)")
    parser.add_argument("--levels", default="fusion,fallback,float64,decomposition", metavar="L1,L2",
                        help="reruns on the wrong buffer (fusion, fallback, float64) and, when the results "
                             "differ from eager, decomposition (the decomposed graph run eagerly); "
                             "or none (default: all)")
    parser.add_argument("--repro-dir", metavar="DIR",
                        help="write a script rerunning the wrong buffer's kernel here (default: none written)")
    parser.add_argument("--report", metavar="FILE", help="also write the HTML report, with a per-buffer error column")


# --------------------------------------------------------------------------- the parser
def passes_command(args) -> int:
    """Print every pass of the pipeline (passes.py) in order: its stage, the extension that
    registered it ("core" and "triton" are always on), and whether it runs for a graph on
    --device under --options / --preset. Each extension and its options are listed after."""
    try:
        options = json.loads(args.options)
        config = Config.build(None, options, args.preset)
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc)) from None
    device = torch.device(args.device)
    ctx = passes.Context(config, policy_for(device, config), device)
    print(passes.describe(ctx))
    print()
    print(f"{'extension':11s} on   what it does [its options]")
    for name, (doc, option_names) in sorted(EXTENSIONS.items()):
        on = "yes" if config.uses(name) else "no "
        print(f"{name:11s} {on}  {doc}" + (f" [{', '.join(option_names)}]" if option_names else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="miniinductor",
                    description="miniinductor: an educational reimplementation of TorchInductor.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo_parser = sub.add_parser(
        "demo", help="compile a GPT-2 block and compare with eager and Inductor",
        description=demo.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.main)

    tour_parser = sub.add_parser(
        "tour", help="one small model through every phase, each artifact explained",
        description=tour.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    tour.add_arguments(tour_parser)
    tour_parser.set_defaults(handler=tour.main)

    explain_parser = sub.add_parser(
        "explain", help="compile a model or function; print kernels and write the trace and report",
        description="Compile MODEL once with miniinductor (inference, under torch.no_grad()), print its "
                    "kernels and fusion decisions, and write the trace folder and the HTML report.",
        epilog=EXPLAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_explain_arguments(explain_parser)
    explain_parser.set_defaults(handler=explain_command)

    accuracy_parser = sub.add_parser(
        "accuracy", help="find the buffer and kernel behind a wrong output or gradient",
        description="Compile MODEL with miniinductor, run it forward and backward (fixed random output "
                    "gradients), compare every buffer's kernel value with the IR interpreter and with "
                    "eager ATen, and print the first buffer that departs: its kernel, ATen nodes, fused "
                    "group, error, the reruns' verdicts and (with --repro-dir) a script reproducing the kernel. "
                    "When no buffer departs but the results differ from eager, it runs the decomposed "
                    "ATen graph eagerly to tell a wrong decomposition. Exit status 1 unless clean.",
        epilog=EXPLAIN_EPILOG.replace("explain", "accuracy"), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_accuracy_arguments(accuracy_parser)
    accuracy_parser.set_defaults(handler=accuracy_command)

    passes_parser = sub.add_parser(
        "passes", help="every pass in order: its stage, its extension, and whether it runs under the options",
        description=passes_command.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    passes_parser.add_argument("--options", default="{}", metavar="JSON",
                               help='options as JSON, e.g. \'{"extensions": []}\' (default: none)')
    passes_parser.add_argument("--preset", default=None, help="a named preset, e.g. core")
    passes_parser.add_argument("--device", default="cpu", help="the device whose backend policy decides (cpu, cuda)")
    passes_parser.set_defaults(handler=passes_command)

    lines_parser = sub.add_parser("lines", help="line counts: the core path against its budget, the backend, "
                                  "each extension, the tools", description=linecount.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    lines_parser.set_defaults(handler=linecount.main)

    fallbacks.add_arguments(sub.add_parser("fallbacks", help="the ops a model runs as ATen calls, and why",
                                           description=fallbacks.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter))

    exercise_parser = sub.add_parser("exercise", help="graded exercises: list | run N [--solution] | check-all",
                                     description=exercises.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    exercises.add_arguments(exercise_parser)
    exercise_parser.set_defaults(handler=exercises.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except CLIError as exc:
        if getattr(args, "traceback", False):
            raise
        print(f"miniinductor {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
