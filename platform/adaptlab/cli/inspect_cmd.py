"""``adaptlab inspect``: the queries behind the numbers, from a results store's per-query records.

``--system A --against B``: per-query wins, losses and ties of A against B beside the stored
paired tests, then the queries where A and B differ most (gold passage and its page, the rank
under each system, the top retrieved passage with its score and page). ``--system A`` alone:
A's worst queries. When the system (or ``--against``) is one scale of a scale study's variant
(``<label>-<variant>-s<N>``), the curve's scaling summary follows. Query and passage texts come from ``--data FORMAT:PATH``, else from the
dataset spec each run recorded when it is readable here (one line saying where it looked when
not). A system against itself is said in one line. The Python API is
:func:`adaptlab.analysis.inspect.inspect_queries` (a pyarrow Table) and
:func:`adaptlab.analysis.inspect.win_loss`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from adaptlab.cli._common import add_common, bounded_int, print_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``adaptlab inspect``."""
    p = sub.add_parser(
        "inspect",
        help="show the queries where two systems differ most, or a system's worst queries",
        description="Read the per-query records of a results store: queries where --system and --against "
        "differ most (gold, rank under each, top retrieved passage with score and page), "
        "win/loss counts beside the paired tests; without --against, the worst queries.",
    )
    p.add_argument("--store", required=True, help="results store (directory or s3://... URI)")
    p.add_argument(
        "--system",
        default=None,
        help="the system to inspect (default: with two systems in the store, "
        "the one that is not the study's baseline, --against the baseline)",
    )
    p.add_argument("--against", default=None, help="a second system to compare with (e.g. the base model)")
    p.add_argument("--dataset", default=None, help="only this dataset (default: every dataset)")
    p.add_argument("--limit", type=bounded_int(1), default=10, help="queries to list")
    p.add_argument(
        "--data",
        default=None,
        metavar="FORMAT:PATH",
        help="the dataset (e.g. beir:DIR, such as the held-out set's folder) for query and passage texts",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    add_common(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the inspection (or JSON); returns the exit status."""
    from adaptlab import results
    from adaptlab.analysis import (
        format_inspection,
        inspect_queries,
        inspection_scaling,
        same_system_note,
        scaling_summary,
        scaling_summary_rows,
        win_loss,
    )

    store = results.open(args.store)
    if args.system is None:  # a store of two systems (the quickstart's): one against the other
        from adaptlab.analysis import default_pair

        args.system, default_against = default_pair(store, args.dataset)
        args.against = args.against or default_against
    note = same_system_note(args.system, args.against)
    if note is not None:
        inspect_queries(store, args.system, dataset=args.dataset, limit=1)  # a missing system still fails
        if args.format == "json":
            print_json({"note": note, "win_loss": [], "queries": []})
        else:
            print(_escaped(note))
        return 0
    table = inspect_queries(store, args.system, args.against, dataset=args.dataset, limit=args.limit)
    texts = _texts(args, store, table)
    if texts is not None:
        table = inspect_queries(store, args.system, args.against, dataset=args.dataset, limit=args.limit, texts=texts)
    counts = win_loss(store, args.system, args.against, dataset=args.dataset) if args.against else None
    fits = inspection_scaling(store, args.system, args.against, dataset=args.dataset)
    if args.format == "json":
        print_json({"win_loss": counts, "queries": table.to_pylist(), "scaling": scaling_summary_rows(fits)})
    else:
        print(format_inspection(_escaped_table(table), _escaped(counts)))
        if fits:
            print("\n" + scaling_summary(fits))
    return 0


def _texts(args: argparse.Namespace, store: Any, table: Any) -> Any:
    """Texts per listed dataset: ``--data`` for the datasets whose listed queries it holds (every
    listed one with ``--dataset``), each other dataset's recorded spec where it is readable (one
    line on stderr per dataset it is not, saying where it looked)."""
    from adaptlab.analysis import recorded_texts

    listed: dict[str, set[str]] = {}
    for row in table.select(["dataset", "query_id"]).to_pylist():
        listed.setdefault(row["dataset"], set()).add(row["query_id"])
    texts: dict[str, Any] = {}
    if args.data:
        from adaptlab.data import load_dataset

        data = load_dataset(args.data)
        texts = {ds: data for ds, ids in listed.items() if args.dataset or ids <= set(data.queries)}
    found, notes = recorded_texts(store, sorted(set(listed) - set(texts)))
    for line in notes:
        print(f"adaptlab inspect: {_escaped(line)}", file=sys.stderr)
    return {**texts, **found} or None


def _escaped(value: Any) -> Any:
    """``value`` with every string in it (in lists and dicts too) escaped for the terminal."""
    from adaptlab.analysis.present import terminal_escape

    if isinstance(value, str):
        return terminal_escape(value)
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    return value


def _escaped_table(table: Any) -> Any:
    """The inspection table with its stored texts, ids and names (and the system names in its
    metadata) escaped, so a control character or ANSI escape in a store never reaches the
    terminal raw."""
    import pyarrow as pa

    meta = {k: _escaped(v.decode("utf-8", "replace")).encode() for k, v in (table.schema.metadata or {}).items()}
    return pa.Table.from_pylist(_escaped(table.to_pylist()), schema=table.schema.with_metadata(meta))
