"""``adaptlab compare``: every pair of systems with adjusted p, significance letters and tiers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adaptlab.analysis import compare, render_groups, rows_of_column, stored_group_columns
from adaptlab.analysis.compare import Comparison
from adaptlab.cli._common import add_bootstrap_options, add_common, bootstrap_config, print_json
from adaptlab.cli.evaluate_cmd import grouped_from_args, read_qrels
from adaptlab.data import read_trec_run
from adaptlab.errors import ConfigError
from adaptlab.metrics import evaluate, parse_measures
from adaptlab.results import ANY_GROUP

DEFAULT_METRICS = "ndcg@10"
STYLES = ("text", "markdown", "latex", "json", "csv")


def unit_open(text: str) -> float:
    """A number strictly between 0 and 1 (argparse type of --alpha and --power)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab compare``."""
    p = sub.add_parser(
        "compare",
        help="compare every pair of systems: adjusted p, significance letters, tiers",
        description="Compare every pair of systems per dataset and measure, from TREC runs "
        "(--qrels with several --run) or from a results store (--store): paired CIs, "
        "Holm/BH-adjusted p, significance letters, the group tied with the best and "
        "the minimum detectable effect.",
    )
    p.add_argument("--qrels", type=Path, help="TREC qrels file, or a BEIR qrels/<split>.tsv (with --run)")
    p.add_argument(
        "--run",
        type=Path,
        action="append",
        dest="runs",
        help="TREC run file (qid Q0 docid rank score tag); repeat, at least twice",
    )
    p.add_argument("--store", help="a results store (a directory or an s3://, gs://, az:// URI) instead of runs")
    p.add_argument(
        "--dataset",
        help="with --store: this dataset only (default: every dataset); with --qrels: the "
        "dataset's name in the tables (default: the BEIR folder's name or the qrels "
        "file's stem)",
    )
    p.add_argument(
        "--metrics",
        "--measure",
        dest="metrics",
        default=DEFAULT_METRICS,
        help=f"comma-separated measures (default {DEFAULT_METRICS})",
    )
    add_bootstrap_options(p)
    p.add_argument(
        "--systems",
        help="comma-separated systems to compare, in this order: each difference is the first "
        "named minus the second (default: all; a store's pairs keep their stored direction)",
    )
    p.add_argument(
        "--alpha",
        type=unit_open,
        default=0.05,
        help="level of the significance letters (adjusted p < alpha; default 0.05)",
    )
    p.add_argument(
        "--power", type=unit_open, default=0.8, help="power of the minimum detectable effect column (default 0.8)"
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="also per group of this grouping column: with --store the per-group rows it holds, with "
        "--qrels the groups of --groups FILE (p adjusted within each measure across the groups)",
    )
    p.add_argument(
        "--groups",
        type=Path,
        metavar="FILE",
        help="with --qrels: a TSV file of 'query_id<TAB>group' lines giving each query's group",
    )
    p.add_argument(
        "--format",
        choices=STYLES,
        default="text",
        help="output format; json: {systems, pairs, settings} with every column; csv: one table, its "
        "column 'table' saying 'systems' or 'pairs' (the columns of the other kind are empty)",
    )
    add_common(p)
    p.set_defaults(handler=run)


def per_query_from_runs(qrels_path: Path, run_paths: list[Path], metrics: str) -> dict:
    """Per-query values of every run, named by file stem (as ``adaptlab evaluate`` names them)."""
    measures = parse_measures(metrics)
    qrels = read_qrels(qrels_path)
    out = {}
    for path in run_paths:
        if path.stem in out:
            raise ConfigError(f"--run {path}: two runs are named {path.stem!r} (the file stem); rename one")
        out[path.stem] = evaluate(qrels, read_trec_run(path, qrels=qrels), measures)
    return out


def run(args: argparse.Namespace) -> int:
    """Compare the runs (or the store's systems) and print the tables (and the per-group ones)."""
    if (args.store is None) == (args.qrels is None):
        raise ConfigError("give either --qrels with two or more --run files, or --store URI")
    boot = bootstrap_config(args)
    if args.store is not None:
        result, group_rows = _from_store(args, boot)
    else:
        if not args.runs or len(args.runs) < 2:
            raise ConfigError("--qrels needs at least two --run files to compare")
        per_query = per_query_from_runs(args.qrels, args.runs, args.metrics)
        dataset = args.dataset or dataset_name(args.qrels)
        result = compare(
            per_query, boot=boot, dataset=dataset, systems=_systems(args), alpha=args.alpha, power=args.power
        )
        grouped = grouped_from_args(args, per_query, boot)
        group_rows = grouped.metric_rows({n: n for n in per_query}, dataset) if grouped is not None else []
    if args.format in ("json", "csv"):
        import pandas as pd

        frames = {"systems": result.frame(), "pairs": result.pairs_frame(), **scaling_frames(result)}
        if args.by:
            frames["groups"] = pd.DataFrame(rows_of_column(group_rows, args.by))
        emit_frames(
            frames,
            args.format,
            {
                "settings": {
                    "alpha": args.alpha,
                    "power": args.power,
                    "bootstrap": boot.kwargs(),
                    "adjustment": boot.adjustment,
                }
            },
        )
    else:
        print(result.render(args.format))
        if args.by:
            print("\n" + render_groups(group_rows, args.by, args.format))
    print_scaling(result, args.format)
    return 0


def _from_store(args: argparse.Namespace, boot: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The comparison of the store's systems and, with ``--by``, the store's rows of that column."""
    if args.runs:
        raise ConfigError("--run goes with --qrels, not with --store")
    if args.groups is not None:
        raise ConfigError(
            "--groups goes with --qrels; a store holds the per-group rows its evaluations wrote "
            "(choose them with --by COLUMN)"
        )
    from adaptlab import results

    store = results.open(args.store)
    try:
        result = compare(
            store,
            measures=args.metrics,
            dataset=args.dataset,
            boot=boot,
            systems=_systems(args),
            alpha=args.alpha,
            power=args.power,
        )
        rows = (
            store.metrics(kind="all", group=ANY_GROUP, latest=True, dataset=args.dataset).to_pylist() if args.by else []
        )
    finally:
        store.close()
    if args.by and not rows_of_column(rows, args.by):
        have = ", ".join(stored_group_columns(rows)) or "none"
        raise ConfigError(
            f"--by {args.by}: the store holds no per-group rows of {args.by!r} (grouping columns "
            f'stored: {have}); evaluate with group_by = ["{args.by}"] to store them'
        )
    return result, rows


def print_scaling(result: Comparison, fmt: str) -> None:
    """After a text, markdown or LaTeX output: the scaling summary paragraph of the compared
    systems that form scale curves (``<label>-base`` and ``<label>-<variant>-s<N>`` at 2 or more
    scales; nothing otherwise). JSON and CSV carry the same numbers (:func:`scaling_frames`)."""
    from adaptlab.analysis import comparison_scaling, scaling_summary

    if fmt in ("json", "csv"):
        return
    text = scaling_summary(comparison_scaling(result), fmt)
    if text:
        print("\n" + text)


def scaling_frames(result: Comparison) -> dict:
    """``{"scaling": DataFrame}`` of the scale curves' numbers for the JSON and CSV outputs (the
    CSV's ``table`` column says ``scaling``), {} when the systems form none."""
    import pandas as pd

    from adaptlab.analysis import comparison_scaling, scaling_summary_rows

    rows = scaling_summary_rows(comparison_scaling(result))
    return {"scaling": pd.DataFrame(rows)} if rows else {}


def _systems(args: argparse.Namespace) -> list[str] | None:
    """``--systems a,b,c`` as a list (None when not given)."""
    if not getattr(args, "systems", None):
        return None
    return [x.strip() for x in args.systems.split(",") if x.strip()]


def dataset_name(qrels: Path) -> str:
    """The dataset a qrels file names when ``--dataset`` is not given: a BEIR folder's name
    (``scifact/qrels/test.tsv`` or ``scifact/``), else the file's stem."""
    qrels = Path(qrels)
    if qrels.is_dir():
        return qrels.resolve().name
    if qrels.parent.name == "qrels":
        return qrels.resolve().parent.parent.name
    return qrels.stem


def emit_frames(frames: dict, fmt: str, extra: dict) -> None:
    """DataFrames as JSON (``{name: rows, **extra}``) or as one CSV whose first column ``table``
    names the frame of each row (``extra`` is JSON only); NaN becomes null / an empty cell."""
    import sys

    import pandas as pd

    if fmt == "json":
        out = {k: f.astype(object).where(f.notna(), None).to_dict("records") for k, f in frames.items()}
        print_json({**out, **extra})
        return
    long = pd.concat([f.assign(table=k) for k, f in frames.items()], ignore_index=True)
    long[["table", *[c for c in long.columns if c != "table"]]].to_csv(sys.stdout, index=False)
