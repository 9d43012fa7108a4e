"""``adaptlab run``: run a study file, or an ad-hoc study from options, on local or remote Ray.

The command only parses options: :meth:`adaptlab.study.Study.with_overrides` applies them and
:func:`adaptlab.study.run_study` runs the study, with or without an ``[adapt]`` section.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from adaptlab.analysis import format_groups, format_pairs, format_summary
from adaptlab.cli._common import (
    add_bootstrap_options,
    add_common,
    bootstrap_overrides,
    bounded_int,
    print_json,
    suggest,
)
from adaptlab.errors import ConfigError, mask_url
from adaptlab.results import check_store_location
from adaptlab.study import Study, load_study, parse_study, run_study
from adaptlab.study.inputs import check_inputs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


ADHOC_LOCAL_BELOW = 2048
"""An ad-hoc run (``--model`` and ``--dataset``, no study file) embeds calls of fewer texts than
this in-process, without starting Ray: a small evaluation (a thousand short texts) does not wait
for Ray's start and an actor (measured on 2 cores: 12-14 s, then 20-30 s before the first actor
embedded), which a pool of two actors embedding at about twice the in-process rate wins back only
from about 1,500 texts of MiniLM a call. A study file decides with its own ``[embedding].local_below``."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab run``."""
    p = sub.add_parser(
        "run",
        help="run a study (TOML) or evaluate --model on --dataset",
        description="Run a study file, or an ad-hoc study given by --model and --dataset. Options given "
        "here override the study file. Without --address Ray starts in-process.",
    )
    p.add_argument("study", nargs="?", type=Path, help="study TOML file (see jobs/)")
    p.add_argument("--model", action="append", default=[], help="model alias, local path or hub id (repeatable)")
    p.add_argument("--dataset", action="append", default=[], help="FORMAT:PATH, e.g. beir:DIR (repeatable)")
    p.add_argument(
        "--dataset-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dataset format option for every --dataset (else every [[datasets]] entry), e.g. "
        "question_col=q or context_col=passage for pairs: CSV/TSV/JSONL files (repeatable)",
    )
    p.add_argument("--split", default=None, help="dataset split (default test)")
    p.add_argument(
        "--metrics",
        default=None,
        help="comma-separated measures, e.g. ndcg@10,recall@100 (default: "
        "the study's [evaluation].metrics; ad hoc: acc@1,acc@5,ndcg@10,mrr@10,recall@100)",
    )
    p.add_argument("--k", type=bounded_int(1), default=None, help="retrieval depth (default 100)")
    add_bootstrap_options(p, defaults=False)
    p.add_argument("--store", help="results store: a directory or an s3://, gs://, az:// URI (overrides the study's)")
    p.add_argument("--no-store", action="store_true", help="do not write to a results store")
    p.add_argument("--address", help="Ray address (overrides the study's); default: embedded local Ray")
    p.add_argument("--no-ray", action="store_true", help="embed in-process instead of on a Ray actor pool")
    p.add_argument(
        "--export-run",
        type=Path,
        help="write the retrieved top-k as a TREC run file (several systems or datasets: one file "
        "each, named after it; the names are printed)",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what the study would do (datasets, systems, adaptation, store) and stop",
    )
    add_common(p)
    p.set_defaults(handler=run)


def build_study(args: argparse.Namespace) -> Study:
    """The study file with command-line overrides, or an ad-hoc study from options."""
    if args.study is not None:
        study = load_study(args.study)
    elif not args.model or not args.dataset:
        raise ConfigError("give a STUDY.toml, or both --model and --dataset (e.g. --model minilm --dataset beir:DIR)")
    else:  # seed 0 as the studies of jobs/ set it, so the same evaluation gives the same intervals
        study = parse_study(
            {
                "study": {"name": "adhoc", "store": ""},
                "bootstrap": {"seed": 0},
                "embedding": {"local_below": ADHOC_LOCAL_BELOW},
                "datasets": [{"spec": d} for d in args.dataset],
                "models": [{"ref": m} for m in args.model],
            },
            source="command line",
        )
    return study.with_overrides(
        models=args.model,
        datasets=args.dataset,
        dataset_options=dataset_options(args.dataset_option),
        split=args.split,
        metrics=args.metrics,
        k=args.k,
        bootstrap=bootstrap_overrides(args),
        use_ray=False if args.no_ray else None,
        store="" if args.no_store else None,
    )


