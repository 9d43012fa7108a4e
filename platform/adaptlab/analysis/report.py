"""A Markdown + HTML report of a results store: tables of every stored measure with its CI,
paired comparisons, thresholds, COE/ROE, isotropy, correlations, and the figures that can be
drawn from the store (CI forest plots, similarity densities, nDCG@k curves, thresholds).

For a scale study it adds: a "Training" table (per adapted model: steps, epochs asked and run,
warm-up and total steps, peak learning rate, first and last loss, relative weight change and the
training checks' warnings; from ``config.systems`` of the runs, else the artifact manifests);
measures against the data scale with paired gains over each family's own base (a ColBERT
variant against ``colbert-base``); nDCG@k for k = 1..10 per scale and variant with CI bands
(reference 004, Figure 3); and an "Inspection" section (win/loss counts beside the paired tests,
and the queries where an adapted system and its base differ most). Every figure has labelled
axes, a legend, its CI level and a one-line caption saying what to look for.

``build_report(store_root, out_dir)`` writes ``out_dir/report.md``, ``out_dir/report.html``
and ``out_dir/figures/*.png`` and returns the Markdown path. For each (system, dataset,
measure, comparison) the row of the most recent run is shown. When the store has per-query
records but no ``threshold``/``coe`` rows for a system, those analyses are computed for the
report (``compute_missing=True``; marked as such). Figures that need embeddings (domain shift
histograms, topic maps) cannot be drawn from the store: make them with
:mod:`adaptlab.analysis.plots`.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab import results
from adaptlab.analysis import plots
from adaptlab.analysis._resample import bootstrap_settings
from adaptlab.analysis.correlation import correlation_table, measure_values
from adaptlab.analysis.curves import ndcg_curve_from_records
from adaptlab.analysis.inspect import format_inspection, inspect_queries, win_loss
from adaptlab.analysis.overlap import overlap_metrics, similarity_distributions
from adaptlab.analysis.scale_curves import curves_table, parse_system_name, plot_scale_curves, scale_curves
from adaptlab.analysis.thresholds import ThresholdResult, similarity_thresholds
from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure
from adaptlab.retrieval import PerQueryRecords
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.pvalues import ci_label, format_p_value

__all__ = ["build_report"]

_ANALYSIS_SECTIONS = ("threshold", "acc_at_threshold", "threshold_loss", "coe", "roe", "isoscore", "isotropy_mu", "isotropy_mu_exact")


def _is_ranking_measure(m: str) -> bool:
    try:
        return str(Measure.parse(m)) == m
    except Exception:  # noqa: BLE001 - any parse failure means "not a ranking measure"
        return False


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        return f"{x:.{digits}f}"
    return str(x)


_ADJ = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "none"}


def _ci_label(rows: Sequence[dict[str, Any]]) -> str:
    """``"95% CI"`` from the rows' stored ``confidence`` (older rows without it: 95%, the only
    level they could have been written with by default); ``"CI"`` when the rows disagree."""
    levels = {r.get("confidence") for r in rows}
    levels.discard(None)
    methods = {r.get("interval_method") for r in rows} - {None}
    if len(levels) > 1:
        return "CI"
    conf = levels.pop() if levels else 0.95
    return ci_label(conf, methods.pop() if len(methods) == 1 else None)


def _adjusted(r: dict[str, Any]) -> str:
    if r.get("p_adjusted") is None:
        return "n/a"
    return f"{format_p_value(r['p_adjusted'])} ({_ADJ.get(str(r.get('adjustment')), r.get('adjustment'))}, " \
           f"n={_fmt(r.get('family_size'))})"


def _pct(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{100 * float(x):.1f}%"


def _ci(lo: Any, hi: Any) -> str:
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (lo, hi)):
        return "n/a"
    return f"[{lo:.4f}, {hi:.4f}]"


def _width(lo: Any, hi: Any) -> str:
    if lo is None or hi is None:
        return "n/a"
    return _fmt(float(hi) - float(lo))


def _extra(row: dict[str, Any]) -> dict[str, Any]:
    e = row.get("extra")
    if not e:
        return {}
    try:
        out = json.loads(e)
    except (TypeError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


class _Doc:
    """Blocks rendered to Markdown and to HTML."""

    def __init__(self) -> None:
        self.blocks: list[tuple[Any, ...]] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.blocks.append(("table", list(header), [[str(c) for c in r] for r in rows]))

    def img(self, rel: str, alt: str) -> None:
        self.blocks.append(("img", rel, alt))

    def pre(self, text: str) -> None:
        self.blocks.append(("pre", text))

    def markdown(self) -> str:
        out: list[str] = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2])
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "table":
                esc = [[c.replace("|", "\\|") for c in r] for r in [b[1], *b[2]]]
                out.append("| " + " | ".join(esc[0]) + " |")
                out.append("|" + "|".join("---" for _ in esc[0]) + "|")
                out.extend("| " + " | ".join(r) + " |" for r in esc[1:])
            elif b[0] == "img":
                out.append(f"![{b[2]}]({b[1]})")
            elif b[0] == "pre":
                out.append("```\n" + b[1] + "\n```")
            out.append("")
        return "\n".join(out)

    def html(self, title: str) -> str:
        out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>",
               "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
               "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
               "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}</style>",
               "</head><body>"]
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"<h{b[1]}>{html.escape(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                out.append(f"<p>{html.escape(b[1])}</p>")
            elif b[0] == "table":
                head = "".join(f"<th>{html.escape(c)}</th>" for c in b[1])
                out.append(f"<table><thead><tr>{head}</tr></thead><tbody>")
                out.extend("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in b[2])
                out.append("</tbody></table>")
            elif b[0] == "img":
                out.append(f"<p><img src='{html.escape(b[1])}' alt='{html.escape(b[2])}'></p>")
            elif b[0] == "pre":
                out.append(f"<pre>{html.escape(b[1])}</pre>")
        out.append("</body></html>")
        return "\n".join(out)


def _latest_rows(metrics: list[dict[str, Any]], run_order: dict[str, int]) -> list[dict[str, Any]]:
    """One row per (system, dataset, measure, compared_to, space, k): the latest run's."""
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, r in enumerate(metrics):
        e = _extra(r)
        key = (r["system"], r["dataset"], r["measure"], r.get("compared_to"), e.get("space"), e.get("x"), e.get("y"))
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


