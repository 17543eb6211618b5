"""Run cases in children forked from one process that has already paid for the imports
(torch, Dynamo, miniinductor), a few at a time, so a crash ends one case, not the run.
Used by the runners of tests/tools/test_cli.py, tests/training_patterns_cases.py and
tests/real_models_cases.py."""
import json
import os
import sys
import traceback
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


def child_main(log_path: Path, body) -> None:
    """In a forked child: stdout and stderr to `log_path`, then `body()`; a dict it returns is
    printed as one `RESULT <json>` line (None: nothing). Exits 0, or 1 on any exception
    (its traceback in the log); never returns."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    status = 1
    try:
        result = body()
        if result is not None:
            print("RESULT " + json.dumps(result))
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