def dataset_options(items: list[str]) -> dict[str, Any]:
    """``--dataset-option KEY=VALUE`` items as a table: a value is read as a TOML value when it
    is one (``3``, ``true``, ``"x"``), else kept as text (``question_col=q``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"--dataset-option {item!r}: expected KEY=VALUE, e.g. question_col=q")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out


def check_model_names(names: list[str]) -> None:
    """A ``--model`` that is no local path, no hub id (``owner/name``) and close to a known alias
    is a typo: say so instead of letting a hub look-up fail later."""
    from adaptlab.models.resolve import MODEL_ALIASES

    for name in names:
        low = name.lower()
        if low in MODEL_ALIASES or "/" in name or ":" in name or Path(name).expanduser().exists():
            continue
        hint = suggest(name, list(MODEL_ALIASES))
        if hint:
            raise ConfigError(
                f"--model {name!r}: not a known alias, a local path or a hub id (owner/name){hint} "
                f"(aliases: {', '.join(sorted(MODEL_ALIASES))})"
            )


def plan(study: Study, store: Any, address: str | None, export_run: Path | None) -> list[str]:
    """What :func:`run_study` would do, one line per item (``--dry-run``)."""
    lines = [f"study {study.study.name!r} from {study.source}"]
    for d in study.datasets:
        lines.append(f"  dataset {d.name or d.spec}: {d.spec} (split {d.split})")
    for m in study.models:
        lines.append(f"  model {m.name or m.ref}: {m.ref} (backend {m.backend})")
    if study.adapt_table:
        a = study.adapt_table  # the keys as written
        keys = ("corpus", "base_model", "unit", "scales", "variants", "questions", "test_fraction")
        lines.append("  adaptation: " + ", ".join(f"{k}={a[k]!r}" for k in keys if k in a))
        lines.append(
            "    -> one held-out dataset, and one adapted system per (scale, variant), each "
            "compared with the base model"
        )
    ev = study.evaluation
    lines.append(
        f"  measures {', '.join(ev.metrics)} at k={ev.k}; bootstrap {study.bootstrap.n_resamples} "
        f"resamples, CI {study.bootstrap.confidence:.0%}"
    )
    root = study.store_root(store) if store != "" else None
    lines.append(
        f"  results store: {mask_url(str(root))}" if root else "  results store: none (results are not stored)"
    )
    lines.append(
        f"  Ray: {mask_url(address or study.study.address or 'embedded local Ray')}"
        + ("" if study.embedding.use_ray else " (embedding in-process)")
    )
    if export_run is not None:
        lines.append(f"  TREC run file(s): {export_run} (one per system and dataset when there are several)")
    return lines


def _exported(export_run: Path, since: float) -> list[Path]:
    """The run files written by this run: ``export_run`` itself or the names derived from it."""
    folder = export_run.parent if str(export_run.parent) else Path(".")
    stem = export_run.stem
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.is_file() and p.name.startswith(stem) and p.stat().st_mtime >= since - 1
    )


def run(args: argparse.Namespace) -> int:
    """Run the study and print every dataset's summary (or JSON)."""
    check_model_names(args.model)
    study = build_study(args)
    store = None if args.no_store else args.store
    if args.dry_run:
        root = study.store_root(store)
        if root is not None:
            check_store_location(root)  # the store a real run would write
        check_inputs(study)  # the datasets and models a real run would need, without running anything
        print("\n".join(plan(study, "" if args.no_store else store, args.address, args.export_run)))
        return 0
    t0 = time.time()
    outcome = run_study(study, store=store, address=args.address, export_run=args.export_run)
    _announce(args, outcome, t0)
    if args.format == "json":
        if len(outcome.datasets) == 1:
            print_json(_json(outcome.datasets[0]))
        else:
            print_json({"datasets": {d.dataset: _json(d) for d in outcome.datasets}})
        return 0
    for d in outcome.datasets:
        print(f"\n== {d.dataset} ==")
        print(format_summary(d.summary))
        pairs = format_pairs(d.summary)
        if pairs:
            print("\npaired differences")
            print(pairs)
        for grouped in d.groups:
            print("\n" + format_groups(grouped))
    if outcome.store is not None:
        versions = [v for d in outcome.datasets if (v := getattr(d.run_ids, "version", None)) is not None]
        at = f" (store version {max(versions)})" if versions else ""
        shown = mask_url(str(outcome.store))
        print(f"\nresults stored in {shown}{at} (adaptlab results --store {shown} --latest)")
    return 0


def _json(d: Any) -> dict[str, Any]:
    """One dataset's summary as JSON, with ``groups`` (``{column: per-group JSON}``) when it has groups."""
    out = d.summary.to_json()
    if d.groups:
        out["groups"] = {g.column: g.to_json() for g in d.groups}
    return out


def _announce(args: argparse.Namespace, outcome: Any, t0: float) -> None:
    """On stderr: where the TREC run files went, and that nothing was stored (when so)."""
    if args.export_run is not None:
        files = _exported(args.export_run, t0)
        if files:
            print("TREC run file(s) written:\n" + "\n".join(f"  {f}" for f in files), file=sys.stderr)
    if outcome.store is None:
        print(
            'results were not stored (--no-store, an ad-hoc run without --store, or [study].store = ""); '
            "add --store DIR to keep them for `adaptlab results`, `report` and `inspect`",
            file=sys.stderr,
        )