@dataclass(frozen=True)
class _Page:
    """Where one dataset's section goes: the document, the output folder and its figures."""

    doc: _Doc
    out: Path
    figdir: Path
    ds: str
    store: Any = None

    def figure(self, path: Path, alt: str, caption: str) -> None:
        """The image and its one-line caption (what to look for)."""
        self.doc.img(path.relative_to(self.out).as_posix(), alt)
        self.doc.p(f"Figure: {caption}")


def build_report(
    store_root: str | Path,
    out_dir: str | Path,
    *,
    systems: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    k: int = 5,
    compute_missing: bool = True,
    n_resamples: int = 1000,
    seed: int = 0,
    bootstrap: BootstrapConfig | None = None,
    title: str = "adaptlab report",
) -> Path:
    """Write the report of ``store_root`` (restricted to ``systems``/``datasets``) to ``out_dir``.

    ``k`` is the K of top-K accuracy used by analyses computed for the report (thresholds,
    COE/ROE; capped at the retrieval depth) and to pick ``acc@k`` for the correlations.
    ``bootstrap`` (the study's :class:`~adaptlab.stats.BootstrapConfig`) gives their bootstrap
    settings; without it, ``n_resamples`` resamples of all queries seeded by ``seed``.
    """
    if int(k) < 1:
        raise ConfigError(f"k must be >= 1, got {k!r}")
    cfg = bootstrap_settings(bootstrap, n_resamples=n_resamples, seed=seed)
    store = results.open(store_root)
    out = Path(out_dir)
    figdir = out / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    sys_f = list(systems) if systems else None
    ds_f = list(datasets) if datasets else None
    runs = store.runs(system=sys_f, dataset=ds_f).to_pylist()
    runs.sort(key=lambda r: (str(r.get("timestamp")), r["run_id"]))
    run_order = {r["run_id"]: i for i, r in enumerate(runs)}
    metrics = _latest_rows(store.metrics(system=sys_f, dataset=ds_f, kind="all").to_pylist(), run_order)
    all_datasets = sorted({r["dataset"] for r in runs} | {r["dataset"] for r in metrics})

    doc = _Doc()
    doc.h(1, title)
    doc.p(f"Store: {store_root}. Runs: {len(runs)}. Datasets: {', '.join(all_datasets) or 'none'}. "
          "Values are point estimates on all queries; bootstrap means and percentile confidence "
          "intervals come from the stored resampling settings (n_resamples, sample_size, seed).")
    if not all_datasets:
        doc.p("The store holds no runs matching the filters.")
    _training_section(doc, runs, sys_f)
    for ds in all_datasets:
        rows = [r for r in metrics if r["dataset"] == ds and r["system"] != "*"]
        records = _records_by_system(store, ds, sys_f, run_order)
        _dataset_section(_Page(doc, out, figdir, ds, store), rows, records, int(k), cfg, compute_missing)

    md = out / "report.md"
    md.write_text(doc.markdown(), encoding="utf-8")
    (out / "report.html").write_text(doc.html(title), encoding="utf-8")
    return md


