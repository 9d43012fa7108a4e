"""``adaptlab scaling``: fit each scale-study variant's gain over its base against the data scale."""

from __future__ import annotations

import argparse
from pathlib import Path

from adaptlab.analysis import (
    SCALING_MODELS,
    ScalingFit,
    format_scaling,
    plot_scaling,
    scaling_from_store,
    scaling_rows,
    stored_scaling,
)
from adaptlab.cli._common import MAX_RESAMPLES, add_common, bounded_int, print_json
from adaptlab.stats import BootstrapConfig


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab scaling``."""
    p = sub.add_parser(
        "scaling",
        help="how the adaptation gain grows with the data scale (fits with bootstrap CIs)",
        description="For a scale study in a results store (systems <label>-<variant>-s<N> beside "
        "<label>-base): fit each variant's mean gain over its own base against log2 of "
        "the number of documents (log-linear, or saturating when it predicts left-out "
        "scales better and there are at least 5), with percentile bootstrap CIs over "
        "paired resamples of the queries. Prints the gain per doubling at the largest "
        "scale, whether the gain still rises there, the predicted gain at 2x the largest "
        "scale (an extrapolation), the scale a --target gain needs, and the gain per "
        "training hour where the store records training seconds.",
    )
    p.add_argument("--store", required=True, help="results store: a directory or an s3://, gs://, az:// URI")
    p.add_argument("--metric", "--measure", dest="metric", default="ndcg@10", help="the measure (default ndcg@10)")
    p.add_argument("--dataset", help="only this dataset (default: every dataset with a scale study)")
    p.add_argument("--target", type=float, help="a target gain over the base, in the measure's units (e.g. 0.02)")
    p.add_argument(
        "--model",
        choices=SCALING_MODELS,
        default="auto",
        help="the fitted form (default auto: log-linear, saturating when it fits better by "
        "leave-one-out error with at least 5 scales)",
    )
    p.add_argument(
        "--bootstrap",
        type=bounded_int(19, MAX_RESAMPLES),
        default=None,
        help="paired bootstrap resamples of the queries (default 1000)",
    )
    p.add_argument("--seed", type=bounded_int(0), default=None, help="seed of the resamples (default 0)")
    p.add_argument(
        "--refit",
        action="store_true",
        help="fit from the stored per-query records even when the store holds fits a scale study "
        "recorded (they are used by default when they answer the options given)",
    )
    p.add_argument("--figure", type=Path, help="also save the fitted curves with bands here (.png, .pdf or .svg)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    add_common(p)
    p.set_defaults(handler=run)


def _answers(fit: ScalingFit, args: argparse.Namespace) -> bool:
    """Whether a stored fit is what the options ask for (same form, target, resamples and seed)."""
    return (
        (args.model == "auto" or fit.model == args.model)
        and fit.target == args.target
        and args.bootstrap in (None, fit.n_resamples)
        and args.seed in (None, fit.seed)
    )


def _fits(store: object, args: argparse.Namespace) -> tuple[list[ScalingFit], str]:
    """The stored fits when they answer the options (and --refit is not given), else new ones;
    and a line saying which."""
    stored = [] if args.refit else stored_scaling(store, args.metric, dataset=args.dataset)
    if stored and all(_answers(f, args) for f in stored):
        return stored, "fits recorded in the store by the scale study (--refit fits the stored records again)"
    boot = BootstrapConfig(
        n_resamples=1000 if args.bootstrap is None else args.bootstrap, seed=0 if args.seed is None else args.seed
    )
    fits = scaling_from_store(store, args.metric, dataset=args.dataset, target=args.target, boot=boot, model=args.model)
    return fits, "fitted now from the stored per-query records"


def run(args: argparse.Namespace) -> int:
    """Fit (or read the stored fits), print the tables (or JSON) and save the figure when asked."""
    from adaptlab import results

    store = results.open(args.store)
    try:
        fits, source = _fits(store, args)
    finally:
        store.close()
    if args.figure is not None:
        plot_scaling(fits, args.figure)
    if args.format == "json":
        print_json(
            {
                "fits": scaling_rows(fits),
                "source": "stored" if source.startswith("fits recorded") else "fitted",
                "figure": None if args.figure is None else str(args.figure),
            }
        )
        return 0
    print(format_scaling(fits))
    print(f"\n({source})")
    if args.figure is not None:
        print(f"figure: {args.figure}")
    return 0
