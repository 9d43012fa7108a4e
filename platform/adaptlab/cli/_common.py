"""Options and output helpers shared by several sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from adaptlab.stats import BootstrapConfig

__all__ = ["add_bootstrap_options", "add_common", "bootstrap_config", "bootstrap_overrides", "print_json"]


def add_common(p: argparse.ArgumentParser) -> None:
    """``--debug`` on every sub-command."""
    p.add_argument("--debug", dest="sub_debug", action="store_true", help="show tracebacks on errors")


def add_bootstrap_options(p: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """``--bootstrap``, ``--sample-size``, ``--seed``, ``--confidence`` (``defaults=False``: None
    when not given, so a study file's values stand)."""
    d = (lambda v: v) if defaults else (lambda v: None)
    p.add_argument("--bootstrap", metavar="M", type=int, default=d(1000),
                   help="bootstrap resamples (default 1000; the reference study used 500)")
    p.add_argument("--sample-size", metavar="L", type=int, default=None,
                   help="queries per resample (default: all queries; the reference study used 100)")
    p.add_argument("--seed", type=int, default=d(0),
                   help="seed of the bootstrap (default " + ("0)" if defaults else "the study's [bootstrap].seed, "
                                                             "else derived from [study].seed)"))
    p.add_argument("--confidence", type=float, default=d(0.95), help="CI level (default 0.95)")


def bootstrap_config(args: argparse.Namespace) -> BootstrapConfig:
    """The bootstrap options (added with ``defaults=True``) as one :class:`BootstrapConfig`."""
    return BootstrapConfig(n_resamples=args.bootstrap, sample_size=args.sample_size, seed=args.seed,
                           confidence=args.confidence)


def bootstrap_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The bootstrap options given on the command line, as ``[bootstrap]`` keys (None: not given)."""
    return {"n_resamples": args.bootstrap, "sample_size": args.sample_size, "seed": args.seed,
            "confidence": args.confidence}


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
