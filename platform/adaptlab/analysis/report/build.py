"""``build_report``: read the store (the latest run's row for each system, dataset, measure and
comparison; the latest per-query records), lay out the training table and one section per
dataset, and write ``report.md``, ``report.html`` and ``figures/``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from adaptlab import results
from adaptlab.analysis._options import settings_of, split_options
from adaptlab.analysis.plots import DEFAULT_DPI, FIGURE_FORMATS, check_dpi
from adaptlab.analysis.present import headline_pair, verdict_line
from adaptlab.analysis.report.cells import extra, is_ranking_measure
from adaptlab.analysis.report.document import Document, Page
from adaptlab.analysis.report.groups import groups_section
from adaptlab.analysis.report.missing import compute_missing_analyses
from adaptlab.analysis.report.scale import inspection_section, ndcg_at_k_section, scale_section, scaling_section
from adaptlab.analysis.report.scores import (
    correlation_section,
    isotropy_section,
    other_section,
    overlap_section,
    pairs_section,
    ranking_section,
    record_figures,
    threshold_section,
)
from adaptlab.analysis.report.training import training_section
from adaptlab.analysis.thresholds import ThresholdResult
from adaptlab.errors import ConfigError
from adaptlab.results.query import ANY_GROUP
from adaptlab.retrieval import PerQueryRecords
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ReportOptions", "ReportSettings", "build_report"]


@dataclass(frozen=True)
class ReportSettings:
    """What :func:`build_report` shows and how: the ``systems``/``datasets`` it is restricted to
    (None: all), the K of top-K accuracy ``k`` of the analyses it computes, whether it computes
    analyses the store lacks (``compute_missing``), the report's ``title``, and the figures'
    ``figure_format`` and ``dpi``."""

    systems: Sequence[str] | None = None
    datasets: Sequence[str] | None = None
    k: int = 5
    compute_missing: bool = True
    title: str = "adaptlab report"
    figure_format: str = "png"
    dpi: int = DEFAULT_DPI

    def check(self) -> None:
        """Each bad value a :class:`~adaptlab.errors.ConfigError` naming it."""
        if int(self.k) < 1:
            raise ConfigError(f"k must be >= 1, got {self.k!r}")
        if self.figure_format not in FIGURE_FORMATS:
            raise ConfigError(f"figure_format {self.figure_format!r}: expected one of {', '.join(FIGURE_FORMATS)}")
        check_dpi(self.dpi)


class ReportOptions(TypedDict, total=False):
    """The fields of :class:`ReportSettings` as keywords of :func:`build_report`."""

    systems: Sequence[str] | None
    datasets: Sequence[str] | None
    k: int
    compute_missing: bool
    title: str
    figure_format: str
    dpi: int


class _ReportBootstrap(TypedDict, total=False):
    """The loose bootstrap keywords of :func:`build_report`."""

    n_resamples: int | None
    seed: int | None


class _BuildOptions(ReportOptions, _ReportBootstrap, total=False):
    """The keywords of :func:`build_report`: the report's settings and the loose bootstrap."""


