"""Run cases in children forked from one process that has already paid for the imports
(torch, Dynamo, miniinductor), a few at a time, so a crash ends one case, not the run.
Used by the runners of tests/test_cli.py and tests/training_patterns_cases.py."""
import os
import sys
from pathlib import Path


def fork_each(cases, child, out_dir: Path, workers: int) -> None:
    """For each (name, arg) in `cases`, fork and call `child(name, arg)` in the child (which
    must not return), at most `workers` at once; write each exit code to OUT_DIR/NAME.exit."""
    pending, running = list(cases), {}
    while pending or running:
        while pending and len(running) < workers:
            sys.stdout.flush()   # else the child would print the parent's buffered output again
            sys.stderr.flush()
            name, arg = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                child(name, arg)
            running[pid] = name
        pid, status = os.wait()
        (out_dir / f"{running.pop(pid)}.exit").write_text(str(os.waitstatus_to_exitcode(status)))
