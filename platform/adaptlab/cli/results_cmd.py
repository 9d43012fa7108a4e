"""``adaptlab results``: query the results store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from adaptlab.cli._common import add_common, print_json
from adaptlab.errors import ConfigError

_DEFAULT_COLUMNS = {
    "metrics": ["system", "dataset", "measure", "compared_to", "value", "ci_low", "ci_high", "p_value", "n_queries"],
    "runs": ["run_id", "system", "dataset", "model_id", "timestamp", "host"],
    "per_query": ["system", "dataset", "query_id", "gold_rank", "sim_gold", "sim_random"],
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="query the results store",
                       description="Print rows of the results store, filtered by column values.")
    p.add_argument("--store", required=True, type=Path, help="results store directory")
    p.add_argument("--table", choices=("metrics", "runs", "per_query"), default="metrics")
    p.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                   help="keep rows whose column KEY equals VALUE (VALUE may be a,b,c for 'any of'); repeatable")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    add_common(p)
    p.set_defaults(handler=run)


def parse_filters(items: list[str]) -> dict[str, object]:
    filters: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--filter {item!r}: expected KEY=VALUE, for example --filter system=minilm")
        values = [v.strip() for v in value.split(",")]
        filters[key.strip()] = values if len(values) > 1 else values[0]
    return filters


def run(args: argparse.Namespace) -> int:
    from adaptlab import results

    store = results.open(args.store)
    table = getattr(store, args.table)(**parse_filters(args.filter))
    if args.format == "json":
        print_json(table.to_pylist())
    elif args.format == "csv":
        import pyarrow.csv as pacsv

        flat = table.select([c for c in table.column_names if not str(table.schema.field(c).type).startswith("list")])
        pacsv.write_csv(flat, sys.stdout.buffer)
    else:
        from adaptlab.evaluation.table import render_table

        cols = [c for c in _DEFAULT_COLUMNS[args.table] if c in table.column_names]
        data = table.select(cols).to_pylist()
        print(render_table(cols, [[("" if r[c] is None else r[c]) for c in cols] for r in data]))
        print(f"({table.num_rows} rows)")
    return 0
