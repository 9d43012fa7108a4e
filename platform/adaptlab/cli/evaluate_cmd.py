"""``adaptlab evaluate``: trec_eval with bootstrap CIs and paired comparisons."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from adaptlab.analysis import format_groups, format_pairs, format_summary
from adaptlab.cli._common import add_bootstrap_options, add_common, bootstrap_config, print_json
from adaptlab.data import read_group_file
from adaptlab.data.beir import read_beir_qrels
from adaptlab.data.trec import read_trec_qrels, read_trec_run
from adaptlab.errors import ConfigError
from adaptlab.evaluation import EvaluationSummary, summarise_runs
from adaptlab.evaluation.groups import GroupedSummary, check_group_column, summarise_groups
from adaptlab.evaluation.persist import commit_summary
from adaptlab.metrics import parse_measures
from adaptlab.storage import check_name, check_names

DEFAULT_METRICS = "ndcg@10,acc@1,acc@5,mrr@10,recall@100,map@100"


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab evaluate``."""
    p = sub.add_parser(
        "evaluate",
        help="score TREC run files against qrels, with CIs and paired tests",
        description="Score one or more TREC run files against TREC qrels. Several runs are "
        "compared pairwise with a paired bootstrap.",
    )
    p.add_argument(
        "--qrels",
        required=True,
        type=Path,
        help="TREC qrels file (qid 0 docid rel), or a BEIR qrels/<split>.tsv (query-id corpus-id score)",
    )
    p.add_argument(
        "--run",
        required=True,
        type=Path,
        action="append",
        dest="runs",
        help="TREC run file (qid Q0 docid rank score tag); repeat for several systems",
    )
    p.add_argument("--metrics", default=DEFAULT_METRICS, help=f"comma-separated measures (default {DEFAULT_METRICS})")
    add_bootstrap_options(p)
    p.add_argument("--baseline", help="compare every run against this one only (default: all pairs)")
    p.add_argument(
        "--store", help="also commit the results to this results store (a directory or an s3://, gs://, az:// URI)"
    )
    p.add_argument("--dataset", help="dataset name for the store (required with --store)")
    p.add_argument(
        "--again",
        action="store_true",
        help="with --store: commit new runs even when the store already holds this evaluation (by "
        "default the same inputs, settings and adaptlab version add nothing)",
    )
    add_group_options(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    add_common(p)
    p.set_defaults(handler=run)


def add_group_options(p: argparse.ArgumentParser) -> None:
    """``--groups FILE`` and ``--by COLUMN``: per-group results of TREC runs."""
    p.add_argument(
        "--groups",
        type=Path,
        metavar="FILE",
        help="per-group results too: a TSV file of 'query_id<TAB>group' lines (for example the "
        "question type of each query); p adjusted within each measure across the groups",
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="the name of the grouping in the tables and the store (default: group; with --groups)",
    )


def grouped_from_args(
    args: argparse.Namespace, per_query: dict, boot: Any, baseline: str | None = None
) -> GroupedSummary | None:
    """The per-group results ``--groups`` / ``--by`` ask for (None without ``--groups``)."""
    if args.groups is None:
        if args.by is not None:
            raise ConfigError(
                f"--by {args.by}: TREC runs carry no query groups; give them with --groups FILE "
                "(query_id<TAB>group lines)"
            )
        return None
    column = check_group_column(args.by or "group", "--by")
    labels = read_group_file(args.groups)
    return summarise_groups(per_query, labels, column=column, boot=boot, baseline=baseline)


def read_qrels(path: Path) -> dict:
    """TREC qrels, or BEIR qrels (a ``.tsv`` file, or a BEIR folder's ``qrels/test.tsv``)."""
    if path.is_dir():
        tsv = sorted((path / "qrels").glob("*.tsv")) if (path / "qrels").is_dir() else sorted(path.glob("*.tsv"))
        if len(tsv) == 1:
            return read_beir_qrels(tsv[0])
        raise ConfigError(
            f"--qrels {path}: a folder; give one qrels file"
            + (f" (found {', '.join(t.name for t in tsv)})" if tsv else "")
        )
    if path.suffix.lower() == ".tsv":
        return read_beir_qrels(path)
    return read_trec_qrels(path)


def _sha256(path: Path) -> str:
    """A run or qrels input by content (the store's evaluation key), never by its path."""
    from adaptlab.storage.files import directory_sha256, sha256_file

    if not path.is_dir():
        return sha256_file(path)
    digest = directory_sha256(path)
    if digest is None:
        raise ConfigError(f"{path}: an empty directory; expected a run or qrels file, or a folder holding one")
    return digest


def run(args: argparse.Namespace) -> int:
    """Score the runs, print the table (or JSON), optionally commit to a store."""
    if args.store is not None and not args.dataset:
        raise ConfigError("--store needs --dataset NAME (the dataset name recorded in the store)")
    dataset = check_name(args.dataset, "--dataset") if args.dataset is not None else None
    baseline = check_name(args.baseline, "--baseline") if args.baseline is not None else None
    measures = parse_measures(args.metrics)
    qrels = read_qrels(args.qrels)
    if not any(rel > 0 for docs in qrels.values() for rel in docs.values()):
        raise ConfigError(
            f"--qrels {args.qrels}: no relevant document (no line 'qid 0 docid rel' with rel > 0); nothing to evaluate"
        )
    read = [read_trec_run(path, qrels=qrels) for path in args.runs]
    names = check_names([path.stem for path in args.runs], "--run (a run is named after its file)")
    runs = dict(zip(names, read))
    boot = bootstrap_config(args)
    summary = summarise_runs(qrels, runs, measures, boot=boot, baseline=baseline)
    grouped = grouped_from_args(args, summary.per_query, boot, baseline)
    if args.store is not None:
        assert dataset is not None  # --store without --dataset was refused above
        _commit(args, summary, grouped, qrels, runs, dataset, measures)
    _print(args.format, summary, grouped)
    return 0


def _commit(
    args: argparse.Namespace,
    summary: EvaluationSummary,
    grouped: GroupedSummary | None,
    qrels: dict,
    runs: dict,
    dataset: str,
    measures: list,
) -> None:
    """Commit the evaluation (and its groups) to ``--store``; a retry says it added nothing."""
    from adaptlab.retrieval.build import records_from_run  # the per-query rows compare/plan --store read

    content: dict[str, Any] = {"qrels": _sha256(args.qrels), "runs": {n: _sha256(p) for n, p in zip(runs, args.runs)}}
    if grouped is not None:
        content["groups"] = {"file": _sha256(args.groups), "column": grouped.column}
    stored = commit_summary(
        args.store,
        summary,
        dataset=dataset,
        records=[records_from_run(runs[n], qrels, system=n, dataset=dataset) for n in runs],
        config={
            "command": "evaluate",
            "qrels": str(args.qrels),
            "runs": [str(r) for r in args.runs],
            "metrics": [str(m) for m in measures],
        },
        provenance={n: {"model_id": f"trec-run:{args.runs[i]}"} for i, n in enumerate(runs)},
        again=args.again,
        key_content=content,
        groups=[grouped] if grouped is not None else [],
    )
    if not stored.added:
        print(stored.already_stored(), file=sys.stderr)


def _print(fmt: str, summary: EvaluationSummary, grouped: GroupedSummary | None) -> None:
    """The tables (the per-group one after the main ones) or the JSON."""
    if fmt == "json":
        print_json({**summary.to_json(), **({"groups": grouped.to_json()} if grouped is not None else {})})
        return
    print(format_summary(summary))
    pairs = format_pairs(summary)
    if pairs:
        print("\npaired differences")
        print(pairs)
    if grouped is not None:
        print("\n" + format_groups(grouped))