def _dataset_section(page: _Page, rows: list[dict[str, Any]], records: dict[str, Any], k: int,
                     cfg: BootstrapConfig, compute_missing: bool) -> None:
    """Every table and figure of one dataset, in report order."""
    page.doc.h(2, f"Dataset: {page.ds}")
    ds_systems = sorted({r["system"] for r in rows} | set(records))
    computed: list[str] = []
    thr_results: list[ThresholdResult] = []
    if compute_missing and records:
        rows, thr_results, computed = _compute_missing(rows, records, k, cfg)
    _ranking_section(page, rows)
    _scale_section(page, [r for r in rows if _is_ranking_measure(r["measure"])])
    _pairs_section(page, rows)
    if records:
        _ndcg_at_k_section(page, records, cfg)
        _inspection_section(page, sorted(records))
    by = {(r["system"], r["measure"]): r for r in rows if r.get("compared_to") is None}
    _threshold_section(page, by, thr_results)
    _overlap_section(page, by)
    if records:
        _record_figures(page, records, k, cfg)
    _isotropy_section(page, rows)
    _other_section(page, rows)
    _correlation_section(page, rows, k)
    if computed:
        page.doc.p("Computed for this report from the stored per-query records (not in the store): "
                   + "; ".join(computed) + f". Bootstrap: {cfg.n_resamples} resamples, seed {cfg.seed}.")
    if not ds_systems:
        page.doc.p("No rows for this dataset.")


def _compute_missing(rows: list[dict[str, Any]], records: dict[str, Any], k: int, cfg: BootstrapConfig,
                     ) -> tuple[list[dict[str, Any]], list[ThresholdResult], list[str]]:
    """Thresholds and COE/ROE for the systems whose records are stored but whose rows are not."""
    rows = list(rows)
    have = {(r["system"], r["measure"]) for r in rows}
    thr_results: list[ThresholdResult] = []
    computed: list[str] = []
    for s, rec in records.items():
        kk = min(k, rec.k) if rec.k else 0
        if kk < 1 or not any(len(g) for g in rec.gold_ids):
            continue
        if (s, "threshold") not in have:
            tr = similarity_thresholds(rec, k=kk, bootstrap=cfg)
            thr_results.append(tr)
            rows += tr.to_metric_rows()
            computed.append(f"{s}: threshold")
        if (s, "coe") not in have:
            rows += overlap_metrics(rec, k=kk, bootstrap=cfg).to_metric_rows()
            computed.append(f"{s}: COE/ROE")
    return rows, thr_results, computed


def _ranking_section(page: _Page, rows: list[dict[str, Any]]) -> None:
    """The retrieval measures with their CIs, and one CI forest plot per measure."""
    rank_rows = sorted((r for r in rows if r.get("compared_to") is None and _is_ranking_measure(r["measure"])),
                       key=lambda r: (r["measure"], r["system"]))
    if not rank_rows:
        return
    page.doc.h(3, "Retrieval measures")
    label = _ci_label(rank_rows)
    page.doc.table(["System", "Measure", "Value", "Boot mean", label, "CI width", "Queries", "Missing from run",
                    "Resamples x size"],
                   [[r["system"], r["measure"], _fmt(r["value"]), _fmt(r.get("boot_mean")),
                     _ci(r.get("ci_low"), r.get("ci_high")), _width(r.get("ci_low"), r.get("ci_high")),
                     _fmt(r.get("n_queries")), _fmt(r.get("missing_from_run")),
                     f"{_fmt(r.get('n_resamples'))} x {_fmt(r.get('sample_size'))}"]
                    for r in rank_rows])
    for m in sorted({r["measure"] for r in rank_rows}):
        mr = [r for r in rank_rows if r["measure"] == m]
        if any(r.get("ci_low") is not None for r in mr):
            path = plots.plot_ci_forest(
                [r["system"] for r in mr],
                [r["boot_mean"] if r.get("boot_mean") is not None else r["value"] for r in mr],
                [r["ci_low"] if r.get("ci_low") is not None else math.nan for r in mr],
                [r["ci_high"] if r.get("ci_high") is not None else math.nan for r in mr],
                page.figdir / f"{_slug(page.ds)}_{_slug(m)}_forest.png", measure=m,
                title=f"{m} on {page.ds} ({_ci_label(mr)})", ci=_ci_label(mr))
            page.figure(path, f"{m} with {_ci_label(mr)} on {page.ds}",
                        f"{m} per system with its {_ci_label(mr)}; systems whose intervals do not overlap differ "
                        "clearly, overlapping ones need the paired test below.")


