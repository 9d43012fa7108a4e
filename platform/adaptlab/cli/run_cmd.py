"""``adaptlab run``: run a study file, or an ad-hoc study from options, on local or remote Ray.

The command only parses options: :meth:`adaptlab.study.Study.with_overrides` applies them and
:func:`adaptlab.study.run_study` runs the study, with or without an ``[adapt]`` section.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from adaptlab.cli._common import add_bootstrap_options, add_common, bootstrap_overrides, print_json
from adaptlab.errors import ConfigError
from adaptlab.evaluation import format_pairs, format_summary
from adaptlab.study import Study, load_study, parse_study, run_study


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab run``."""
    p = sub.add_parser(
        "run", help="run a study (TOML) or evaluate --model on --dataset",
        description="Run a study file, or an ad-hoc study given by --model and --dataset. Options given "
                    "here override the study file. Without --address Ray starts in-process.")
    p.add_argument("study", nargs="?", type=Path, help="study TOML file (see jobs/)")
    p.add_argument("--model", action="append", default=[], help="model alias, local path or hub id (repeatable)")
    p.add_argument("--dataset", action="append", default=[], help="FORMAT:PATH, e.g. beir:DIR (repeatable)")
    p.add_argument("--split", default=None, help="dataset split (default test)")
    p.add_argument("--metrics", default=None, help="comma-separated measures, e.g. ndcg@10,recall@100")
    p.add_argument("--k", type=int, default=None, help="retrieval depth (default 100)")
    add_bootstrap_options(p, defaults=False)
    p.add_argument("--store", type=Path, help="results store directory (overrides the study's)")
    p.add_argument("--no-store", action="store_true", help="do not write to a results store")
    p.add_argument("--address", help="Ray address (overrides the study's); default: embedded local Ray")
    p.add_argument("--no-ray", action="store_true", help="embed in-process instead of on a Ray actor pool")
    p.add_argument("--export-run", type=Path, help="write the retrieved top-k as a TREC run file")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_common(p)
    p.set_defaults(handler=run)


def build_study(args: argparse.Namespace) -> Study:
    """The study file with command-line overrides, or an ad-hoc study from options."""
    if args.study is not None:
        study = load_study(args.study)
    elif not args.model or not args.dataset:
        raise ConfigError("give a STUDY.toml, or both --model and --dataset (e.g. --model minilm --dataset beir:DIR)")
    else:
        study = parse_study({"study": {"name": "adhoc", "store": ""},
                             "datasets": [{"spec": d} for d in args.dataset],
                             "models": [{"ref": m} for m in args.model]}, source="command line")
    return study.with_overrides(models=args.model, datasets=args.dataset, split=args.split, metrics=args.metrics,
                                k=args.k, bootstrap=bootstrap_overrides(args),
                                use_ray=False if args.no_ray else None, store="" if args.no_store else None)


def run(args: argparse.Namespace) -> int:
    """Run the study and print every dataset's summary (or JSON)."""
    study = build_study(args)
    store = None if args.no_store else args.store
    outcome = run_study(study, store=store, address=args.address, export_run=args.export_run)
    if args.format == "json":
        if len(outcome.datasets) == 1:
            print_json(outcome.datasets[0].summary.to_json())
        else:
            print_json({"datasets": {d.dataset: d.summary.to_json() for d in outcome.datasets}})
        return 0
    for d in outcome.datasets:
        print(f"\n== {d.dataset} ==")
        print(format_summary(d.summary))
        pairs = format_pairs(d.summary)
        if pairs:
            print("\npaired differences")
            print(pairs)
    if outcome.store is not None:
        print(f"\nresults stored in {outcome.store} (adaptlab results --store {outcome.store})")
    return 0
