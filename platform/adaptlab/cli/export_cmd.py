"""``adaptlab export``: a results store's latest runs as MTEB result files, ranx JSON, MLflow or W&B runs.

``--to mteb --out DIR``: ``DIR/MODEL/REVISION/TASK.json`` and ``model_meta.json``, laid out as
mteb's own result cache (:func:`adaptlab.results.export_mteb`); ``--to ranx --out DIR``: ``DIR/DATASET/qrels.json`` and
``DIR/DATASET/runs/SYSTEM.json`` (:func:`adaptlab.results.export_ranx`); ``--to mlflow --out URI``:
one MLflow run per stored run in the tracking store at URI, e.g. ``file:///path/mlruns``
(:func:`adaptlab.results.exports.mlflow_log.log_to_mlflow`; ``--artifact FILE`` attaches a report or run
file to each); ``--to wandb --out DIR``: one offline W&B run per stored run in ``DIR/wandb/``,
for ``wandb sync`` to upload later (:func:`adaptlab.results.exports.wandb_log.log_to_wandb`; ``--project``,
``--artifact``). ``--system`` / ``--dataset`` pick the runs.

Files are written whole or not at all; two systems whose names become one file name are refused
(naming both); a failure (a full disk, an unreachable tracking server) is one line, with every
credential of ``--out`` masked in it and in every line printed.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from adaptlab.cli._common import add_common

_TARGETS = ("mteb", "ranx", "mlflow", "wandb")
_TRACKERS = frozenset({"mlflow", "wandb"})


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab export``."""
    p = sub.add_parser(
        "export",
        help="export a results store to MTEB result files, ranx JSON, MLflow or W&B",
        description="Write the latest run of each (system, dataset) in a results store as MTEB TaskResult "
        "JSON files (laid out as mteb's result cache: MODEL/REVISION/TASK.json with "
        "model_meta.json), ranx run/qrels JSON files, MLflow runs (params, metrics with CI bounds, "
        "artifacts) in a tracking store you name, or offline W&B runs (config, summary metrics "
        "with CI bounds, files) for `wandb sync`.",
    )
    p.add_argument("--store", required=True, help="results store (directory or s3://... URI)")
    p.add_argument("--to", required=True, choices=_TARGETS, help="the format to write")
    p.add_argument(
        "--out",
        required=True,
        metavar="PATH_OR_URI",
        help="output folder (mteb, ranx, wandb) or MLflow tracking URI, e.g. file:///tmp/mlruns (mlflow)",
    )
    p.add_argument("--system", default=None, help="only this system")
    p.add_argument("--dataset", default=None, help="only this dataset")
    p.add_argument("--split", default="test", help="mteb: the split name the scores are written under")
    p.add_argument(
        "--language",
        action="append",
        default=None,
        dest="languages",
        metavar="LANG-Script",
        help="mteb: the languages written (default: the MTEB task's eval_langs, else eng-Latn); repeatable",
    )
    p.add_argument("--experiment", default=None, help="mlflow: experiment name (default: the study, else adaptlab)")
    p.add_argument("--project", default=None, help="wandb: project name (default: the study, else adaptlab)")
    p.add_argument(
        "--artifact",
        action="append",
        default=[],
        metavar="FILE",
        help="mlflow, wandb: a file (report, run file) attached to every run; repeatable",
    )
    add_common(p)
    p.set_defaults(handler=run)


def _export(store: Any, args: argparse.Namespace) -> list[str]:
    """Write the export; returns one line per file or MLflow run."""
    from adaptlab import results

    picked: dict[str, Any] = {"system": args.system, "dataset": args.dataset}
    if args.to == "mteb":
        return [
            str(p) for p in results.export_mteb(store, args.out, split=args.split, languages=args.languages, **picked)
        ]
    if args.to == "ranx":
        from adaptlab.results.exports.ranx_io import export_ranx

        return [str(p) for p in export_ranx(store, args.out, **picked)]
    if args.to == "wandb":
        from adaptlab.results import log_to_wandb

        folders = log_to_wandb(store, args.out, project=args.project, artifacts=args.artifact, **picked)
        return [f"run {run_id} -> W&B run {folder}" for run_id, folder in sorted(folders.items())]
    from adaptlab.results.exports.mlflow_log import log_to_mlflow

    logged = log_to_mlflow(store, args.out, experiment=args.experiment, artifacts=args.artifact, **picked)
    return [f"run {run_id} -> MLflow run {mlflow_id}" for run_id, mlflow_id in sorted(logged.items())]


def run(args: argparse.Namespace) -> int:
    """Export; prints what was written; returns the exit status."""
    from adaptlab import results
    from adaptlab.errors import mask_url

    lines = _export(results.open(args.store), args)
    for line in lines:
        print(mask_url(line))
    target = mask_url(args.out)
    print(f"exported {len(lines)} {'runs' if args.to in _TRACKERS else 'files'} to {target} ({args.to})")
    if args.to == "wandb" and any(f"{os.sep}offline-run-" in line for line in lines):  # W&B's offline folders
        print(mask_url(f"offline: upload later with `wandb sync {Path(args.out) / 'wandb'}` (after `wandb login`)"))
    return 0