def _pairs_section(page: _Page, rows: list[dict[str, Any]]) -> None:
    pair_rows = sorted((r for r in rows if r.get("compared_to") and _is_ranking_measure(r["measure"])),
                       key=lambda r: (r["measure"], r["system"], r["compared_to"]))
    if pair_rows:
        page.doc.h(3, "Paired comparisons (A - B, paired bootstrap)")
        exact = any(r.get("p_exact") is not None for r in pair_rows)
        head = ["A", "B", "Measure", "Difference", "Boot mean", _ci_label(pair_rows), "p-value", "p adjusted (family)"]
        if exact:
            head.append("p exact (sign test)")
        table = []
        for r in pair_rows:
            row = [r["system"], r["compared_to"], r["measure"], _fmt(r["value"]), _fmt(r.get("boot_mean")),
                   _ci(r.get("ci_low"), r.get("ci_high")), format_p_value(r.get("p_value"), r.get("n_resamples")),
                   _adjusted(r)]
            if exact:
                row.append(format_p_value(r.get("p_exact")))
            table.append(row)
        page.doc.table(head, table)
        adj = sorted({str(r.get("adjustment")) for r in pair_rows if r.get("adjustment")})
        page.doc.p("p-value: two-sided paired bootstrap, bounded below by 2/(m+1) for m resamples. "
                   + (f"p adjusted: {', '.join(_ADJ.get(a, a) for a in adj)} within each family (one dataset, one "
                      "measure; the family size in parentheses); read significance from it, not from the raw p."
                      if adj else "No multiplicity adjustment is stored for these rows (written before it existed).")
                   + (" Fewer than 30 queries: bootstrap intervals are unreliable, read the exact sign test."
                      if exact else ""))


def _threshold_section(page: _Page, by: dict[tuple[str, str], dict[str, Any]],
                       thr_results: list[ThresholdResult]) -> None:
    thr_sys = sorted({s for (s, m) in by if m == "threshold"})
    if not thr_sys:
        return
    page.doc.h(3, "Similarity thresholds (reference 000, Sec. 2.2)")
    trows = []
    for s in thr_sys:
        t, a = by[(s, "threshold")], by.get((s, "acc_at_threshold"), {})
        loss = by.get((s, "threshold_loss"), {})
        te, ae = _extra(t), _extra(a) if a else {}
        both = []
        for key, name in (("paper", "paper"), ("margin_rule", "margin")):
            ch = te.get(key)
            if isinstance(ch, dict):
                both.append(f"{name}: " + (f"{_fmt(ch.get('tau'), 3)} ({_fmt(ch.get('psi'), 0)})"
                                           if ch.get("tau") is not None else "none"))
        trows.append([s, _fmt(te.get("k")), str(te.get("test", "n/a")),
                      f"{_fmt(t['value'], 3)} ({_fmt(te.get('psi'), 0)})",
                      _pct(te.get("removed")), _fmt(ae.get("base_boot_mean")), _fmt(a.get("boot_mean") if a else None),
                      _ci(a.get("ci_low"), a.get("ci_high")) if a else "n/a",
                      _fmt(loss.get("value")) if loss else "n/a",
                      _ci(loss.get("ci_low"), loss.get("ci_high")) if loss else "n/a", "; ".join(both) or "n/a"])
    label = _ci_label([by[(s, "threshold")] for s in thr_sys])
    page.doc.table(["System", "K", "Rule", "tau (psi)", "Top-K removed", "Boot acc", "Boot acc @ tau",
                    f"{label} @ tau", "Loss", f"Loss {label}", "Both rules: tau (psi)"], trows)
    page.doc.p("Rules: 'margin' (default) takes the highest tau whose paired accuracy loss has a CI upper end "
               "at most the margin (0.01 = one point), resampling all queries; 'paper' takes the highest tau "
               "whose resampled thresholded accuracies have a percentile CI containing the bootstrap mean "
               "accuracy (reference 000's wording). Top-K removed: the share of retrieved top-K documents below "
               "tau. See docs/metrics.md.")
    if thr_results:
        ci = ci_label(thr_results[0].confidence)
        path = plots.plot_thresholds(thr_results, page.figdir / f"{_slug(page.ds)}_thresholds.png",
                                     title=f"Accuracy vs threshold on {page.ds} ({ci})", ci=ci)
        page.figure(path, f"accuracy against threshold on {page.ds}",
                    "how much top-K accuracy each system keeps as low-similarity documents are dropped; the star "
                    "is the chosen threshold, the dotted line the accuracy without one.")


