"""The ``adaptlab`` command line: a thin layer over the public Python API.

Every sub-command lives in its own module with ``add_parser(subparsers)`` and ``run(args)``.
User errors (:class:`adaptlab.errors.AdaptlabError`, bad options) and file-system errors
(:class:`OSError`: a directory where a file is expected, a full disk, no permission) print one
line on stderr naming the path and exit with status 2; ``--debug`` shows the traceback instead.
A closed stdout (``adaptlab results --format json | head``) ends the command quietly (status
141, as a shell reports SIGPIPE). Ctrl-C prints "interrupted" and exits 130; SIGTERM (``docker
stop``, a scheduler) prints "terminated" and exits 143, after the same clean-up
(:mod:`adaptlab.runtime.signals`).

Logging: warnings and errors of adaptlab's modules go to stderr as one line each
(``adaptlab: WARNING: ...``), and so do Python warnings of adaptlab's own classes; ``-v`` adds
information lines, ``-vv`` debug lines too (every over-long sentence, every retried block),
``--quiet`` keeps errors only and turns progress lines off.
Both are accepted before or after the sub-command.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence

from adaptlab._version import __version__
from adaptlab.cli._common import HelpFormatter
from adaptlab.errors import AdaptlabError, forget_url_secrets, mask_url, one_line, remember_url_secrets
from adaptlab.runtime import TERMINATED_STATUS, Terminated, catch_sigterm, sigterm_received

__all__ = ["main"]

_COMMANDS = (
    "evaluate",
    "compare",
    "plan",
    "results",
    "export",
    "import",
    "run",
    "submit",
    "report",
    "inspect",
    "cache",
    "scaling",
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, exit status 2, and whose --help shows
    every option's default."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, mask_url(f"{self.prog}: error: {message}\n"))


def configure_logging(verbosity: int) -> Callable[[], None]:
    """One handler on the ``adaptlab`` logger: -1 quiet (errors only, no progress lines),
    0 warnings (default), 1 information (``-v``), 2 or more debug (``-vv``). Returns a function
    that undoes it (the CLI may run in-process, e.g. in tests, and must leave logging as it
    found it)."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    logger = logging.getLogger("adaptlab")
    before = logger.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_MaskingFormatter("adaptlab: %(levelname)s: %(message)s"))
    handler.setLevel(level)
    # records still propagate to the root logger when it has handlers of its own (a host
    # application, pytest); with none, Python's last-resort handler stays silent beside ours
    logger.addHandler(handler)
    logger.setLevel(level)
    # progress lines (adaptlab.runtime.progress) read ADAPTLAB_PROGRESS
    set_env = verbosity < 0 and "ADAPTLAB_PROGRESS" not in os.environ
    if set_env:
        os.environ["ADAPTLAB_PROGRESS"] = "0"
    shown = warnings.showwarning
    warnings.showwarning = _one_line_warnings(shown, logger)

    def restore() -> None:
        warnings.showwarning = shown
        logger.removeHandler(handler)
        logger.setLevel(before)
        if set_env:
            os.environ.pop("ADAPTLAB_PROGRESS", None)

    return restore


class _MaskingFormatter(logging.Formatter):
    """Log lines with every credential masked (:func:`adaptlab.errors.mask_url`)."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_url(super().format(record))


def _one_line_warnings(fallback: Callable[..., None], logger: logging.Logger) -> Callable[..., None]:
    """A ``warnings.showwarning`` that logs warnings of adaptlab's own classes (e.g. a study of
    fewer than 30 queries) as one ``adaptlab: WARNING: ...`` line through ``logger``, instead of
    Python's two lines with the file, line number and source line; other warnings go to ``fallback``."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: object = None,
        line: str | None = None,
    ) -> None:
        if str(getattr(category, "__module__", "")).startswith("adaptlab."):
            logger.warning("%s", message)
        else:
            fallback(message, category, filename, lineno, file, line)

    return show


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="adaptlab", description="Evaluate domain-adapted retrieval embeddings with confidence intervals."
    )
    parser.add_argument("--version", action="version", version=f"adaptlab {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="errors only; no progress lines")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="-v: also information lines; -vv: debug lines too"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in _COMMANDS:
        importlib.import_module(f"adaptlab.cli.{name}_cmd").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    remember_url_secrets(argv)  # masked in every line printed, even where a URL became a path
    try:
        return _main(argv)
    finally:
        forget_url_secrets()


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    debug = args.debug or bool(getattr(args, "sub_debug", False))
    quiet = args.quiet or bool(getattr(args, "sub_quiet", False))
    verbose = min(int(args.verbose) + int(getattr(args, "sub_verbose", 0) or 0), 2)
    if quiet and verbose:
        parser.error("--quiet and --verbose exclude each other")
    restore = configure_logging(-1 if quiet else verbose)
    restore_sigterm = catch_sigterm()  # SIGTERM (docker stop, schedulers) ends like Ctrl-C
    try:
        status = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return status
    except BrokenPipeError:
        return _broken_pipe()
    except (AdaptlabError, OSError) as e:
        if debug:
            raise
        print(f"adaptlab {args.command}: error: {mask_url(one_line(e))}", file=sys.stderr)  # no credentials
        return 2
    except MemoryError:
        if debug:
            raise
        print(
            f"adaptlab {args.command}: error: out of memory; lower the sizes given (resamples, sample size, "
            "cut-offs, batch size)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt as e:
        if isinstance(e, Terminated) or sigterm_received():  # ray.get turns it into a KeyboardInterrupt
            print("terminated", file=sys.stderr)
            return TERMINATED_STATUS
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        restore_sigterm()
        restore()


def entry() -> None:
    """The ``adaptlab`` console script and ``python -m adaptlab``: :func:`main`, then a normal
    exit with its status (exit handlers run; a store's reader leaves no native thread that could
    abort the exit, see :mod:`adaptlab.results.reader`)."""
    raise SystemExit(main())


def _broken_pipe() -> int:
    """The reader of stdout went away (``adaptlab results | head``): stop quietly. Point stdout at
    /dev/null so the interpreter's final flush raises nothing either."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return 141
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    return 141
