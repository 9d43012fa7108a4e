"""``adaptlab report``: Markdown and HTML report with tables and figures from a results store
(figures embedded in report.html and written to figures/ as PNG, SVG or PDF)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from adaptlab.analysis.plots import DEFAULT_DPI, FIGURE_FORMATS
from adaptlab.analysis.report import build_report
from adaptlab.cli._common import MAX_RESAMPLES, add_common, bounded_int, suggest
from adaptlab.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab report``."""
    p = sub.add_parser(
        "report",
        help="write a Markdown/HTML report with plots from a results store",
        description="Tables (value, bootstrap mean, CI, CI width; paired comparisons; thresholds; "
        "COE/ROE; isotropy; correlations) and figures from a results store. "
        "report.html embeds every figure (it needs no other file); figures/ holds "
        "them as files for a paper.",
    )
    p.add_argument("--store", required=True, help="results store: a directory or an s3://, gs://, az:// URI")
    p.add_argument("--out", required=True, type=Path, help="output folder (report.md, report.html, figures/)")
    p.add_argument("--system", action="append", default=None, help="only these systems (repeatable)")
    p.add_argument("--dataset", action="append", default=None, help="only these datasets (repeatable)")
    p.add_argument(
        "--k",
        type=bounded_int(1),
        default=5,
        help="top-K of thresholds and COE/ROE (default 5, as in the reference study)",
    )
    p.add_argument(
        "--bootstrap",
        type=bounded_int(1, MAX_RESAMPLES),
        default=1000,
        help="resamples for analyses computed from per-query records",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of those resamples")
    p.add_argument(
        "--format",
        dest="figure_format",
        choices=FIGURE_FORMATS,
        default="png",
        help="format of the figure files in figures/ (default png; svg and pdf are vector formats)",
    )
    p.add_argument(
        "--dpi",
        type=bounded_int(10, 2400),
        default=DEFAULT_DPI,
        help=f"resolution of PNG figures, dots per inch (default {DEFAULT_DPI})",
    )
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; returns the exit status."""
    from adaptlab import results

    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out}: a file; expected a folder for report.md, report.html and figures/")
    _check_names(results.open(args.store), args.system, args.dataset)
    written = _build_fresh(args)
    print(f"report written to {args.out}: " + ", ".join(str(p.relative_to(args.out)) for p in written))
    return 0


def _check_names(store: object, systems: list[str] | None, datasets: list[str] | None) -> None:
    """Every --system and --dataset must name something in the store (a typo such as
    ``--system minlm`` is an error with the close name, never an empty report)."""
    runs = store.runs(columns=["system", "dataset"])  # type: ignore[attr-defined]
    for option, wanted, column in (("--system", systems, "system"), ("--dataset", datasets, "dataset")):
        known = sorted(set(runs.column(column).to_pylist()))
        for name in wanted or []:
            if name not in known:
                shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
                raise ConfigError(
                    f"{option} {name!r}: no run in the store has this {column}{suggest(name, known)} "
                    f"({column}s in the store: {shown or 'none'}); no report was written"
                )


def _build_fresh(args: argparse.Namespace) -> list[Path]:
    """Build the report in a new folder beside --out, then put report.md, report.html and
    figures/ in place, so no figure of an earlier report is left beside the new one. On an
    error the previous report stays whole and nothing half-written is left. Returns every file
    written (report.md, report.html, then each figure)."""
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        build_report(
            args.store,
            tmp,
            systems=args.system,
            datasets=args.dataset,
            k=args.k,
            n_resamples=args.bootstrap,
            seed=args.seed,
            figure_format=args.figure_format,
            dpi=args.dpi,
        )
        out.mkdir(exist_ok=True)
        old_figures = out / "figures"
        if old_figures.is_dir():
            shutil.rmtree(old_figures)
        for name in ("figures", "report.html", "report.md"):  # report.md last: it marks a whole report
            if (tmp / name).exists():
                os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures = sorted((out / "figures").iterdir()) if (out / "figures").is_dir() else []
    return [out / "report.md", out / "report.html", *figures]
