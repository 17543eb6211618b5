"""`python -m miniinductor <command>`: the command line lives in miniinductor/tools/cli.py."""
import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