def build_report(
    store_root: str | Path,
    out_dir: str | Path,
    *,
    config: ReportSettings | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[_BuildOptions],
) -> Path:
    """Write the report of ``store_root`` (restricted to ``systems``/``datasets``) to ``out_dir``.

    The settings: ``config`` (a :class:`ReportSettings`) or its fields as keywords, not both.
    ``k`` is the K of top-K accuracy used by analyses computed for the report (thresholds,
    COE/ROE; capped at the retrieval depth) and to pick ``acc@k`` for the correlations.
    ``bootstrap`` (the study's :class:`~adaptlab.stats.BootstrapConfig`) gives their bootstrap
    settings; without it, ``n_resamples`` (default 1000) resamples of all queries seeded by
    ``seed`` (default 0); giving both is an error.
    Figures are written to ``figures/`` as ``figure_format`` (``png``, ``svg`` or ``pdf``; PNG at
    ``dpi``) and embedded in ``report.html`` (PNG or SVG data URIs), which needs no other file.
    """
    given, boot_kw = split_options("build_report", options, ReportOptions, _ReportBootstrap)
    settings = settings_of("build_report", ReportSettings, config, given, "config")
    settings.check()
    cfg = resolve_bootstrap("build_report", bootstrap, **boot_kw)
    store = results.open(store_root)
    out = Path(out_dir)
    figdir = out / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    sys_f = list(settings.systems) if settings.systems else None
    ds_f = list(settings.datasets) if settings.datasets else None
    runs = store.runs(system=sys_f, dataset=ds_f).to_pylist()
    runs.sort(key=lambda r: (str(r.get("timestamp")), r["run_id"]))
    run_order = {r["run_id"]: i for i, r in enumerate(runs)}
    metrics = _latest_rows(store.metrics(system=sys_f, dataset=ds_f, kind="all").to_pylist(), run_order)
    grouped = _latest_rows(
        store.metrics(system=sys_f, dataset=ds_f, kind="all", group=ANY_GROUP).to_pylist(), run_order
    )
    all_datasets = sorted({r["dataset"] for r in runs} | {r["dataset"] for r in metrics})
    doc = _opening(settings.title, store_root, runs, all_datasets, sys_f)
    order = study_order(runs)
    for ds in all_datasets:
        rows = [r for r in metrics if r["dataset"] == ds and r["system"] != "*"]
        records = _records_by_system(store, ds, sys_f, run_order)
        page = Page(doc, out, figdir, ds, store, settings.figure_format, int(settings.dpi), order)
        records = {sys: records[sys] for sys in sorted(records, key=page.rank)}
        _dataset_section(page, rows, records, int(settings.k), cfg, settings.compute_missing)
        groups_section(page, [r for r in grouped if r["dataset"] == ds])
    md = out / "report.md"
    md.write_text(doc.markdown(), encoding="utf-8")
    (out / "report.html").write_text(doc.html(settings.title), encoding="utf-8")
    return md


def _opening(
    title: str, store_root: str | Path, runs: list[dict[str, Any]], datasets: list[str], sys_f: list[str] | None
) -> Document:
    """The report's title, what it reads, the runs shown and the training table."""
    doc = Document()
    doc.h(1, title)
    doc.p(
        f"Store: {store_root}. Runs: {len(runs)}. Datasets: {', '.join(datasets) or 'none'}. "
        "Values are point estimates on all queries. Each interval's method is named per measure (the CI "
        "method column: Wilson score intervals for 0/1 measures such as acc@k, the studentized bootstrap "
        "for the other measures and for paired differences, as stored); bootstrap means and intervals "
        "come from the stored resampling settings (n_resamples, sample_size, seed)."
    )
    if not datasets:
        doc.p("The store holds no runs matching the filters.")
    _runs_shown(doc, runs)
    training_section(doc, runs, sys_f)
    return doc


def _dataset_section(
    page: Page, rows: list[dict[str, Any]], records: dict[str, Any], k: int, cfg: BootstrapConfig, compute_missing: bool
) -> None:
    """Every table and figure of one dataset, in report order."""
    page.doc.h(2, f"Dataset: {page.ds}")
    _verdict(page, rows)
    ds_systems = sorted({r["system"] for r in rows} | set(records))
    computed: list[str] = []
    no_overlap: list[str] = []
    no_density: list[str] = []
    thr_results: list[ThresholdResult] = []
    if compute_missing and records:
        rows, thr_results, computed, no_overlap = compute_missing_analyses(rows, records, k, cfg)
    ranking_section(page, rows)
    scale_section(page, [r for r in rows if is_ranking_measure(r["measure"])])
    pairs_section(page, rows)
    if records:
        ndcg_at_k_section(page, records, cfg)
        scaling_section(page, records, cfg)
        inspection_section(page, list(records))
    by = {(r["system"], r["measure"]): r for r in rows if r.get("compared_to") is None}
    threshold_section(page, by, thr_results)
    overlap_section(page, by)
    if records:
        no_density = record_figures(page, records, k, cfg)
    isotropy_section(page, rows)
    other_section(page, rows)
    correlation_section(page, rows, k)
    if computed:
        page.doc.p(
            "Computed for this report from the stored per-query records (not in the store): "
            + "; ".join(computed)
            + f". Bootstrap: {cfg.n_resamples} resamples, seed {cfg.seed}."
        )
    _left_out_note(page, no_overlap, no_density)
    if not ds_systems:
        page.doc.p("No rows for this dataset.")


def _verdict(page: Page, rows: list[dict[str, Any]]) -> None:
    """One line above the tables, in the words of the paired row below it that matters most
    (:func:`~adaptlab.analysis.present.headline_pair`), as ``run`` and ``compare`` print it."""
    pairs = [r for r in rows if r.get("compared_to") is not None and is_ranking_measure(r["measure"])]
    if not pairs:
        return
    measure = pairs[0]["measure"]
    means = {
        r["system"]: float(r["value"])
        for r in rows
        if r.get("compared_to") is None and r["measure"] == measure and r.get("value") is not None
    }
    row = headline_pair(pairs, means)
    if row is not None:
        page.doc.p("Verdict: " + verdict_line({**extra(dict(row)), **row}))