def _overlap_section(page: _Page, by: dict[tuple[str, str], dict[str, Any]]) -> None:
    ov_sys = sorted({s for (s, m) in by if m in ("coe", "roe")})
    if not ov_sys:
        return
    page.doc.h(3, "Distribution overlap: COE and ROE (reference 000, Sec. 2.3)")
    orows = []
    for s in ov_sys:
        c, r_ = by.get((s, "coe"), {}), by.get((s, "roe"), {})
        e = _extra(c or r_)
        orows.append([s, _fmt(e.get("k")), _fmt(e.get("psi"), 1), _fmt(c.get("boot_mean")),
                      _ci(c.get("ci_low"), c.get("ci_high")), _fmt(r_.get("boot_mean")),
                      _ci(r_.get("ci_low"), r_.get("ci_high"))])
    label = _ci_label([r for (s, m), r in by.items() if m in ("coe", "roe")])
    page.doc.table(["System", "K", "psi", "COE", f"COE {label}", "ROE", f"ROE {label}"], orows)


def _record_figures(page: _Page, records: dict[str, Any], k: int, cfg: BootstrapConfig) -> None:
    """Similarity densities and nDCG@k curves drawn from the stored per-query records."""
    dists = [similarity_distributions(rec, k=min(k, rec.k)) for rec in records.values() if rec.k]
    if dists:
        kk = sorted({d.k for d in dists})
        path = plots.plot_similarity_densities(
            dists, page.figdir / f"{_slug(page.ds)}_densities.png",
            title=f"S_rand (red), S_corr (green), S_top{kk[0] if len(kk) == 1 else 'K'} (blue) on {page.ds}")
        page.figure(path, f"similarity densities on {page.ds}",
                    "the further the green (gold) and blue (retrieved) densities sit from the red (random) one, "
                    "the better a system separates relevant from unrelated documents.")
    curves = [ndcg_curve_from_records(rec, bootstrap=cfg)
              for rec in records.values() if rec.k and any(len(g) for g in rec.gold_ids)]
    if curves:
        ci = ci_label(cfg.confidence)
        path = plots.plot_ndcg_curves(curves, page.figdir / f"{_slug(page.ds)}_ndcg_curves.png",
                                      title=f"nDCG@k on {page.ds} (bands: {ci})", ci=ci)
        page.figure(path, f"nDCG@k curves on {page.ds}",
                    f"nDCG@k per system as k grows (log axis), shaded {ci}; a curve above another at small k "
                    "puts the gold document higher.")
        depth = min(c.depth for c in curves)
        page.doc.p(f"nDCG@k curves from the stored top-{depth} rankings: hollow markers (k > {depth}) "
                   "are lower bounds.")


def _isotropy_section(page: _Page, rows: list[dict[str, Any]]) -> None:
    iso = [r for r in rows if r["measure"] in ("isoscore", "isotropy_mu", "isotropy_mu_exact")]
    if not iso:
        return
    page.doc.h(3, "Isotropy (I_A: Mu et al.; I_B: IsoScore)")
    keyed: dict[tuple[str, str], dict[str, Any]] = {}
    for r in iso:
        keyed.setdefault((r["system"], str(_extra(r).get("space", ""))), {})[r["measure"]] = r["value"]
    page.doc.table(["System", "Space", "IsoScore (I_B)", "I_A (approx.)", "I_A (eigenvectors)"],
                   [[s, sp, _fmt(v.get("isoscore")), _fmt(v.get("isotropy_mu")), _fmt(v.get("isotropy_mu_exact"))]
                    for (s, sp), v in sorted(keyed.items())])


