"""``adaptlab plan``: how many queries detect a gain of a given size with a given power."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from adaptlab.analysis import pilot_from_store, plan_sample_size
from adaptlab.cli._common import add_common, bounded_int
from adaptlab.cli.compare_cmd import per_query_from_runs, unit_open
from adaptlab.errors import ConfigError
from adaptlab.metrics import parse_measures


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab plan``."""
    p = sub.add_parser(
        "plan",
        help="how many queries detect a gain of X with power P (from pilot runs or a store)",
        description="Plan the number of queries: from pilot per-query values of two systems (two TREC "
        "runs with --qrels, or --system/--against in a results store), the smallest number "
        "of queries whose paired test (the one adaptlab reports) detects a mean difference "
        "--effect with probability --power, by paired resampling of the pilot.",
    )
    p.add_argument("--qrels", type=Path, help="TREC qrels file, or a BEIR qrels/<split>.tsv (with two --run)")
    p.add_argument(
        "--run",
        type=Path,
        action="append",
        dest="runs",
        help="TREC run file; give exactly two (the first is the system, the second the baseline)",
    )
    p.add_argument("--store", help="a results store (a directory or an s3://, gs://, az:// URI) instead of runs")
    p.add_argument(
        "--system",
        help="with --store: the system expected to gain (default: with two systems in the "
        "store, the one that is not the study's baseline)",
    )
    p.add_argument("--against", help="with --store: the baseline system (default: the study's baseline)")
    p.add_argument("--dataset", help="with --store: the dataset (needed when both systems are on several)")
    p.add_argument("--metric", "--measure", dest="metric", default="ndcg@10", help="the measure (default ndcg@10)")
    p.add_argument("--effect", type=float, required=True, help="the mean difference to detect, in the measure's units")
    p.add_argument("--power", type=unit_open, default=0.8, help="the probability of detecting it (default 0.8)")
    p.add_argument("--alpha", type=unit_open, default=0.05, help="the level of the two-sided test (default 0.05)")
    p.add_argument(
        "--experiments",
        type=bounded_int(10, 100_000),
        default=400,
        help="simulated evaluations per number of queries (default 400)",
    )
    p.add_argument(
        "--resamples",
        type=bounded_int(19, 1_000_000),
        default=1000,
        help="sign vectors (or bootstrap resamples) per simulated test (default 1000)",
    )
    p.add_argument(
        "--max-queries", type=bounded_int(2), default=10000, help="the largest number of queries tried (default 10000)"
    )
    p.add_argument("--seed", type=bounded_int(0), default=0, help="seed of the simulation (default 0)")
    p.add_argument(
        "--assurance",
        type=unit_open,
        default=0.8,
        help="also the number of queries that reaches --power with this probability over the pilot's "
        "own sampling variation (planned at the upper confidence bound of the pilot's sd; default "
        "0.8), and the range of planned sizes over a 95%% interval of that sd",
    )
    p.add_argument("--figure", type=Path, help="also save the power curve here (.png, .pdf or .svg)")
    p.add_argument(
        "--format",
        choices=("text", "json", "csv"),
        default="text",
        help="output format; json: {plan: the answer and its settings, systems, curve}; csv: the power "
        "curve, every row with the answer and its settings",
    )
    add_common(p)
    p.set_defaults(handler=run)


def _pilot(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """The two systems' per-query pilot values from the runs or the store (their names are left
    in ``args.system`` / ``args.against``)."""
    if (args.store is None) == (args.qrels is None):
        raise ConfigError(
            "give either --qrels with two --run files, or --store URI (with --system and --against "
            "when it holds more than two systems)"
        )
    measure = str(parse_measures([args.metric])[0])
    if args.store is None:
        if not args.runs or len(args.runs) != 2:
            raise ConfigError("--qrels needs exactly two --run files: the system, then the baseline")
        per_query = per_query_from_runs(args.qrels, args.runs, measure)
        a, b = (per_query[p.stem] for p in args.runs)
        args.system, args.against = args.runs[0].stem, args.runs[1].stem
        if a.query_ids != b.query_ids:
            raise ConfigError(f"--run {args.runs[0]} and --run {args.runs[1]} were evaluated on different queries")
        return np.asarray(a.matrix(measure)), np.asarray(b.matrix(measure))
    if args.runs:
        raise ConfigError("--run goes with --qrels, not with --store")
    from adaptlab import results
    from adaptlab.analysis import default_pair

    store = results.open(args.store)
    try:
        system, against = args.system, args.against
        if not (system and against):  # a store of two systems (the quickstart's): those two
            pair = default_pair(store, args.dataset)
            system = system or (pair[0] if against != pair[0] else pair[1])
            against = against or (pair[1] if system != pair[1] else pair[0])
        args.system, args.against = system, against
        return pilot_from_store(store, system=system, against=against, measure=measure, dataset=args.dataset)
    finally:
        store.close()


def run(args: argparse.Namespace) -> int:
    """Plan the number of queries and print the answer and the power curve."""
    a, b = _pilot(args)
    plan = plan_sample_size(
        a,
        b,
        effect=args.effect,
        power=args.power,
        alpha=args.alpha,
        n_experiments=args.experiments,
        n_resamples=args.resamples,
        max_queries=args.max_queries,
        seed=args.seed,
        assurance=args.assurance,
    )
    if args.figure is not None:
        plan.figure(args.figure)
    if args.format != "text":
        from dataclasses import asdict

        from adaptlab.cli.compare_cmd import emit_frames

        answer = {k: v for k, v in asdict(plan).items() if k != "curve"}
        answer.update(system=args.system, against=args.against, metric=args.metric)
        if args.format == "json":
            emit_frames({"curve": plan.curve}, "json", {"plan": answer})
        else:
            flat = {k: json.dumps(v) if isinstance(v, (tuple, list, dict)) else v for k, v in answer.items()}
            plan.curve.assign(**flat).to_csv(sys.stdout, index=False)  # one column per answer field
        return 0
    print(plan)
    print()
    print(plan.curve.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.figure is not None:
        print(f"\npower curve: {args.figure}")
    return 0
