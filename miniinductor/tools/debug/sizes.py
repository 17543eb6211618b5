"""What a compiled graph knows about its sizes, as lines: for explain, the report and the trace.

Debug tools only: reads a `SizeVarAllocator` (ir/sizevars.py) and Dynamo's ShapeEnv behind
it. Inductor prints the same facts through TORCH_LOGS (`dynamic`, `guards`).
"""
from __future__ import annotations


def describe_sizes(sizevars) -> list[str]:
    """The size symbols and guards, as lines: each symbol's traced value, the range the
    ShapeEnv allows and where Dynamo reads it from (symbols a guard pinned to one value
    listed apart: the code treats them as constants); then the guards Dynamo checks
    before every call (one failing makes it recompile). Empty for a static graph."""
    env = sizevars.shape_env
    if env is None:
        return []
    free, pinned = [], []
    for s, hint in sorted(sizevars.var_to_val.items(), key=lambda kv: str(kv[0])):
        r = env.var_to_range.get(s)
        where = ", ".join(src.name() if callable(src.name) else src.name for src in env.var_to_sources.get(s, []))
        if r is not None and r.lower == r.upper:
            pinned.append(f"  {s} = {hint}    {where}")
        else:
            allowed = f"in [{r.lower}, {r.upper}]".replace("int_oo", "inf") if r is not None else ""
            free.append(f"  {s} = {hint}    {allowed}    {where}")
    lines = ["size symbols (traced value, allowed range, read from):"] + free
    if pinned:
        lines += ["specialised by a guard to the value traced (constants in the code):"] + pinned
    guards = [str(g.expr) for g in env.guards]
    lines.append("guards (checked before every call; one failing recompiles):" if guards else "guards: none")
    return lines + [f"  {g}" for g in guards]