def _other_section(page: _Page, rows: list[dict[str, Any]]) -> None:
    other = sorted((r for r in rows if not _is_ranking_measure(r["measure"])
                    and r["measure"] not in _ANALYSIS_SECTIONS),
                   key=lambda r: (r["measure"], r["system"], str(r.get("compared_to"))))
    if other:
        page.doc.h(3, "Other analyses")
        page.doc.table(["System", "Measure", "Value", "Boot mean", _ci_label(other), "Compared to", "p-value"],
                       [[r["system"], r["measure"], _fmt(r["value"]), _fmt(r.get("boot_mean")),
                         _ci(r.get("ci_low"), r.get("ci_high")), r.get("compared_to") or "",
                         format_p_value(r.get("p_value"))]
                        for r in other])


def _correlation_section(page: _Page, rows: list[dict[str, Any]], k: int) -> None:
    """Pearson and Spearman across systems of acc@k against COE, ROE, the threshold and isotropy."""
    values = measure_values(rows)
    if len(values) < 3:
        return
    acc = f"acc@{k}"
    if not any(acc in v for v in values.values()):
        accs = sorted({m for v in values.values() for m in v if m.startswith("acc@")})
        acc = accs[0] if accs else acc
    pairs = [(acc, "coe"), (acc, "roe"), ("threshold", "roe"), (acc, "isotropy_mu"), (acc, "isoscore")]
    corr = [c for c in correlation_table(values, pairs) if c.n >= 3]
    if corr:
        page.doc.h(3, "Correlations across systems (reference 000, Table 3)")
        page.doc.table(["x", "y", "Systems", "Pearson r", "p", "Spearman rho", "p"],
                       [[c.x, c.y, str(c.n), _fmt(c.pearson_r, 3), format_p_value(c.pearson_p),
                         _fmt(c.spearman_rho, 3), format_p_value(c.spearman_p)] for c in corr])


def _scale_section(page: _Page, rows: list[dict[str, Any]]) -> None:
    """Scale-study systems (``<label>-<variant>-s<N>``): each measure against the data scale per
    variant with CI bands, and the paired gains over the family's own base with p-values."""
    if not any((parsed := parse_system_name(r["system"])) and parsed[2] is not None for r in rows):
        return
    page.doc.h(3, "Measures against data scale")
    without: set[str] = set()
    for m in sorted({r["measure"] for r in rows}):
        mrows = [r for r in rows if r["measure"] == m]
        curves = scale_curves(mrows, m)
        if not curves:
            continue
        ci = _ci_label([r for r in mrows if r.get("compared_to") is None])
        path = plot_scale_curves(curves, page.figdir / f"{_slug(page.ds)}_{_slug(m)}_scale.png",
                                 title=f"{m} against data scale on {page.ds}", ci=ci)
        page.figure(path, f"{m} against data scale on {page.ds}",
                    f"left: does {m} rise with more domain documents, and above the dashed base line ({ci} "
                    "bands)? right: the paired gain over the family's own base; filled points are significant.")
        table = []
        for c in curves:
            for p in c.points:
                gain = p.gain is not None
                if not gain:
                    without.add(f"{c.label} {c.variant}")
                table.append([f"{c.label} {c.variant}", _fmt(p.n_documents), _fmt(p.value), _ci(p.ci_low, p.ci_high),
                              f"{c.label}-base", _fmt(p.gain) if gain else "none",
                              _ci(p.gain_ci_low, p.gain_ci_high) if gain else "none",
                              format_p_value(p.p_value) if gain else "none",
                              format_p_value(p.p_adjusted) if gain else "none"])
        page.doc.table(["Variant", "Documents", "Value", ci, "Gain over", "Gain", f"Gain {ci}", "p", "p adjusted"],
                       table)
    if without:
        page.doc.p("Gains are read only against each family's own base (a ColBERT variant against colbert-base, "
                   "a bi-encoder variant against its <label>-base). 'none': the store holds no paired comparison "
                   "of " + ", ".join(sorted(without)) + " with its own base.")


# =========================================================================== training


_UNTRAINED = frozenset({"base", "colbert-base", "reference", "model"})


