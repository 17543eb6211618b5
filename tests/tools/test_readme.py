"""The README's code is real: its Python blocks run, and the commands it names exist.

All ```python blocks of README.md are executed in order, as one script, in a fresh
subprocess with an empty kernel cache (later blocks may use names from earlier ones,
exactly as a reader pasting them into one session would).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}[ \t]*\n(.*?)^```", text, flags=re.M | re.S)


@pytest.fixture(scope="module")
def readme() -> str:
    assert README.exists(), "README.md is missing"
    return README.read_text()


def _env(cache_dir: Path) -> dict:
    env = dict(os.environ)
    env["MINIINDUCTOR_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def test_readme_python_blocks_run(readme, tmp_path):
    blocks = code_blocks(readme, "python")
    assert blocks, "README.md has no ```python blocks"
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n\n".join(f"# --- README block {k + 1} ---\n{b}" for k, b in enumerate(blocks))
                      + "\nprint('README blocks: all ran')\n")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path / "cache"),
                            capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, (
        f"README python blocks failed (exit {result.returncode}):\n" + "\n".join(output.splitlines()[-60:]))
    assert "README blocks: all ran" in result.stdout


def test_readme_ci_scripts_exist(readme):
    """Every `.ci/...` script the README tells people to run exists and parses as bash."""
    mentioned = sorted(set(re.findall(r"\.ci/[A-Za-z0-9_.-]+", readme)))
    assert ".ci/install" in mentioned, "README should tell people how to install (.ci/install)"
    for rel in mentioned:
        path = ROOT / rel
        assert path.is_file(), f"README mentions {rel}, which does not exist"
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, f"{rel} is not valid bash:\n{check.stderr}"
    install = (ROOT / ".ci/install").read_text()
    assert "pip install" in install, ".ci/install should pip install the package"


def test_readme_shell_commands_exist(readme, tmp_path):
    """The commands in ```bash blocks refer to things that exist: `bash <file>` files,
    and `python -m miniinductor <subcommand>` subcommands (checked with --help)."""
    commands = [c.strip() for b in code_blocks(readme, "bash") for line in b.splitlines()
                for c in line.split("&&") if c.strip() and not c.strip().startswith("#")]
    assert commands, "README has no ```bash blocks"
    for cmd in commands:
        words = cmd.split()
        if words[0] == ".venv/bin/python":          # the environment .ci/install builds
            words[0] = "python"
        if words[0] == "bash":
            assert (ROOT / words[1]).is_file(), f"`{cmd}`: {words[1]} does not exist"
        elif words[:3] == ["python", "-m", "miniinductor"] and len(words) > 3:
            result = subprocess.run([sys.executable, "-m", "miniinductor", words[3], "--help"], cwd=ROOT,
                                    env=_env(tmp_path / "cache"), capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, f"`{cmd} --help` failed:\n{result.stdout}{result.stderr}"
        elif words[:3] == ["python", "-m", "pytest"]:
            assert (ROOT / "tests").is_dir()
