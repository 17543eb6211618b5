"""MkDocs hooks: pages written from the code at build time, so they cannot go stale.

Listed under `hooks:` in mkdocs.yml. Generated (never stored in docs/):

  reference/config.md    the `Config` dataclass: every field, its default and the
                         docstring under it; modes, presets, log switches
  reference/modules.md   every module under miniinductor/, its `torch/_inductor`
                         counterpart and what it simplifies (from module docstrings)
  reference/cli.md       `--help` of every command of `python -m miniinductor`
  tutorials/*.md         tutorials/NN_*.py (percent format) as pages: markdown cells
                         become markdown, code cells ```python blocks

The nav's "Tutorials" entry is filled in here too (one page per tutorial file).
"""
from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "miniinductor"
TUTORIALS = ROOT / "tutorials"
COUNTERPART = re.compile(r"torch[/.]_[a-z]+[\w./]*[\w]|TORCH_[A-Z_]+|tlparse")

if str(ROOT) not in sys.path:            # document this checkout, not some other install
    sys.path.insert(0, str(ROOT))


def tutorial_files() -> list[Path]:
    return sorted(TUTORIALS.glob("[0-9][0-9]_*.py"))


def tutorial_title(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return path.stem


# --------------------------------------------------------------------------- tutorials
def tutorial_markdown(path: Path) -> str:
    """Percent-format script → markdown: `# %% [markdown]` cells lose their `# `, code
    cells (`# %%`) become fenced python blocks; links to sibling tutorials follow."""
    cells, kind, lines = [], None, []
    for line in path.read_text().splitlines() + ["# %%"]:
        if line.startswith("# %%"):
            if kind is not None:
                cells.append((kind, lines))
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind == "markdown":
            lines.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
        elif kind is not None:
            lines.append(line)
    out = []
    for kind, lines in cells:
        text = "\n".join(lines).strip("\n")
        if not text.strip():
            continue
        out.append(text if kind == "markdown" else f"```python\n{text}\n```")
    body = "\n\n".join(out)
    body = re.sub(r"\]\((\d\d_[\w]+)\.py\)", r"](\1.md)", body)   # [tutorial 2](02_x.py)
    note = (f"\n\n!!! note \"Run it\"\n    This page is `tutorials/{path.name}`, rendered. Run it with "
            f"`python tutorials/{path.name}`; the test suite runs every tutorial.\n")
    title_end = body.find("\n")
    return body[:title_end] + note + body[title_end:] + "\n"


def tutorials_index() -> str:
    rows = "\n".join(f"{i}. [{tutorial_title(p)}]({p.stem}.md) (`tutorials/{p.name}`)"
                     for i, p in enumerate(tutorial_files(), 1))
    return ("# Tutorials\n\nEach tutorial is a Python script in percent format (`# %%` cells), runnable "
            "on its own and checked against eager PyTorch; they are meant to be read in order.\n\n"
            f"{rows}\n")


# --------------------------------------------------------------------------- modules
def module_docstrings() -> list[tuple[str, str]]:
    """(dotted module name, docstring) for every .py file under miniinductor/."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found.append((name, ast.get_docstring(ast.parse(path.read_text())) or ""))
    return found


def modules_page() -> str:
    mods = module_docstrings()
    lines = ["# Module map", "",
             "Every module of miniinductor, the `torch/_inductor` file (or tool) it mirrors and what it "
             "leaves out, taken from the module's own docstring when this site was built. Folders come "
             "in the order data flows through them; see [Architecture](../architecture.md).", "",
             "| module | mirrors | what it is |", "|---|---|---|"]
    for name, doc in mods:
        first = (doc.splitlines() or ["(no docstring)"])[0].replace("|", "\\|")
        twins = ", ".join(f"`{t}`" for t in dict.fromkeys(COUNTERPART.findall(doc))) or "-"
        lines.append(f"| [`{name}`](#{_anchor(name)}) | {twins} | {first} |")
    for name, doc in mods:
        lines += ["", f"## `{name}` {{#{_anchor(name)}}}", "", _demote_headings(doc) or "(no docstring)"]
    return "\n".join(lines) + "\n"


def _anchor(name: str) -> str:
    return "mod-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _demote_headings(text: str) -> str:
    return re.sub(r"^(#+ )", r"###\1", text, flags=re.M)


# --------------------------------------------------------------------------- config
def config_fields() -> list[tuple[str, str, str, str]]:
    """(name, kind, default, help) for every option (config.OPTIONS: the core's, then each
    extension's), the default of an option the environment decides shown as computed."""
    import miniinductor  # noqa: F401  (registers the extensions' options)
    from miniinductor import config as config_module
    rows = []
    for name, option in config_module.OPTIONS.items():
        kind = option.describe()
        if option.extension != "core":
            kind += f" (extension {option.extension})"
        default = "computed from the environment" if callable(option.default) else repr(option.default)
        rows.append((name, kind, default, option.help))
    return rows


def config_page() -> str:
    from miniinductor import config as config_module
    from miniinductor import logs
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["# Config reference", "",
             "Generated from `config.OPTIONS` (the core's options in `miniinductor/config.py`, each "
             "extension's declared by it) when this site was built.",
             "Options are passed as keywords, `miniinductor.compile(model, fusion=False)`, or as "
             '`torch.compile(model, backend="miniinductor", options={"fusion": False})`; an unknown name is '
             "an error that lists the close matches.", "",
             "## Options", "", "| option | type | default | what it does |", "|---|---|---|---|"]
    lines += [f"| `{n}` | `{esc(t)}` | `{esc(d)}` | {esc(h)} |" for n, t, d, h in config_fields()]
    for title, table in (("Modes", getattr(config_module, "MODES", None)),
                         ("Presets", getattr(config_module, "PRESETS", None))):
        if table:
            lines += ["", f"## {title}", "", f"| {title[:-1].lower()} | sets |", "|---|---|"]
            lines += [f"| `{k}` | {', '.join(f'`{o}={v!r}`' for o, v in s.items()) or '(nothing)'} |"
                      for k, s in table.items()]
    doc = config_module.__doc__ or ""
    lines += ["", "## How options are resolved", "", "From the module docstring of `miniinductor/config.py`:",
              "", "```text", doc.strip(), "```"]
    lines += ["", "## Log switches", "",
              "`MINIINDUCTOR_LOGS=name,name,...` (or `miniinductor.logs.set_logs(\"name\")`) turns on "
              "these Python loggers (`miniinductor.<name>`), each printing to stderr:", "",
              "| name | logs |", "|---|---|"]
    lines += [f"| `{n}` | {esc(h)} |" for n, h in logs.LOG_NAMES.items()]
    lines += ["", "## Environment variables", "", "| variable | meaning |", "|---|---|",
              "| `MINIINDUCTOR_LOGS` | the log switches above, comma-separated |",
              "| `MINIINDUCTOR_TRACE` | a folder to trace every compiled graph into (the `trace` option) |",
              "| `MINIINDUCTOR_CACHE_DIR` | compiled kernels, generated code (default `~/.cache/miniinductor`) |",
              "| `CXX` | the C++ compiler for CPU kernels (default `g++`) |"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- CLI
def cli_page() -> str:
    from miniinductor.tools.cli import build_parser
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parts = [("miniinductor --help", parser.format_help())]
        parts += [(f"miniinductor {name} --help", p.format_help()) for name, p in subs.choices.items()]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    lines = ["# Command line", "",
             "`miniinductor` (the console script) and `python -m miniinductor` are the same program. "
             "This page is the `--help` text of each command, captured when the site was built.", ""]
    for title, text in parts:
        lines += [f"## `{title}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- mkdocs events
def on_config(config, **kwargs):
    """Fill the nav's "Tutorials" entry with one page per tutorial file."""
    pages = ["tutorials/index.md"] + [{tutorial_title(p).replace("`", ""): f"tutorials/{p.stem}.md"}
                                      for p in tutorial_files()]
    for i, item in enumerate(config.nav or []):
        if isinstance(item, dict) and "Tutorials" in item:
            config.nav[i] = {"Tutorials": pages}
    return config


def on_files(files, config, **kwargs):
    generated = {
        "reference/config.md": config_page(),
        "reference/modules.md": modules_page(),
        "reference/cli.md": cli_page(),
        "tutorials/index.md": tutorials_index(),
    }
    generated.update({f"tutorials/{p.stem}.md": tutorial_markdown(p) for p in tutorial_files()})
    for uri, text in generated.items():
        files.append(File.generated(config, uri, content=text))
    return files