def _manifest_training(artifact_path: Any) -> dict[str, Any]:
    """The ``training`` summary of an artifact's ``manifest.json`` (empty when unreadable)."""
    if not artifact_path:
        return {}
    try:
        data = json.loads((Path(str(artifact_path)) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    training = data.get("training") if isinstance(data, dict) else None
    return dict(training) if isinstance(training, dict) else {}


def _training_summaries(runs: list[dict[str, Any]], systems: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """Per adapted system (the latest run's ``config.systems`` entry): variant, scale and the
    training summary stored there, else read from its artifact's manifest."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:  # oldest first: the latest run's entry wins
        try:
            config = json.loads(run.get("config") or "{}")
        except (TypeError, ValueError):
            continue
        entries = config.get("systems") if isinstance(config, dict) else None
        if not isinstance(entries, dict):
            continue
        for name, info in entries.items():
            if not isinstance(info, dict) or info.get("variant") in _UNTRAINED or (systems and name not in systems):
                continue
            training = info.get("training") or _manifest_training(info.get("artifact_path"))
            out[name] = {**info, "training": dict(training or {})}
    return out


def _num(x: Any, spec: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(float(x), spec)


def _training_flags(t: dict[str, Any]) -> list[str]:
    """What says that little or no adaptation happened, plus the checks' own warnings."""
    sch = t.get("schedule") or {}
    flags = []
    if t.get("steps") == 0:
        flags.append("no optimizer step")
    if sch and sch.get("nonzero_lr_steps") == 0:
        flags.append("zero learning rate")
    if t.get("relative_weight_change") is not None and float(t["relative_weight_change"]) == 0.0:
        flags.append("weights unchanged")
    asked, done = t.get("epochs_requested"), t.get("epochs_completed")
    if sch.get("capped") and asked is not None and done is not None and float(done) < float(asked):
        flags.append(f"stopped by max_steps = {sch.get('max_steps')} after {_num(done, 'g')} of {asked} epoch(s)")
    return flags + [str(w) for w in t.get("check_warnings") or []]


def _training_row(name: str, info: dict[str, Any]) -> list[str]:
    t = info["training"]
    sch = t.get("schedule") or {}
    asked, done = t.get("epochs_requested"), t.get("epochs_completed")
    epochs = f"{asked} -> {done}" if asked is not None and done is not None else "n/a"
    warm = f"{sch['warmup_steps']} / {sch['total_steps']}" if "warmup_steps" in sch and "total_steps" in sch else "n/a"
    if "merge_weight" in t and t.get("steps") is None:
        warm = f"merge (weight {_num(t['merge_weight'], 'g')}), no training"
    flags = _training_flags(t)
    return [name, str(info.get("variant", "")), _fmt(info.get("n_documents")), _fmt(t.get("steps")), epochs, warm,
            _num(sch.get("learning_rate"), "g"), _num(t.get("first_loss"), ".4f"), _num(t.get("last_loss"), ".4f"),
            _num(t.get("relative_weight_change"), ".2e"), f"{len(flags)} (see below)" if flags else "none"]


def _training_section(doc: _Doc, runs: list[dict[str, Any]], systems: Sequence[str] | None) -> None:
    """One row per adapted model: how much adaptation really happened."""
    summaries = _training_summaries(runs, systems)
    if not summaries:
        return
    doc.h(2, "Training of the adapted models")
    doc.table(["System", "Variant", "Documents", "Steps", "Epochs asked -> run", "Warm-up / total steps",
               "Peak lr", "First loss", "Last loss", "Relative weight change", "Warnings"],
              [_training_row(n, summaries[n]) for n in sorted(summaries)])
    doc.p("From each adapted model's artifact manifest (config.systems of its runs). Schedule: linear warm-up "
          "then linear decay to 0 over the total steps; relative weight change = ||W_adapted - W_base|| / "
          "||W_base|| over the trained parameters (for ColBERT: BERT and projection). First / last loss: of the "
          "first and last optimizer step (ColBERT: recovered from colbert-ai's running-mean log). 'n/a': not "
          "recorded (artifacts trained before these were recorded; a merge trains nothing).")
    notes = [f"{n}: {w}" for n in sorted(summaries) for w in _training_flags(summaries[n]["training"])]
    if notes:
        doc.pre("\n".join(notes))


# =========================================================================== inspection


def _own_base_pairs(systems: Sequence[str]) -> list[tuple[str, str]]:
    """(adapted system, its own base) for every scale-study variant whose base is present."""
    have = set(systems)
    out = []
    for s in sorted(have):
        parsed = parse_system_name(s)
        if parsed is not None and parsed[1] != "base" and f"{parsed[0]}-base" in have:
            out.append((s, f"{parsed[0]}-base"))
    return out


def _tests_cell(tests: list[dict[str, Any]]) -> str:
    shown = [t for t in tests if _is_ranking_measure(str(t["measure"]))]
    if not shown:
        return "none stored"
    return "; ".join(f"{t['measure']}: {_fmt(t['difference'])} {_ci(t['ci_low'], t['ci_high'])}, "
                     f"p {format_p_value(t['p_value'])}" for t in sorted(shown, key=lambda t: str(t["measure"])))


def _inspection_section(page: _Page, systems: Sequence[str], limit: int = 5) -> None:
    """Per adapted system against its own base: win/loss counts beside the paired tests, and the
    queries where the two differ most."""
    pairs = _own_base_pairs(systems)
    if not pairs or page.store is None:
        return
    rows, blocks = [], []
    for system, base in pairs:
        try:
            counts = win_loss(page.store, system, base, dataset=page.ds)
            table = inspect_queries(page.store, system, base, dataset=page.ds, limit=limit)
        except ConfigError:  # no shared query: nothing to inspect for this pair
            continue
        rows += [[system, base, _fmt(c["queries"]), _fmt(c["wins"]), _fmt(c["losses"]), _fmt(c["ties"]),
                  _tests_cell(c["paired_tests"])] for c in counts]
        blocks.append(format_inspection(table))
    if not rows:
        return
    page.doc.h(3, "Inspection: adapted systems against their own base")
    page.doc.table(["System", "Against", "Queries", "Wins", "Losses", "Ties", "Paired tests (A - B, CI, p)"], rows)
    page.doc.p("Per query, a win is a higher reciprocal rank of the first gold document than the base's (1/rank "
               "within the stored top-k, 0 when not retrieved), a loss a lower one. Below: for each pair, the "
               f"{limit} queries where the two differ most (adaptlab inspect shows more).")
    page.doc.pre("\n\n".join(blocks))


# =========================================================================== nDCG@k, k = 1..10


_K10 = tuple(range(1, 11))


def _ndcg_panels(curves: dict[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """Panel per (family, variant): the family's base dashed, one line per data scale."""
    bases: dict[str, Any] = {}
    fams: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    for s, c in curves.items():
        parsed = parse_system_name(s)
        if parsed is None:
            continue
        label, variant, n = parsed
        if variant == "base":
            bases[label] = c
        else:
            fams.setdefault((label, variant), []).append((int(n or 0), c))
    order = {"pt": 0, "ft": 1, "pt-ft": 2, "merged": 3}
    panels: dict[str, list[tuple[str, Any]]] = {}
    for (label, variant), pts in sorted(fams.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        lines = [(f"{label} base", bases[label])] if label in bases else []
        panels[f"{label} {variant}"] = lines + [(f"{n} documents", c) for n, c in sorted(pts, key=lambda x: x[0])]
    return panels


def _ndcg_at_k_section(page: _Page, records: dict[str, Any], cfg: BootstrapConfig) -> None:
    """nDCG@k for k = 1..10 of every scale-study system (reference 004, Figure 3), from the
    stored rankings; one figure per dataset, one panel per model family and variant."""
    curves = {s: ndcg_curve_from_records(rec, _K10, bootstrap=cfg) for s, rec in records.items()
              if parse_system_name(s) is not None and rec.k and any(len(g) for g in rec.gold_ids)}
    panels = _ndcg_panels(curves)
    if not panels:
        return
    ci = ci_label(cfg.confidence)
    page.doc.h(3, "nDCG@k for k = 1..10 per data scale and variant")
    path = plots.plot_ndcg_at_k(panels, page.figdir / f"{_slug(page.ds)}_ndcg_at_k.png",
                                title=f"nDCG@k, k = 1..10, on {page.ds} (shaded: {ci})", ci=ci)
    page.figure(path, f"nDCG@k for k = 1..10 per data scale and variant on {page.ds}",
                "does each adapted variant lie above its dashed base at small k (gold ranked higher), and does "
                f"more domain data lift the curve? Bands: {ci} over queries.")
    shown = [s for s in sorted(curves) if parse_system_name(s) is not None]
    page.doc.table(["System", *[f"@{k}" for k in _K10], f"@10 {ci}", "Queries"],
                   [[s, *[_fmt(float(v), 3) for v in curves[s].values], _ci(curves[s].ci_low[-1], curves[s].ci_high[-1]),
                     str(curves[s].n_queries)] for s in shown])
    inexact = [s for s in shown if not bool(curves[s].exact.all())]
    page.doc.p("nDCG@k on all queries with a gold document (binary relevance; with one gold document "
               "nDCG@k = 1/log2(1 + rank) when rank <= k, else 0), from the stored top-k rankings; bootstrap "
               f"{cfg.n_resamples} resamples, seed {cfg.seed}."
               + (f" Stored rankings shorter than 10 (lower bounds beyond their depth): {', '.join(inexact)}."
                  if inexact else ""))
