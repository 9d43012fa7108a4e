"""The ``adaptlab`` command line: a thin layer over the public Python API.

Every sub-command lives in its own module with ``add_parser(subparsers)`` and ``run(args)``.
User errors (:class:`adaptlab.errors.AdaptlabError`, bad options) print one line on stderr and
exit with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from adaptlab._version import __version__
from adaptlab.errors import AdaptlabError

__all__ = ["main"]

_COMMANDS = ("evaluate", "results", "run", "submit", "report")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="adaptlab", description="Evaluate domain-adapted retrieval embeddings with confidence intervals.")
    parser.add_argument("--version", action="version", version=f"adaptlab {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in _COMMANDS:
        importlib.import_module(f"adaptlab.cli.{name}_cmd").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    debug = args.debug or bool(getattr(args, "sub_debug", False))
    try:
        return int(args.handler(args) or 0)
    except AdaptlabError as e:
        if debug:
            raise
        print(f"adaptlab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
