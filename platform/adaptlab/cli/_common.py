"""Options and output helpers shared by several sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from adaptlab.stats import INTERVALS, PAIRED_TESTS, BootstrapConfig

__all__ = [
    "HelpFormatter",
    "add_bootstrap_options",
    "add_common",
    "bootstrap_config",
    "bootstrap_overrides",
    "bounded_int",
    "print_json",
    "suggest",
]

MAX_RESAMPLES = 10_000_000
"""Upper bound of ``--bootstrap``: beyond it a bootstrap would need terabytes, not more precision."""
MAX_SAMPLE_SIZE = 100_000_000


def bounded_int(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer in ``[low, high]``; anything else is a one-line usage error
    naming the option and the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            rng = f">= {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"expected an integer {rng}, got {text}")
        return value

    parse.__name__ = "integer"
    return parse


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` with ``(default: X)`` after every option that has a default and does not
    already say it; options whose default is None or False are left as they are."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text.lower()
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        return f"{text} (default: {default})" if text else f"(default: {default})"


def add_common(p: argparse.ArgumentParser) -> None:
    """``--debug``, ``--quiet`` and ``--verbose`` on every sub-command."""
    p.add_argument("--debug", dest="sub_debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("-q", "--quiet", dest="sub_quiet", action="store_true", help="errors only; no progress lines")
    p.add_argument(
        "-v",
        "--verbose",
        dest="sub_verbose",
        action="count",
        default=0,
        help="-v: also information lines; -vv: debug lines too (every over-long sentence, every retry)",
    )


def add_bootstrap_options(p: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """``--bootstrap``, ``--sample-size``, ``--seed``, ``--confidence`` (``defaults=False``: None
    when not given, so a study file's values stand)."""
    d = (lambda v: v) if defaults else (lambda v: None)
    p.add_argument(
        "--bootstrap",
        metavar="M",
        type=bounded_int(1, MAX_RESAMPLES),
        default=d(1000),
        help="bootstrap resamples (default 1000; the reference study used 500)",
    )
    p.add_argument(
        "--sample-size",
        metavar="L",
        type=bounded_int(0, MAX_SAMPLE_SIZE),
        default=None,
        help="queries per resample (default: all queries). L below the number of queries Q gives the CI "
        "of an L-query mean (wider than the CI of the Q-query mean) and paired tests with less "
        "power; the reference study used 100",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=d(0),
        help="seed of the bootstrap (default "
        + ("0)" if defaults else "the study's [bootstrap].seed, else derived from [study].seed)"),
    )
    p.add_argument("--confidence", type=float, default=d(0.95), help="CI level (default 0.95)")
    p.add_argument(
        "--interval",
        choices=INTERVALS,
        default=d("auto"),
        help="CI method (default auto: by the measure's definition, wilson for acc@k, the studentized "
        "bootstrap for the other measures and for differences; wilson/jeffreys apply to acc@k only)",
    )
    p.add_argument(
        "--test",
        choices=PAIRED_TESTS,
        default=d("sign-flip"),
        help="paired test, the same at every number of queries (default sign-flip; bootstrap: the paired "
        "bootstrap p-value, liberal at small query counts)",
    )
    p.add_argument(
        "--adjustment",
        choices=("holm", "bh", "none"),
        default=d("holm"),
        help="multiple-comparison adjustment of paired p-values within a dataset and measure (default holm)",
    )
    p.add_argument(
        "--allow-oversampling",
        action="store_true",
        default=None if not defaults else False,
        help="allow --sample-size larger than the number of queries (narrows CIs artificially)",
    )


def suggest(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` (empty when none is close)."""
    import difflib

    close = difflib.get_close_matches(name.lower(), [c.lower() for c in choices], n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def bootstrap_config(args: argparse.Namespace) -> BootstrapConfig:
    """The bootstrap options (added with ``defaults=True``) as one :class:`BootstrapConfig`."""
    return BootstrapConfig(
        n_resamples=args.bootstrap,
        sample_size=args.sample_size,
        seed=args.seed,
        confidence=args.confidence,
        interval=args.interval,
        adjustment=args.adjustment,
        test=args.test,
        allow_oversampling=bool(args.allow_oversampling),
    )


def bootstrap_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The bootstrap options given on the command line, as ``[bootstrap]`` keys (None: not given)."""
    return {
        "n_resamples": args.bootstrap,
        "sample_size": args.sample_size,
        "seed": args.seed,
        "confidence": args.confidence,
        "interval": args.interval,
        "adjustment": args.adjustment,
        "test": args.test,
        "allow_oversampling": args.allow_oversampling or None,
    }


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
