"""Command-line entry point: ``python -m miniinductor <command>`` (or ``miniinductor``).

Commands:
  demo    compile a GPT-2 block with miniinductor, check it against eager and
          Inductor, print kernels/fallbacks/timings and write a markdown report.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="miniinductor",
        description="miniinductor: an educational reimplementation of TorchInductor.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from miniinductor import demo
    demo_parser = sub.add_parser(
        "demo", help="compile a GPT-2 block and compare with eager and Inductor",
        description=demo.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(handler=demo.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
