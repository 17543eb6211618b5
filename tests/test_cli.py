"""The command line, run as users run it: `python -m miniinductor ...` in a subprocess.

Every command and its `--help`, the files `explain` writes, and every kind of mistake:
each must print exactly one line on stderr (no traceback) and exit non-zero. Each
process pays for importing torch (seconds), so the subprocess cases start together (a
few at a time) in one module-scoped fixture and the tests only read their results; the
long list of mistakes runs in-process through `main(argv)`, and a few of them again as
real processes.
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

ROOT = Path(__file__).resolve().parent.parent

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
from miniinductor.debug.planted_bugs import wrong_lowering

BUG = wrong_lowering(torch.ops.aten.tanh)   # planted for the test: tanh's lowering adds 1
BUG.__enter__()   # (kept in a global: a context manager collected as garbage would undo it)

def h(x):
    return torch.tanh(x) * x.sum(-1, keepdim=True)

def example_inputs():
    return [torch.randn(4, 8, requires_grad=True)]
'''


def run_cli(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    args = [a.replace("{tmp}", str(tmp)) for a in args]
    return subprocess.run([sys.executable, "-m", "miniinductor", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=600)


def write_user_files(tmp: Path) -> Path:
    (tmp / "user.py").write_text(USER_FILE)
    (tmp / "bad.py").write_text("def f(x):\n    return x +\n")
    (tmp / "noinputs.py").write_text("def f(x):\n    return x * 2\n")
    (tmp / "planted.py").write_text(PLANTED_FILE)
    return tmp


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """name → CompletedProcess for every subprocess case, and their working folder."""
    tmp = write_user_files(tmp_path_factory.mktemp("cli"))
    cases = {**HELP, **{k: ERRORS[k][0] for k in SUBPROCESS_ERRORS}, **RUNS}
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run_cli, args, tmp) for name, args in cases.items()}
        return {name: f.result() for name, f in futures.items()}, tmp


def show(result) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("name", HELP)
def test_help(cli, name):
    result = cli[0][name]
    assert result.returncode == 0, show(result)
    assert result.stdout.startswith("usage: miniinductor"), show(result)
    expected = {"top": ["demo", "explain", "accuracy"], "demo_help": ["--skip-inductor", "--html"],
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
    from miniinductor.__main__ import main
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
    assert "kernel0" in result.stdout and "fusion:" in result.stdout and "max abs error" in result.stdout
    graphs = sorted((tmp / "trace").iterdir())
    assert graphs, show(result)
    decisions = json.loads((graphs[0] / "fusion_decisions.json").read_text())
    assert decisions["decisions"], "softmax's buffers should have been considered for fusion"
    compile((graphs[0] / "output_code.py").read_text(), "output_code.py", "exec")
    page = (tmp / "softmax.html").read_text()
    assert 'id="summary"' in page and "kernel0" in page


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
    assert 'extern "C" void kernel' in out, "the kernel's source is printed"
    assert list((tmp / "repro").glob("repro_forward_kernel*.py")), show(result)
    assert "max error per buffer" in (tmp / "accuracy.html").read_text()
