"""The queries behind the numbers: where two systems differ most, a system's worst queries, and
per-query wins and losses beside the paired test, read from the store's per-query records.

Per query, a system's outcome is the reciprocal rank of the first gold document within the
stored top-k (``1 / gold_rank``, 0 when no gold document was retrieved). Against a second
system, a query is a *win* when the reciprocal rank is higher, a *loss* when lower, a *tie*
otherwise; the queries listed are those with the largest absolute difference (ties broken by
query id). Without a second system, the *worst* queries are listed: not retrieved first, then
by rank, then by how far the top document's score is above the gold document's similarity.

Page numbers come from the ids (:func:`adaptlab.data.pdf.parse_page_ref`): chunks of PDFs are
named ``doc#c3@p7-8``, so the gold passage and every retrieved passage show their document and
pages without any other table. Texts are shown when a :class:`~adaptlab.data.dataset.Dataset`
with the same ids is passed (``texts=``, one for every dataset or one per dataset name);
:func:`recorded_texts` loads each dataset from the spec its runs recorded, where it is reachable.

:func:`inspect_queries` returns a pyarrow Table (one row per listed query); :func:`win_loss`
the counts and the stored paired comparisons of the two systems; :func:`format_inspection` a
plain-text rendering (what ``adaptlab inspect`` prints).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adaptlab import results
from adaptlab.analysis._rows import p_bounds, p_draws
from adaptlab.analysis.present import format_number, format_p
from adaptlab.data.dataset import Dataset
from adaptlab.data.pdf import parse_page_ref
from adaptlab.errors import ConfigError

__all__ = [
    "default_pair",
    "format_inspection",
    "inspect_queries",
    "inspection_scaling",
    "page_of",
    "recorded_texts",
    "same_system_note",
    "win_loss",
]

Texts = Dataset | Mapping[str, Dataset] | None
"""Query and passage texts: one dataset for every listed query, or one per dataset name."""

_PQ_COLUMNS = ["system", "dataset", "query_id", "topk_ids", "topk_scores", "gold_ids", "gold_rank", "sim_gold"]


def page_of(item_id: str | None) -> str:
    """``"doc p. 7"`` / ``"doc pp. 7-8"`` for a paged chunk id, ``""`` otherwise."""
    ref = parse_page_ref(item_id or "")
    return f"{ref.document} {ref.label}" if ref is not None else ""


def _open(store: Any) -> Any:
    if isinstance(store, (str, Path)):
        return results.open(store)
    return store


def _records(store: Any, system: str, dataset: str | None) -> dict[tuple[str, str], dict[str, Any]]:
    filters: dict[str, Any] = {"system": system}
    if dataset is not None:
        filters["dataset"] = dataset
    table = store.per_query(columns=_PQ_COLUMNS, latest=True, **filters)
    return {(r["dataset"], r["query_id"]): r for r in table.to_pylist()}


def _known(store: Any, dataset: str | None) -> tuple[list[str], list[str]]:
    runs = store.runs(columns=["system", "dataset"]).to_pylist()
    systems = sorted({r["system"] for r in runs if dataset is None or r["dataset"] == dataset})
    datasets = sorted({r["dataset"] for r in runs})
    return systems, datasets


def _check(store: Any, system: str, found: dict[Any, Any], dataset: str | None) -> None:
    if found:
        return
    systems, datasets = _known(store, dataset)
    if dataset is not None and dataset not in datasets:
        raise ConfigError(f"dataset {dataset!r} is not in the store; it holds: {', '.join(datasets) or 'none'}")
    raise ConfigError(
        f"system {system!r} has no per-query records"
        + (f" on dataset {dataset!r}" if dataset else "")
        + f"; systems in the store: {', '.join(systems) or 'none'}"
    )


def _rr(rank: int | None) -> float:
    return 1.0 / rank if rank else 0.0


def _top(rec: dict[str, Any] | None) -> tuple[str | None, float | None]:
    if not rec or not rec.get("topk_ids"):
        return None, None
    scores = rec.get("topk_scores") or [None]
    return rec["topk_ids"][0], (float(scores[0]) if scores[0] is not None else None)


def _for(texts: Texts, dataset: str) -> Dataset | None:
    """The texts of ``dataset``: its own entry of a mapping, or the one dataset given."""
    return texts.get(dataset) if isinstance(texts, Mapping) else texts


def _spec_of(store: Any, dataset: str) -> tuple[str | None, str]:
    """The dataset spec and split the latest run on ``dataset`` recorded (spec None: none)."""
    runs = store.runs(dataset=dataset, columns=["config", "timestamp"]).to_pylist()
    for run in sorted(runs, key=lambda r: str(r.get("timestamp")), reverse=True):
        try:
            config = json.loads(run.get("config") or "{}")
        except ValueError:
            continue
        if isinstance(config, dict) and isinstance(config.get("dataset"), str):
            return config["dataset"], str(config.get("split") or "test")
    return None, "test"


def recorded_texts(store: Any, datasets: Sequence[str]) -> tuple[dict[str, Dataset], list[str]]:
    """Each of ``datasets`` loaded from the spec its latest run recorded (``config.dataset`` and
    ``config.split``), and one line per dataset whose texts could not be read, saying where it
    looked (a relative path resolves against the current folder)."""
    from adaptlab.data import load_dataset
    from adaptlab.errors import AdaptlabError

    st = _open(store)
    found: dict[str, Dataset] = {}
    notes: list[str] = []
    for ds in datasets:
        spec, split = _spec_of(st, ds)
        if spec is None:
            notes.append(f"texts of {ds!r}: its runs record no dataset spec; pass --data FORMAT:PATH")
            continue
        try:
            found[ds] = load_dataset(spec, split=split)
        except (AdaptlabError, OSError) as e:
            notes.append(
                f"texts of {ds!r}: not readable from the recorded spec {spec!r} (split {split}, "
                f"looked from {Path.cwd()}): {str(e).splitlines()[0] if str(e) else type(e).__name__}; "
                "pass --data FORMAT:PATH"
            )
    return found, notes


def default_pair(store: Any, dataset: str | None = None) -> tuple[str, str]:
    """``(system, against)`` when the store's latest runs leave one choice: every dataset (or
    ``dataset``) has the same two systems; ``against`` is the study's baseline when its runs
    recorded one (``config["baseline"]``), else the first system in study order. Otherwise a
    ConfigError listing the systems per dataset, asking for ``--system`` and ``--against``."""
    store = _open(store)
    rows = store.runs(
        columns=["system", "dataset", "config"], latest=True, **({"dataset": dataset} if dataset else {})
    ).to_pylist()
    per_ds: dict[str, list[str]] = {}
    baseline = ""
    order: list[str] = []
    for r in rows:
        per_ds.setdefault(r["dataset"], []).append(r["system"])
        config = json.loads(r["config"] or "{}")
        baseline = baseline or config.get("baseline") or ""
        order = order or list(config.get("system_order") or [])
    pairs = {tuple(sorted(set(names))) for names in per_ds.values()}
    if len(pairs) != 1 or len(next(iter(pairs))) != 2:
        have = "; ".join(f"{ds}: {', '.join(sorted(set(n)))}" for ds, n in sorted(per_ds.items())) or "no runs"
        raise ConfigError(f"name the two systems with --system and --against (the store's systems per dataset: {have})")
    two = sorted(next(iter(pairs)), key=lambda s: (order.index(s) if s in order else len(order), s))
    against = baseline if baseline in two else two[0]
    return next(s for s in two if s != against), against


def same_system_note(system: str, against: str | None) -> str | None:
    """One line when ``system`` is inspected against itself (every query a tie), else None."""
    if against is not None and against == system:
        return (
            f"{system} against itself: the same per-query records, so every query is a tie; "
            "pick another system for --against"
        )
    return None


def _text(texts: Dataset | None, doc_id: str | None, width: int = 160) -> str | None:
    if texts is None or doc_id is None:
        return None
    doc = texts.corpus.get(doc_id)
    if doc is None:
        return None
    t = " ".join(doc.full_text().split())
    return t if len(t) <= width else t[: width - 3] + "..."


def inspect_queries(
    store: Any,
    system: str,
    against: str | None = None,
    *,
    dataset: str | None = None,
    limit: int = 10,
    texts: Texts = None,
) -> Any:
    """The queries where ``system`` and ``against`` differ most (or, without ``against``, the
    worst queries of ``system``), as a pyarrow Table of at most ``limit`` rows.

    Columns: ``dataset``, ``query_id``, ``query`` (text, when ``texts`` has it), ``gold_ids``,
    ``gold_page``; for each system (suffix ``_a`` for ``system``, ``_b`` for ``against``):
    ``rank`` (1-based, 0 = not in the top-k), ``top_id``, ``top_score``, ``top_page``,
    ``top_text`` (with ``texts``); and ``outcome`` (``win`` / ``loss`` / ``tie`` of ``system``
    against ``against``, ``worst`` without it) and ``rr_diff`` (reciprocal-rank difference
    ``a - b``; ``-rr_a`` without ``against``). Uses the latest run of each (system, dataset).
    """
    import pyarrow as pa

    if limit < 1:
        raise ConfigError(f"limit={limit}: expected a positive integer")
    st = _open(store)
    a = _records(st, system, dataset)
    _check(st, system, a, dataset)
    b: dict[tuple[str, str], dict[str, Any]] = {}
    if against is not None:
        b = _records(st, against, dataset)
        _check(st, against, b, dataset)
        keys = sorted(set(a) & set(b))
        if not keys:
            raise ConfigError(
                f"systems {system!r} and {against!r} share no query" + (f" on {dataset!r}" if dataset else "")
            )
        scored = [(-abs(_rr(a[k]["gold_rank"]) - _rr(b[k]["gold_rank"])), k) for k in keys]
    else:
        keys = sorted(a)

        def badness(k: tuple[str, str]) -> tuple[float, float]:
            r = a[k]
            rank = r["gold_rank"] or 0
            _, top = _top(r)
            margin = (top or 0.0) - (r["sim_gold"] if r["sim_gold"] is not None else 0.0)
            return (-(10**9) if rank == 0 else -rank, -margin)

        scored = [(badness(k), k) for k in keys]  # type: ignore[misc]
    scored.sort(key=lambda x: (x[0], x[1]))
    chosen = [k for _, k in scored[:limit]]

    rows = [_row(k, a[k], b.get(k), against is not None, texts) for k in chosen]
    schema_fields = [
        ("dataset", pa.string()),
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("gold_ids", pa.list_(pa.string())),
        ("gold_page", pa.string()),
    ]
    for suffix in ("a", "b") if against is not None else ("a",):
        schema_fields += [
            (f"rank_{suffix}", pa.int32()),
            (f"top_id_{suffix}", pa.string()),
            (f"top_score_{suffix}", pa.float64()),
            (f"top_page_{suffix}", pa.string()),
            (f"top_text_{suffix}", pa.string()),
        ]
    schema_fields += [("outcome", pa.string()), ("rr_diff", pa.float64())]
    schema = pa.schema(
        schema_fields,
        metadata={
            b"system": system.encode(),
            b"against": (against or "").encode(),
        },
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _row(
    k: tuple[str, str], ra: dict[str, Any], rb: dict[str, Any] | None, paired: bool, all_texts: Texts
) -> dict[str, Any]:
    """One listed query: gold, each system's rank and top passage, the outcome."""
    texts = _for(all_texts, k[0])
    gold = list(ra.get("gold_ids") or [])
    row: dict[str, Any] = {
        "dataset": k[0],
        "query_id": k[1],
        "query": texts.queries.get(k[1]) if texts is not None else None,
        "gold_ids": gold,
        "gold_page": page_of(gold[0]) if gold else "",
    }
    for suffix, rec in (("a", ra), ("b", rb)) if paired else (("a", ra),):
        top_id, top_score = _top(rec)
        row[f"rank_{suffix}"] = int(rec["gold_rank"] or 0) if rec else 0
        row[f"top_id_{suffix}"] = top_id
        row[f"top_score_{suffix}"] = top_score
        row[f"top_page_{suffix}"] = page_of(top_id)
        row[f"top_text_{suffix}"] = _text(texts, top_id)
    if paired:
        diff = _rr(ra["gold_rank"]) - _rr(rb["gold_rank"] if rb else 0)
        row["outcome"] = "win" if diff > 0 else "loss" if diff < 0 else "tie"
        row["rr_diff"] = diff
    else:
        row["outcome"] = "worst"
        row["rr_diff"] = -_rr(ra["gold_rank"])
    return row


