"""``adaptlab results``: query the results store, run SQL on it, migrate and compact it.

::

    adaptlab results --store S [--table metrics|comparisons|runs|per_query|scaling|history] [--filter K=V]
                     [--latest] [--version N | --as-of TIME] [--format table|json|csv]
    adaptlab results --store S --wide [--format table|json|csv] [--digits N] [--baseline NAME]
    adaptlab results --store S --format latex [--digits N] [--baseline NAME]
    adaptlab results --store S --sql "SELECT system, avg(value) FROM metrics GROUP BY system"
    adaptlab results --store S --has-run RUN_ID[,RUN_ID...]
    adaptlab results --store S --scaling [--filter variant=ft] [--latest]
    adaptlab results migrate OLD NEW
    adaptlab results compact --store S [--retention-hours H]
    adaptlab results vacuum --store S [--retention-hours H]
    adaptlab results repair --store S
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Mapping

from adaptlab.cli._common import add_common, bounded_int, print_json, suggest
from adaptlab.errors import ConfigError

_DEFAULT_COLUMNS = {
    "metrics": ["run", "time", "system", "dataset", "measure", "value", "ci_low", "ci_high", "n_queries"],
    "comparisons": [
        "run",
        "time",
        "system",
        "compared_to",
        "dataset",
        "measure",
        "value",
        "ci_low",
        "ci_high",
        "p_value",
    ],
    "runs": ["run_id", "timestamp", "system", "dataset", "model_id", "study", "host"],
    "per_query": ["run", "system", "dataset", "query_id", "gold_rank", "sim_gold", "sim_random"],
    "history": ["version", "timestamp", "operation", "commit_id", "n_rows"],
    "scaling": [
        "timestamp",
        "dataset",
        "label",
        "variant",
        "measure",
        "form",
        "slope_per_doubling",
        "slope_low",
        "slope_high",
        "trend",
        "next_scale",
        "predicted_next",
        "predicted_next_low",
        "predicted_next_high",
    ],
}
_ACTIONS = ("show", "migrate", "compact", "vacuum", "repair")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "results",
        help="query, migrate or compact the results store",
        description="Print rows of the results store (a directory or s3://, gs://, az:// URI), filtered by "
        "column values or selected with SQL; with --wide or --format latex, a paper table of the "
        "scores (one row per dataset and system, a column per measure, value [CI]); or "
        "`adaptlab results migrate OLD NEW` to convert a "
        "store of the previous layout; or `adaptlab results compact --store S` to merge small "
        "files; or `adaptlab results vacuum --store S` to delete files no version needs (both safe beside "
        "writers; a short --retention-hours makes older versions unreadable).",
    )
    p.add_argument(
        "action",
        nargs="?",
        default="show",
        metavar="{migrate,compact,vacuum,repair}",
        help="migrate OLD NEW, compact, vacuum, or repair a damaged store (default: print rows)",
    )
    p.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--store", help="results store: a directory or an s3://, gs://, az:// URI")
    _add_selection(p)
    _add_maintenance(p)
    _add_output(p)
    add_common(p)
    p.set_defaults(handler=run)


def _add_selection(p: argparse.ArgumentParser) -> None:
    """Which rows: the table, filters, latest runs, SQL, a past version."""
    p.add_argument(
        "--table",
        choices=("metrics", "comparisons", "runs", "per_query", "scaling", "history"),
        default="metrics",
        help="metrics = scores of one system; comparisons = paired differences (value = system - "
        "compared_to); scaling = the data-scaling fits a scale study recorded; history = the "
        "store's versions (default: metrics)",
    )
    p.add_argument(
        "--scaling",
        dest="table",
        action="store_const",
        const="scaling",
        help="the data-scaling fits a scale study recorded (--table scaling); --latest: the newest fit "
        "of each dataset, variant and measure",
    )
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep rows whose column KEY equals VALUE (VALUE may be a,b,c for 'any of'; each of them "
        "must occur in the store: a typo is refused with the closest stored value); repeatable. "
        "compared_to=X finds comparisons with X on either side; metrics are the whole dataset's "
        "unless group=COLUMN=VALUE (or group=* for every group) asks for per-group rows",
    )
    p.add_argument("--latest", action="store_true", help="only the latest run of each (system, dataset)")
    p.add_argument(
        "--sql",
        metavar="QUERY",
        help="run a DuckDB SQL query over the views runs, metrics, comparisons, metrics_all, per_query, groups "
        "(the per-group rows; the other metric views hold the whole dataset's) and scaling",
    )
    p.add_argument(
        "--version",
        dest="store_version",
        type=int,
        default=None,
        metavar="N",
        help="read the store as it was at version N (see --table history)",
    )
    p.add_argument("--as-of", default=None, metavar="TIME", help="read the store as it was at TIME (ISO 8601)")


def _add_maintenance(p: argparse.ArgumentParser) -> None:
    """Checks and maintenance: --has-run, --strict, the retention of compact and vacuum."""
    p.add_argument(
        "--has-run",
        metavar="RUN_ID[,RUN_ID...]",
        default=None,
        help="say whether each run id is in the store and at which version (exit 0 when all are, 1 when "
        "one is not): after a commit whose outcome was unknown, whether it landed",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a data file that would be read without a recorded SHA-256 (no checksum record, or the "
        "_adaptlab_checksums folder missing) is an error (exit 2), not a warning",
    )
    p.add_argument(
        "--retention-hours",
        type=float,
        default=168.0,
        help="compact, vacuum: keep files needed by versions younger than this (default 168 = 7 days)",
    )


def _add_output(p: argparse.ArgumentParser) -> None:
    """How rows print: the format, the paper table (--wide), its digits and baselines."""
    p.add_argument(
        "--format",
        choices=("table", "json", "csv", "latex"),
        default="table",
        help="latex: a paper table (implies --wide): a booktabs `table` environment with one block per "
        "dataset, the best value of each column in bold and a caption stating the CI level, "
        "method and number of queries",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="one row per (dataset, system), one column per measure, cells 'value [ci_low, ci_high]' "
        "(csv/json: columns M, M_ci_low, M_ci_high); scores of the latest run of each "
        "(system, dataset) unless --filter run_id=... picks runs. A cell is marked with a dagger "
        "when the paired comparison with the system's baseline has adjusted p < 0.05; a measure "
        "filter (--filter measure=a,b) orders the columns",
    )
    p.add_argument(
        "--digits",
        type=bounded_int(0, 12),
        default=None,
        metavar="N",
        help="decimals of --wide and latex cells (default 3)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        metavar="NAME",
        action="append",
        help="--wide/latex: mark comparisons with this system; repeat for per-family baselines "
        "(each system against the first named one it was compared with, e.g. --baseline "
        "colbert-base --baseline minilm-base); default: each system's compared_to, when the "
        "stored comparisons have one baseline per system",
    )


def parse_filters(items: list[str]) -> dict[str, object]:
    """``--filter KEY=VALUE`` items as ``{key: value or [values]}``; each value in Unicode NFC, the
    form every stored name has (a name typed in its decomposed NFD spelling still matches)."""
    import unicodedata

    filters: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--filter {item!r}: expected KEY=VALUE, for example --filter system=minilm")
        values = [unicodedata.normalize("NFC", v.strip()) for v in value.split(",")]
        filters[key.strip()] = values if len(values) > 1 else values[0]
    return filters


def _emit(table, fmt: str, columns: list[str] | None) -> None:
    if fmt == "json":
        print_json(table.to_pylist())
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        flat = _flat(table)
        if sys.stdout.isatty():  # a terminal sees stored names escaped, a pipe or file the data as is
            buf = io.BytesIO()
            pacsv.write_csv(flat, buf)
            _print(buf.getvalue().decode("utf-8").rstrip("\n"))
        else:
            pacsv.write_csv(flat, sys.stdout.buffer)
    else:
        from adaptlab.analysis.present import render_table

        cols = [c for c in (columns or table.column_names) if c in table.column_names]
        data = table.select(cols).to_pylist()
        print(render_table(cols, [[_cell(c, r[c]) for c in cols] for r in data]))
        print(f"({table.num_rows} rows)")


def _flat(table):
    """``table`` with its list and struct columns (per_query's ``topk_ids``, ``topk_scores``,
    ``gold_ids``) as JSON text, so a CSV keeps every column."""
    import json

    import pyarrow as pa

    for i, name in enumerate(table.column_names):
        if str(table.schema.field(name).type).startswith(("list", "large_list", "struct")):
            text = pa.array([None if v is None else json.dumps(v) for v in table.column(name).to_pylist()], pa.string())
            table = table.set_column(i, name, text)
    return table


def _print(text: str) -> None:
    """``text`` on stdout: escaped line by line for a terminal (stored names may hold ANSI
    escapes or control characters), unchanged for a pipe or a file (CSV and JSON are data)."""
    from adaptlab.analysis.present import terminal_escape_lines

    print(terminal_escape_lines(text) if sys.stdout.isatty() else text)


def _cell(column: str, value: object) -> str | int | float | None:
    """A stored value as the text table shows it: times to the second, p-values by the p rule
    (four significant digits), numbers through the renderer's number format, other values
    (lists, structs) as their text."""
    from datetime import datetime

    from adaptlab.analysis.present import format_p

    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if column.startswith("p_") and isinstance(value, float):
        return format_p(value)
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)


def _with_run_columns(store, table):
    """Add ``run`` (the first 8 characters of run_id) and ``time`` (the run's timestamp)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "run_id" not in table.column_names:
        return table
    ids = table.column("run_id")
    table = table.append_column("run", pc.utf8_slice_codeunits(ids, 0, 8))
    if table.num_rows and "time" not in table.column_names:
        uniq = pc.unique(ids).to_pylist()
        runs = store.runs(columns=["run_id", "timestamp"], run_id=uniq)
        when = dict(zip(runs.column("run_id").to_pylist(), runs.column("timestamp").to_pylist()))
        table = table.append_column(
            "time", pa.array([when.get(r) for r in ids.to_pylist()], pa.timestamp("us", tz="UTC"))
        )
    return table


def _open(args: argparse.Namespace):
    from adaptlab import results

    if not args.store:
        raise ConfigError("--store is required: give the results store directory or URI, e.g. --store results/")
    if args.store_version is not None or args.as_of is not None:
        return results.open(args.store, version=args.store_version, as_of=args.as_of, strict=args.strict)
    return results.open(args.store, strict=args.strict)


def run(args: argparse.Namespace) -> int:
    action = args.action
    if action not in _ACTIONS:
        raise ConfigError(
            f"adaptlab results: unknown action {action!r}; expected migrate OLD NEW, compact, vacuum, repair, "
            "or no action to print rows"
        )
    if args.paths and action != "migrate":
        raise ConfigError(f"adaptlab results: unexpected argument(s) {' '.join(args.paths)}")
    if action != "show":
        return _maintain(args)
    _check_wide_options(args)
    store = _open(args)
    if args.has_run is not None:
        return _has_run(store, args)
    if args.sql is not None:
        if args.filter or args.latest:
            raise ConfigError("--sql cannot be combined with --filter or --latest: put them in the query")
        _emit(store.sql(args.sql, as_arrow=True), args.format, None)
        return 0
    if args.table == "history":
        if not hasattr(store, "history"):
            raise ConfigError(
                f"{args.store} is a store of the previous layout: it has no history; "
                f"migrate it with `adaptlab results migrate {args.store} NEW`"
            )
        _emit(store.history(), args.format, _DEFAULT_COLUMNS["history"])
        return 0
    filters = parse_filters(args.filter)
    _check_filter_values(store, args.table, filters)
    if _is_wide(args):
        return _show_wide(store, args, filters)
    from adaptlab.results.store import ResultsStore

    if not isinstance(store, ResultsStore):  # previous layout: read-only, plain tables
        if args.latest:
            raise ConfigError(
                f"--latest needs a Delta Lake store; migrate {args.store} with "
                f"`adaptlab results migrate {args.store} NEW`"
            )
        name = "metrics" if args.table == "comparisons" else args.table
        table = store.table(name, **filters)
        if name == "metrics":  # scores and comparisons apart, as for the Delta store
            import pyarrow.compute as pc

            is_cmp = pc.is_valid(table.column("compared_to"))
            table = table.filter(
                is_cmp if args.table == "comparisons" or "compared_to" in filters else pc.invert(is_cmp)
            )
    else:
        extra = {"kind": "score"} if args.table == "metrics" and "compared_to" not in filters else {}
        table = getattr(store, args.table)(latest=args.latest, **extra, **filters)
    if table.num_rows == 0 and filters:
        _explain_no_match(store, args.table, filters)
    if args.format == "table":
        table = _with_run_columns(store, table)
    _emit(table, args.format, _DEFAULT_COLUMNS[args.table])
    return 0


def _maintain(args: argparse.Namespace) -> int:
    """``results migrate OLD NEW``, ``repair``, ``compact`` and ``vacuum``."""
    action = args.action
    if action == "migrate":
        if len(args.paths) != 2:
            raise ConfigError(
                "adaptlab results migrate: expected two locations, OLD (a store of the previous "
                "layout) and NEW (a new store), e.g. adaptlab results migrate results/ results-delta/"
            )
        from adaptlab.results.legacy.migrate import migrate_store

        report = migrate_store(args.paths[0], args.paths[1])
        _print("\n".join(report.lines()))
        return 0
    if action == "repair":
        return _repair(args)
    if action == "compact":
        out = _open(args).compact(retention_hours=args.retention_hours)
        print(
            f"compacted {args.store}: {out['files_removed']} file(s) merged into {out['files_added']}, "
            f"{out['files_vacuumed']} unreferenced file(s) deleted; store version {out['version']}"
        )
        return 0
    if action == "vacuum":
        got = _open(args).vacuum(retention_hours=args.retention_hours)
        print(
            f"vacuumed {args.store}: {got['files_vacuumed']} unreferenced file(s) deleted; store version {got['version']}"
        )
        return 0
    raise ConfigError(f"adaptlab results: unknown action {action!r}")


def _has_run(store, args: argparse.Namespace) -> int:
    """``--has-run R1,R2``: one line per run id, in the store (at which version) or not; exit 1
    when one is not."""
    ids = [r.strip() for r in args.has_run.split(",") if r.strip()]
    if not ids:
        raise ConfigError("--has-run: expected one or more run ids, e.g. --has-run 0433e818...,203ce427...")
    if not hasattr(store, "has_runs"):
        raise ConfigError(
            f"{args.store} is a store of the previous layout; migrate it with "
            f"`adaptlab results migrate {args.store} NEW`"
        )
    found = store.has_runs(ids)
    now = store.version()
    for run_id in ids:
        v = found[run_id]
        _print(
            f"run {run_id}: "
            + (f"in the store (committed at version {v})" if v is not None else f"not in the store (version {now})")
        )
    return 0 if all(v is not None for v in found.values()) else 1


def _repair(args: argparse.Namespace) -> int:
    """``adaptlab results repair --store S``: fix a damaged store and print what was moved where."""
    from adaptlab.results.health.repair import repair_store

    if not args.store:
        raise ConfigError("adaptlab results repair: --store is required, e.g. adaptlab results repair --store results/")
    _print("\n".join(repair_store(args.store).lines()))
    return 0


def _is_wide(args: argparse.Namespace) -> bool:
    return bool(args.wide) or args.format == "latex"


def _check_wide_options(args: argparse.Namespace) -> None:
    """--wide and --format latex tabulate scores of the metrics table; --digits and --baseline
    only mean something there."""
    if not _is_wide(args):
        for flag, value in (("--digits", args.digits), ("--baseline", args.baseline)):
            if value is not None:
                raise ConfigError(f"{flag} applies to --wide and --format latex only")
        return
    what = "--format latex" if args.format == "latex" else "--wide"
    if args.sql is not None:
        raise ConfigError(f"{what} cannot be combined with --sql: it tabulates the metrics table")
    if args.table != "metrics":
        raise ConfigError(f"{what} tabulates scores (--table metrics); got --table {args.table}")
    if any(item.partition("=")[0].strip() == "compared_to" for item in args.filter):
        raise ConfigError(
            f"{what} shows scores only; --filter compared_to=... selects comparisons (see --table comparisons)"
        )


def _wide_rows(store, args: argparse.Namespace, filters: dict[str, object]) -> list[dict]:
    """Scores and comparisons for the wide table: ``store.wide_rows`` (the rows of
    ``store.wide()`` in a notebook), or for a store of the previous layout every run's rows;
    comparisons are read without the system filter, since a system's comparison may be stored
    from its baseline's side."""
    from adaptlab.results.store import ResultsStore

    if isinstance(store, ResultsStore):
        return store.wide_rows(**filters)
    other = {k: v for k, v in filters.items() if k != "system"}
    if args.latest:
        raise ConfigError(
            f"--latest needs a Delta Lake store; migrate {args.store} with `adaptlab results migrate {args.store} NEW`"
        )
    rows = store.table("metrics", **other).to_pylist()  # previous layout: every run
    wanted = filters.get("system")
    if wanted is not None:
        keep = set(wanted) if isinstance(wanted, list) else {wanted}
        rows = [r for r in rows if r.get("compared_to") is not None or r["system"] in keep]
    return rows


def _show_wide(store, args: argparse.Namespace, filters: dict[str, object]) -> int:
    """Print the wide table (text, csv, json or LaTeX) of adaptlab.analysis.tables."""
    from adaptlab.analysis.present import DIGITS, terminal_escape
    from adaptlab.analysis.tables import render, wide_table
    from adaptlab.results.validate import canonical_measure

    rows = _wide_rows(store, args, filters)
    if not any(r.get("compared_to") is None for r in rows) and filters:
        _explain_no_match(store, "metrics", filters)
    wanted = filters.get("measure")
    order = [canonical_measure(str(m)) for m in (wanted if isinstance(wanted, list) else [wanted] if wanted else [])]
    table = wide_table(rows, measures=order or None, baseline=args.baseline)
    print_out = print if args.format == "table" else _print  # the text table escapes its own cells
    print_out(render(table, args.format, DIGITS if args.digits is None else args.digits))
    if args.format in ("csv", "json"):
        for note in table.notes:
            print(f"note: {terminal_escape(note)}", file=sys.stderr)
    return 0


def _explain_no_match(store, table_name: str, filters: dict[str, object]) -> None:
    """No row matched: a filter value that occurs nowhere in its column (a typo such as
    ``measure=ndgc@10``) is an error naming the close value; otherwise the combination is empty."""
    _refuse_unknown_values(store, table_name, filters)


def _check_filter_values(store, table_name: str, filters: dict[str, object]) -> None:
    """Every value of a multi-value filter of a text column occurs in the store: with
    ``measure=ndcg@10,mrr`` the rows of ndcg@10 would otherwise hide that ``mrr`` (not
    ``mrr@10``) matched nothing. ``compared_to`` is left out: its values may sit in ``system``."""
    several = {k: v for k, v in filters.items() if isinstance(v, list) and k != "compared_to"}
    if several:
        _refuse_unknown_values(store, table_name, several, text_only=True)


def _refuse_unknown_values(store, table_name: str, filters: Mapping[str, object], *, text_only: bool = False) -> None:
    """A :class:`ConfigError` naming the first filter value absent from its column, with the
    closest stored value; ``text_only``: only text columns are checked (a number may be written
    in several ways)."""
    from adaptlab.analysis.present import terminal_escape
    from adaptlab.results.validate import canonical_measure

    name = {"comparisons": "metrics"}.get(table_name, table_name)
    for key, value in filters.items():
        wanted = value if isinstance(value, list) else [value]
        try:
            scope = {"kind": "all", **({"group": "*"} if key == "group" else {})} if name == "metrics" else {}
            present = store.table(name, columns=[key], **scope)
        except Exception:  # noqa: BLE001 - list columns and the like: nothing to suggest
            continue
        stored = [v for v in present.column(key).to_pylist() if v is not None]
        if text_only and not all(isinstance(v, str) for v in stored):
            continue
        known = sorted({terminal_escape(v) for v in stored})
        for w in wanted:
            text = terminal_escape(canonical_measure(str(w)) if key == "measure" else w)
            if text not in known:
                shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
                shown_key = f"{key}={terminal_escape(w)}"
                raise ConfigError(
                    f"--filter {shown_key}: no row of {table_name} has {key} {w!r}{_near(text, known)} "
                    f"(values in the store: {shown or 'none'})"
                )


def _near(text: str, known: list[str]) -> str:
    """The closest stored value, or the stored measures with a cut-off of ``text`` (``mrr`` ->
    ``mrr@10``) as a suggestion."""
    close = suggest(text, known)
    if close:
        return close
    cut = [k for k in known if k.startswith(f"{text}@")]
    return f"; did you mean {' or '.join(repr(k) for k in cut[:3])}?" if cut else ""
