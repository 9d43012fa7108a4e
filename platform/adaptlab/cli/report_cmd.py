"""``adaptlab report``: Markdown and HTML report with tables and PNG plots from a results store."""

from __future__ import annotations

import argparse
from pathlib import Path

from adaptlab.cli._common import add_common
from adaptlab.analysis.report import build_report


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab report``."""
    p = sub.add_parser("report", help="write a Markdown/HTML report with plots from a results store",
                       description="Tables (value, bootstrap mean, CI, CI width; paired comparisons; thresholds; "
                                   "COE/ROE; isotropy; correlations) and PNG plots from a results store.")
    p.add_argument("--store", required=True, help="results store: a directory or an s3://, gs://, az:// URI")
    p.add_argument("--out", required=True, type=Path, help="output folder (report.md, report.html, figures/)")
    p.add_argument("--system", action="append", default=None, help="only these systems (repeatable)")
    p.add_argument("--dataset", action="append", default=None, help="only these datasets (repeatable)")
    p.add_argument("--k", type=int, default=5, help="top-K of thresholds and COE/ROE (default 5, as in the reference study)")
    p.add_argument("--bootstrap", type=int, default=1000, help="resamples for analyses computed from per-query records")
    p.add_argument("--seed", type=int, default=0, help="seed of those resamples")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; returns the exit status."""
    path = build_report(args.store, args.out, systems=args.system, datasets=args.dataset, k=args.k,
                        n_resamples=args.bootstrap, seed=args.seed)
    print(f"report written to {path}")
    return 0