def win_loss(
    store: Any,
    system: str,
    against: str,
    *,
    dataset: str | None = None,
    measures: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Per dataset: how many queries ``system`` wins, loses and ties against ``against``
    (reciprocal rank of the first gold document, as in :func:`inspect_queries`), beside the
    stored paired comparisons of the two (difference, CI and p-value per measure; ``measures``
    limits them). The sign of a stored comparison is turned so that it reads ``system -
    against``."""
    st = _open(store)
    a = _records(st, system, dataset)
    _check(st, system, a, dataset)
    b = _records(st, against, dataset)
    _check(st, against, b, dataset)
    out: list[dict[str, Any]] = []
    for ds in sorted({k[0] for k in a} & {k[0] for k in b}):
        keys = [k for k in a if k[0] == ds and k in b]
        diffs = [_rr(a[k]["gold_rank"]) - _rr(b[k]["gold_rank"]) for k in keys]
        comps = st.metrics(system=[system], compared_to=[against], dataset=ds, latest=True).to_pylist()
        tests = []
        for c in comps:
            if measures and c["measure"] not in measures:
                continue
            flip = c["system"] != system
            value, lo, hi = c["value"], c["ci_low"], c["ci_high"]
            if flip:  # stored once as (A, compared_to B, A - B): read it as system - against
                value = -value if value is not None else None
                lo, hi = (-hi if hi is not None else None), (-lo if lo is not None else None)
            tests.append(
                {
                    "measure": c["measure"],
                    "difference": value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "p_value": c["p_value"],
                    "n_resamples": p_draws(c),
                    "p_bound": p_bounds(c)[0],
                }
            )
        out.append(
            {
                "dataset": ds,
                "system": system,
                "against": against,
                "queries": len(keys),
                "wins": sum(d > 0 for d in diffs),
                "losses": sum(d < 0 for d in diffs),
                "ties": sum(d == 0 for d in diffs),
                "paired_tests": tests,
            }
        )
    return out


def _fmt(v: Any) -> str:
    """A number as every adaptlab table prints it (:mod:`adaptlab.analysis.present`); ``-`` for None."""
    return "-" if v is None else format_number(v)


def format_inspection(table: Any, counts: list[dict[str, Any]] | None = None) -> str:
    """Plain text of :func:`inspect_queries` (and :func:`win_loss`) for a terminal or a log."""
    meta = table.schema.metadata or {}
    system = meta.get(b"system", b"").decode()
    against = meta.get(b"against", b"").decode()
    lines: list[str] = []
    for c in counts or []:
        lines.append(
            f"{c['dataset']}: {system} vs {against} over {c['queries']} queries: "
            f"{c['wins']} win(s), {c['losses']} loss(es), {c['ties']} tie(s) (reciprocal rank of the first gold)"
        )
        for t in c["paired_tests"]:
            # a p at its Monte Carlo floor prints "<= p", as compare prints it (older rows: the floor 2/(N+1))
            p = format_p(t["p_value"], bound=True) if t.get("p_bound") else format_p(t["p_value"], t.get("n_resamples"))
            lines.append(
                f"  paired test {t['measure']}: {system} - {against} = {_fmt(t['difference'])} "
                f"[{_fmt(t['ci_low'])}, {_fmt(t['ci_high'])}], p {p if p.startswith('<') else '= ' + p}"
            )
    title = f"queries where {system} and {against} differ most" if against else f"worst queries of {system}"
    lines.append(f"{title} ({table.num_rows}):")
    for r in table.to_pylist():
        gold = ", ".join(r["gold_ids"][:3]) + (" ..." if len(r["gold_ids"]) > 3 else "")
        lines.append(f"- [{r['dataset']}] {r['query_id']}" + (f": {r['query']}" if r.get("query") else ""))
        lines.append(f"    gold: {gold}" + (f" ({r['gold_page']})" if r["gold_page"] else ""))
        for suffix, name in (("a", system), ("b", against)):
            if f"rank_{suffix}" not in r:
                continue
            rank = r[f"rank_{suffix}"]
            where = f"rank {rank}" if rank else "gold not in top-k"
            page = f" ({r[f'top_page_{suffix}']})" if r[f"top_page_{suffix}"] else ""
            lines.append(
                f"    {name}: {where}; top: {r[f'top_id_{suffix}']}{page} score {_fmt(r[f'top_score_{suffix}'])}"
            )
            if r.get(f"top_text_{suffix}"):
                lines.append(f"      {r[f'top_text_{suffix}']}")
        if against:
            lines.append(f"    outcome for {system}: {r['outcome']} (reciprocal-rank difference {_fmt(r['rr_diff'])})")
    return "\n".join(lines)


def inspection_scaling(
    store: Any, system: str, against: str | None = None, *, dataset: str | None = None, measure: str = "ndcg@10"
) -> list[Any]:
    """The data-scaling fits of the scale curve an inspected system belongs to (``system``, else
    ``against``, named ``<label>-<variant>-s<N>``; :mod:`adaptlab.analysis.scaling`): the fits the
    store recorded for it, else fitted now from the stored records of ``measure`` with the default
    bootstrap; [] when neither system is on a curve of 2 or more scales beside its own base."""
    from adaptlab.analysis.compare import store_groups
    from adaptlab.analysis.scaling import scale_curve_fits, stored_scaling
    from adaptlab.models.variants import BASE, parse_system_name

    parsed = [p for p in (parse_system_name(s) for s in (system, against) if s) if p and p[1] != BASE and p[2]]
    if not parsed:
        return []
    key = (parsed[0][0], parsed[0][1])
    store = _open(store)
    stored = [f for f in stored_scaling(store, measure, dataset=dataset) if (f.label, f.variant) == key]
    if stored:
        return stored
    try:
        groups = store_groups(store, dataset, [measure])
    except ConfigError:
        return []
    return [
        f
        for (ds, m), (names, values) in groups.items()
        for f in scale_curve_fits(dict(zip(names, values)), m, dataset=ds, only=key)
    ]