def _left_out_note(page: Page, no_overlap: list[str], no_density: list[str]) -> None:
    """Which analyses and figures were left out because a system's records carry no gold and
    random similarities (runs scored from TREC files: no embeddings)."""
    parts = [
        f"COE/ROE of {', '.join(no_overlap)}" if no_overlap else "",
        f"the similarity-density panel of {', '.join(no_density)}" if no_density else "",
    ]
    parts = [p for p in parts if p]
    if parts:
        page.doc.p(
            "Left out: " + "; ".join(parts) + ". They need each query's similarity to its gold document and "
            "to a random document, which embedded retrieval records and a TREC run does not (runs scored "
            "with adaptlab evaluate). Run the systems as models in a study to get them."
        )


def study_order(runs: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Each system's place in the report: the study's baseline first, then the study's order of
    systems (runs' ``config["baseline"]`` / ``config["system_order"]``, or a scale study's
    ``baseline`` and ``systems``), then any other system in the order its runs were stored."""
    import json

    first: list[str] = []
    order: list[str] = []
    for r in runs:  # oldest first
        try:
            config = json.loads(r.get("config") or "{}")
        except ValueError:
            config = {}
        if isinstance(config.get("baseline"), str) and config["baseline"]:
            first.append(config["baseline"])
        listed = config.get("system_order") or config.get("systems") or []
        order += [str(x) for x in listed] + [r["system"]]
    return {sys: i for i, sys in enumerate(dict.fromkeys([*first, *order]))}


def _when(run: dict[str, Any]) -> str:
    """A run's time as the report prints it (UTC, to the minute)."""
    ts = run.get("timestamp")
    return ts.strftime("%Y-%m-%d %H:%M UTC") if ts is not None and hasattr(ts, "strftime") else str(ts)


def _runs_shown(doc: Document, runs: list[dict[str, Any]]) -> None:
    """When the store holds several runs of a system on a dataset: which run each section shows
    (the latest of each system and dataset), with its id, date and how many runs it was among.
    ``runs`` is sorted oldest first."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        by.setdefault((r["system"], r["dataset"]), []).append(r)
    if all(len(v) == 1 for v in by.values()):
        return
    doc.p(
        "The store holds several runs of some systems: this report shows the latest run of each system "
        "on each dataset (earlier runs are in the store: adaptlab results --store ... without --latest)."
    )
    doc.table(
        ["Dataset", "System", "Run shown", "Run time", "Runs stored"],
        [
            [ds, s, v[-1]["run_id"][:8], _when(v[-1]), str(len(v))]
            for (s, ds), v in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        ],
    )


def _latest_rows(metrics: list[dict[str, Any]], run_order: dict[str, int]) -> list[dict[str, Any]]:
    """One row per (system, dataset, measure, compared_to, space, k, group): the latest run's."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, r in enumerate(metrics):
        e = extra(r)
        key = (
            r["system"],
            r["dataset"],
            r["measure"],
            r.get("compared_to"),
            e.get("space"),
            e.get("x"),
            e.get("y"),
            r.get("group"),
        )
        rank = (run_order.get(r.get("run_id", ""), -1), i)
        if key not in best or rank >= best[key]["_rank"]:
            best[key] = {**r, "_rank": rank}
    return [{k: v for k, v in r.items() if k != "_rank"} for r in best.values()]


def _records_by_system(
    store: Any, dataset: str, systems: Sequence[str] | None, run_order: dict[str, int]
) -> dict[str, Any]:
    """The latest run's :class:`PerQueryRecords` per system of ``dataset``."""
    import pyarrow.compute as pc  # deferred: importing adaptlab.analysis does not load pyarrow

    table = store.per_query(dataset=dataset, system=list(systems) if systems else None)
    if table.num_rows == 0:
        return {}
    latest: dict[str, str] = {}
    for s, rid in set(zip(table.column("system").to_pylist(), table.column("run_id").to_pylist())):
        if s not in latest or run_order.get(rid, -1) > run_order.get(latest[s], -1):
            latest[s] = rid
    out = {}
    for s in sorted(latest):
        t = table.filter(pc.equal(table.column("run_id"), latest[s]))
        out[s] = PerQueryRecords.from_arrow(t.drop_columns(["run_id"]), system=s, dataset=dataset)
    return out
