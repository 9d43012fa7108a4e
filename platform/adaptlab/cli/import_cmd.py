"""``adaptlab import``: MTEB result files into a results store, as runs of one system.

``adaptlab import --store S --from mteb --system NAME FILE [FILE ...]`` stores each file's scores
(and their CI bounds, when the file has them) as a run of ``NAME`` on the file's task (or
``--dataset``), through :func:`adaptlab.results.import_mteb`; ``adaptlab export --to mteb``
writes them back with the same values.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from adaptlab.cli._common import add_common


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab import``."""
    p = sub.add_parser(
        "import",
        help="import MTEB result files into a results store",
        description="Store the scores of MTEB TaskResult JSON files (as mteb writes them) as runs of "
        "one system, beside adaptlab's own runs.",
    )
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="MTEB result file (TaskName.json)")
    p.add_argument("--store", required=True, help="results store (directory or s3://... URI), created if new")
    p.add_argument("--from", dest="source", choices=("mteb",), default="mteb", help="the files' format")
    p.add_argument("--system", required=True, help="the system name the scores are stored under")
    p.add_argument("--dataset", default=None, help="the dataset name (default: each file's task name)")
    p.add_argument("--split", default="test", help="the split whose scores are imported (default test)")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Import; prints one line per stored run."""
    from adaptlab import results

    ids = results.import_mteb(
        results.open(args.store, create=True), args.files, system=args.system, dataset=args.dataset, split=args.split
    )
    for dataset, run_id in ids.items():
        print(f"{args.system} on {dataset}: run {run_id}")
    print(f"imported {len(ids)} run(s) into {args.store} (mteb)")
    return 0
