"""The command line, run as users run it: `python -m miniinductor ...` in a subprocess.

Every command and its `--help`, the files `explain` writes, and every kind of mistake:
each must print exactly one line on stderr (no traceback) and exit non-zero. A fresh
process pays seconds for importing torch and Dynamo, so one module-scoped fixture runs
the cases and the tests only read their results: two (`FRESH`) as fresh
`python -m miniinductor` processes, so that whatever importing prints is seen too, and the
others each in a process of its own forked from one runner that paid for the imports once
(`python tests/tools/test_cli.py OUT CASES.json`, the way tests/core/test_training_patterns.py runs
its cases): each child runs `python -m miniinductor`'s own code path (runpy) with its own
stdout, stderr and exit status, a few at a time. The long list of mistakes runs
in-process through `main(argv)`, and a few of them again as real processes.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from forking import fork_each

ROOT = Path(__file__).resolve().parents[2]

USER_FILE = '''
import torch

def f(x, y):
    return torch.relu(x @ y).sum(-1) * 2

def g(x):
    return torch.tanh(x) + x.mean()

def example_inputs():
    return torch.randn(8, 16), torch.randn(16, 4)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.sigmoid(self.lin(x)) * x

broken_value = 3
'''

HELP = {
    "top": ["--help"],
    "demo_help": ["demo", "--help"],
    "explain_help": ["explain", "--help"],
    "accuracy_help": ["accuracy", "--help"],
    "tour_help": ["tour", "--help"],
}
ERRORS = {   # name: (arguments, words the one error line must contain)
    "no_command": ([], ["COMMAND"]),
    "bad_command": (["frobnicate"], ["frobnicate"]),
    "missing_file": (["explain", "{tmp}/nope.py:f"], ["no such file", "nope.py"]),
    "missing_function": (["explain", "{tmp}/user.py:h"], ["has no function 'h'", "f, g"]),
    "not_callable": (["explain", "{tmp}/user.py:broken_value"], ["not callable"]),
    "no_function_named": (["explain", "{tmp}/user.py"], ["path/file.py:function"]),
    "syntax_error": (["explain", "{tmp}/bad.py:f"], ["importing", "SyntaxError"]),
    "no_example_inputs": (["explain", "{tmp}/noinputs.py:f"], ["no example inputs", "--shape"]),
    "unknown_model": (["explain", "gpt3_block"], ["unknown model", "gpt2_block"]),
    "bad_shape": (["explain", "softmax", "--shape", "8,x"], ["bad shape", "8,x"]),
    "wrong_rank": (["explain", "gpt2_block", "--shape", "4,4"], ["3-d"]),
    "bad_option_name": (["explain", "softmax", "-o", "fusoin=false"], ["fusoin", "fusion"]),
    "bad_option_syntax": (["explain", "softmax", "-o", "fusion"], ["KEY=VALUE"]),
    "unknown_flag": (["explain", "softmax", "--frob"], ["--frob"]),
    "bad_dtype": (["explain", "softmax", "--dtype", "float99"], ["dtype", "float99"]),
    "bad_demo_arg": (["demo", "--batch", "two"], ["--batch"]),
    "bad_accuracy_level": (["accuracy", "softmax", "--levels", "fusion,frob"], ["unknown levels", "frob"]),
    "unwritable_report": (["explain", "softmax", "--no-trace", "--report", "/proc/no/such/r.html"],
                          ["cannot create", "/proc/no/such"]),
}
SUBPROCESS_ERRORS = ["no_command", "missing_file", "bad_shape", "bad_option_name"]
FRESH = ["top", "no_command"]   # run as fresh processes; the other cases are forked from one runner
RUNS = {
    "explain_builtin": ["explain", "softmax", "--trace", "{tmp}/trace", "--report", "{tmp}/softmax.html"],
    "explain_file": ["explain", "{tmp}/user.py:f", "--no-trace", "--report", "{tmp}/f.html"],
    "explain_shape_option": ["explain", "{tmp}/user.py:g", "--shape", "4,8", "-o", "fusion=false",
                             "--no-trace", "--report", "{tmp}/g.html"],
    "explain_module_class": ["explain", "{tmp}/user.py:Net", "--shape", "2,16", "--no-trace",
                             "--report", "{tmp}/net.html", "--compare"],
    "demo": ["demo", "--batch", "1", "--seq", "8", "--d-model", "32", "--n-head", "2", "--repeats", "2",
             "--skip-inductor", "--report", "{tmp}/demo/demo.md"],
    "traceback": ["explain", "{tmp}/nope.py:f", "--traceback"],
    "accuracy_clean": ["accuracy", "softmax", "--levels", "none"],
    "accuracy_planted": ["accuracy", "{tmp}/planted.py:h", "--levels", "fallback", "--repro-dir", "{tmp}/repro",
                         "--report", "{tmp}/accuracy.html"],
}
PLANTED_FILE = '''
import torch
from miniinductor.tools.debug.planted_bugs import wrong_lowering

BUG = wrong_lowering(torch.ops.aten.tanh)   # planted for the test: tanh's lowering adds 1
BUG.__enter__()   # (kept in a global: a context manager collected as garbage would undo it)

def h(x):
    return torch.tanh(x) * x.sum(-1, keepdim=True)

def example_inputs():
    return [torch.randn(4, 8, requires_grad=True)]
'''


def cli_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def run_cli(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    return subprocess.run([sys.executable, "-m", "miniinductor", *args], cwd=tmp, env=cli_env(),
                          capture_output=True, text=True, timeout=540)


def write_user_files(tmp: Path) -> Path:
    (tmp / "user.py").write_text(USER_FILE)
    (tmp / "bad.py").write_text("def f(x):\n    return x +\n")
    (tmp / "noinputs.py").write_text("def f(x):\n    return x * 2\n")
    (tmp / "planted.py").write_text(PLANTED_FILE)
    return tmp


def run_forked(out: Path, cases: dict[str, list[str]], workers: int = 3) -> None:
    """The runner: import miniinductor once, then run each case in a child forked from here,
    as `python -m miniinductor ARGS` would (runpy; SystemExit and uncaught exceptions handled
    as the interpreter does), its stdout, stderr and exit status written to OUT/NAME.*."""
    import runpy

    import miniinductor.tools.demo  # noqa: F401  (the imports every child shares; not __main__ itself,
    import miniinductor.tools.tour  # noqa: F401   which each child runs afresh as `python -m` does)

    def child(name, args):
        code = 1
        try:
            for fd, suffix in ((1, "out"), (2, "err")):
                os.dup2(os.open(out / f"{name}.{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            sys.argv = ["miniinductor", *args]
            try:
                runpy.run_module("miniinductor", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            except BaseException:
                sys.excepthook(*sys.exc_info())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    fork_each(cases.items(), child, out, workers)


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """name → CompletedProcess for every subprocess case, and their working folder."""
    tmp = write_user_files(tmp_path_factory.mktemp("cli"))
    out = tmp_path_factory.mktemp("cli_forked")
    cases = {**HELP, **{k: ERRORS[k][0] for k in SUBPROCESS_ERRORS}, **RUNS}
    forked = {name: [a.replace("{tmp}", str(tmp)) for a in args] for name, args in cases.items()
              if name not in FRESH}
    (out / "cases.json").write_text(json.dumps(forked))
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(FRESH) + 1) as pool:
        fresh = {name: pool.submit(run_cli, cases[name], tmp) for name in FRESH}
        runner = pool.submit(subprocess.run, [sys.executable, __file__, str(out), str(out / "cases.json")],
                             cwd=tmp, env=cli_env(), capture_output=True, text=True, timeout=540).result()
        results = {name: f.result() for name, f in fresh.items()}
    for name, args in forked.items():
        files = {suffix: out / f"{name}.{suffix}" for suffix in ("exit", "out", "err")}
        text = {k: p.read_text() if p.exists() else "" for k, p in files.items()}
        results[name] = subprocess.CompletedProcess(
            args, int(text["exit"]) if text["exit"] else None, text["out"],
            text["err"] + ("" if text["exit"] else f"\n--- runner (exit {runner.returncode})\n"
                           f"{runner.stdout[-2000:]}{runner.stderr[-3000:]}"))
    return results, tmp


def show(result) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("name", HELP)
def test_help(cli, name):
    result = cli[0][name]
    assert result.returncode == 0, show(result)
    assert result.stdout.startswith("usage: miniinductor"), show(result)
    expected = {"top": ["demo", "tour", "explain", "accuracy"], "demo_help": ["--skip-inductor", "--html"],
                "tour_help": ["--trace", "--lines", "--inductor", "FX graph", "memory plan"],
                "explain_help": ["--trace", "--report", "--shape", "--option", "gpt2_block", "example_inputs()"],
                "accuracy_help": ["--no-backward", "--rtol", "--atol", "--levels", "--repro-dir", "--report",
                                  "gpt2_block", "example_inputs()"]}
    for word in expected[name]:
        assert word in result.stdout, f"{word!r} missing from --help:\n{result.stdout}"


def check_one_line(name: str, returncode: int, stderr: str, detail: str):
    assert returncode not in (0, None), detail
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr:\n{detail}"
    assert "Traceback" not in stderr and "error" in lines[0]
    for word in ERRORS[name][1]:
        assert word in lines[0], f"{word!r} missing from {lines[0]!r}"


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_one_line(name, tmp_path, capsys, monkeypatch):
    """In-process: `main(argv)` returns (or exits with) non-zero after one stderr line."""
    from miniinductor.tools.cli import main
    monkeypatch.chdir(write_user_files(tmp_path))
    try:
        code = main([a.replace("{tmp}", str(tmp_path)) for a in ERRORS[name][0]])
    except SystemExit as exc:   # argparse's own errors
        code = exc.code
    captured = capsys.readouterr()
    check_one_line(name, code, captured.err, f"exit {code}\n{captured.out}\n{captured.err}")


@pytest.mark.parametrize("name", SUBPROCESS_ERRORS)
def test_errors_in_a_real_process(cli, name):
    result = cli[0][name]
    assert result.returncode == 2, show(result)
    check_one_line(name, result.returncode, result.stderr, show(result))


def test_traceback_flag_shows_the_traceback(cli):
    result = cli[0]["traceback"]
    assert result.returncode != 0 and "Traceback" in result.stderr, show(result)


def test_explain_builtin_writes_trace_and_report(cli):
    result, tmp = cli[0]["explain_builtin"], cli[1]
    assert result.returncode == 0, show(result)
    kernel = "cpp_fused_amax_div_exp_sub_sum_0"   # softmax, decomposed, in one kernel
    assert kernel in result.stdout and "fusion:" in result.stdout and "max abs error" in result.stdout
    graphs = sorted((tmp / "trace").iterdir())
    assert graphs, show(result)
    decisions = json.loads((graphs[0] / "fusion_decisions.json").read_text())
    assert decisions["decisions"], "softmax's buffers should have been considered for fusion"
    compile((graphs[0] / "output_code.py").read_text(), "output_code.py", "exec")
    page = (tmp / "softmax.html").read_text()
    assert 'id="summary"' in page and kernel in page


def test_explain_user_function(cli):
    result, tmp = cli[0]["explain_file"], cli[1]
    assert result.returncode == 0, show(result)
    assert "explain f:" in result.stdout and "[8, 16], [16, 4]" in result.stdout   # example_inputs()
    assert "max abs error vs eager: 0" in result.stdout
    assert (tmp / "f.html").stat().st_size > 0


def test_explain_shape_and_option(cli):
    result = cli[0]["explain_shape_option"]
    assert result.returncode == 0, show(result)
    assert "[4, 8]" in result.stdout
    assert "fusion: 0 pairs fused" in result.stdout   # -o fusion=false reached the compiler


def test_explain_module_class_with_compare(cli):
    result, tmp = cli[0]["explain_module_class"], cli[1]
    assert result.returncode == 0, show(result)
    for backend in ("eager", "miniinductor", "inductor"):
        assert backend in result.stdout
    assert "median ms" in (tmp / "net.html").read_text()


def test_demo(cli):
    """The demo says what was fused (each kernel and its ATen ops, every fusion decision) on the
    console and in the markdown report, and `--report PATH` puts the HTML report beside PATH."""
    result, tmp = cli[0]["demo"], cli[1]
    assert result.returncode == 0, show(result)
    assert "correctness vs eager:   PASS" in result.stdout and "skipped" in result.stdout
    markdown = (tmp / "demo" / "demo.md").read_text()
    assert "**PASS**" in markdown
    assert "median ms" in (tmp / "demo" / "demo.html").read_text()
    assert not (tmp / "miniinductor_report.html").exists(), "the HTML report belongs beside --report"
    for text in (result.stdout, markdown):
        assert re.search(r"^  \w+: buf\d+.* <- .*\bgelu\b", text, flags=re.M), "a kernel with its ATen ops"
        assert re.search(r"^fusion: \d+ pairs? fused", text, flags=re.M), text
        assert re.search(r"^  \S+ \+ \S+: (not )?fused \(", text, flags=re.M), "one line per decision"
        assert str(tmp / "demo" / "demo.html") in text, "where the HTML report is"


def test_accuracy_clean_builtin(cli):
    result = cli[0]["accuracy_clean"]
    assert result.returncode == 0, show(result)
    assert "no buffer departs: clean" in result.stdout, show(result)


def test_accuracy_names_the_planted_bug(cli):
    """A file that plants a wrong tanh lowering: exit 1, the buffer, kernel and op named,
    the fallback rerun confirms it, and the repro script and report are written."""
    result, tmp = cli[0]["accuracy_planted"], cli[1]
    assert result.returncode == 1, show(result)
    out = result.stdout
    assert "first bad buffer: forward.buf" in out and "the IR departs from ATen" in out, show(result)
    assert "(aten.tanh.default)" in out and "confirmed" in out, show(result)
    assert 'extern "C" void cpp_fused_' in out, "the kernel's source is printed"
    assert list((tmp / "repro").glob("repro_forward_cpp_fused_*.py")), show(result)
    assert "max error per buffer" in (tmp / "accuracy.html").read_text()


@pytest.fixture(scope="module")
def demo_then_explain(tmp_path_factory):
    """In one fresh folder, with the default file names: the demo (default model and shape),
    then `explain gpt2_block`. (stdout of each, the folder.)"""
    import contextlib
    import io

    from miniinductor.tools.cli import main
    tmp = tmp_path_factory.mktemp("first_contact")
    outs = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        for name, argv in (("demo", ["demo", "--skip-inductor", "--repeats", "1"]),
                           ("explain", ["explain", "gpt2_block"])):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                code = main(argv)
            outs[name] = out.getvalue()
            assert code == 0, outs[name]
    return outs, tmp


def test_demo_and_explain_name_the_kernels_alike(demo_then_explain):
    """`explain gpt2_block` compiles the demo's block at the demo's shape: the same kernels
    under the same names (those the generated code defines), and a readable fusion summary."""
    outs, _ = demo_then_explain
    kernels = {name: re.findall(r"^  (\w+): buf\d+", out, flags=re.M) for name, out in outs.items()}
    assert kernels["demo"] and kernels["demo"] == kernels["explain"], kernels
    for out in outs.values():
        summary = re.search(r"^  fused: (.*)$", out, flags=re.M)
        assert summary and re.fullmatch(r"\d+ [a-z][^,]*(, \d+ [a-z][^,]*)*", summary.group(1)), out


def test_explain_leaves_the_demo_report_alone(demo_then_explain):
    """explain's default report has a name of its own: the demo's stays as the demo wrote it."""
    _, tmp = demo_then_explain
    assert "miniinductor demo: GPT-2 block" in (tmp / "miniinductor_report.html").read_text()
    assert "# miniinductor demo report" in (tmp / "miniinductor_report.md").read_text()
    assert "miniinductor explain: gpt2_block" in (tmp / "miniinductor_explain.html").read_text()


def test_default_outputs_are_git_ignored(demo_then_explain):
    """Whatever demo, explain and tour write into the working folder by default is in .gitignore."""
    import shutil

    from miniinductor.tools.cli import build_parser
    _, tmp = demo_then_explain
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    written = sorted(p.name + ("/" if p.is_dir() else "") for p in tmp.iterdir())
    written.append(f"{build_parser().parse_args(['tour']).trace}/")
    assert {"miniinductor_report.md", "miniinductor_explain.html", "miniinductor_tour/"} <= set(written)
    for name in written:
        probe = name + "x" if name.endswith("/") else name   # a file inside a folder
        result = subprocess.run(["git", "check-ignore", "--no-index", "-q", probe], cwd=ROOT)
        assert result.returncode == 0, f"{name} (written by the CLI by default) is not in .gitignore"


if __name__ == "__main__":   # the runner the `cli` fixture starts: OUT CASES.json
    run_forked(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()))
