"""``adaptlab scaling``: fit each scale-study variant's gain over its base against the data scale."""

from __future__ import annotations

import argparse
from pathlib import Path

from adaptlab.analysis import SCALING_MODELS, format_scaling, plot_scaling, scaling_from_store, scaling_rows
from adaptlab.cli._common import MAX_RESAMPLES, add_common, bounded_int, print_json
from adaptlab.stats import BootstrapConfig


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab scaling``."""
    p = sub.add_parser("scaling", help="how the adaptation gain grows with the data scale (fits with bootstrap CIs)",
                       description="For a scale study in a results store (systems <label>-<variant>-s<N> beside "
                                   "<label>-base): fit each variant's mean gain over its own base against log2 of "
                                   "the number of documents (log-linear, or saturating when it predicts left-out "
                                   "scales better and there are at least 5), with percentile bootstrap CIs over "
                                   "paired resamples of the queries. Prints the gain per doubling at the largest "
                                   "scale, whether the gain still rises there, the predicted gain at 2x the largest "
                                   "scale (an extrapolation), the scale a --target gain needs, and the gain per "
                                   "training hour where the store records training seconds.")
    p.add_argument("--store", required=True, help="results store: a directory or an s3://, gs://, az:// URI")
    p.add_argument("--metric", "--measure", dest="metric", default="ndcg@10", help="the measure (default ndcg@10)")
    p.add_argument("--dataset", help="only this dataset (default: every dataset with a scale study)")
    p.add_argument("--target", type=float, help="a target gain over the base, in the measure's units (e.g. 0.02)")
    p.add_argument("--model", choices=SCALING_MODELS, default="auto",
                   help="the fitted form (default auto: log-linear, saturating when it fits better by "
                        "leave-one-out error with at least 5 scales)")
    p.add_argument("--bootstrap", type=bounded_int(19, MAX_RESAMPLES), default=1000,
                   help="paired bootstrap resamples of the queries (default 1000)")
    p.add_argument("--seed", type=bounded_int(0), default=0, help="seed of the resamples (default 0)")
    p.add_argument("--figure", type=Path, help="also save the fitted curves with bands here (.png, .pdf or .svg)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Fit, print the tables (or JSON) and save the figure when asked."""
    from adaptlab import results

    store = results.open(args.store)
    try:
        fits = scaling_from_store(store, args.metric, dataset=args.dataset, target=args.target,
                                  boot=BootstrapConfig(n_resamples=args.bootstrap, seed=args.seed), model=args.model)
    finally:
        store.close()
    if args.figure is not None:
        plot_scaling(fits, args.figure)
    if args.format == "json":
        print_json({"fits": scaling_rows(fits), "figure": None if args.figure is None else str(args.figure)})
        return 0
    print(format_scaling(fits))
    if args.figure is not None:
        print(f"\nfigure: {args.figure}")
    return 0
