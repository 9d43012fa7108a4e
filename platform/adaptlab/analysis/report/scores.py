"""The report's tables and figures of stored scores and analyses, one function per section:
retrieval measures with their CIs (and CI forest plots), paired comparisons, similarity
thresholds, COE/ROE, isotropy, other analyses, correlations across systems, and the figures drawn
from per-query records (similarity densities, nDCG@k curves)."""

from __future__ import annotations

import math
from typing import Any

from adaptlab.analysis import plots
from adaptlab.analysis._rows import p_draws
from adaptlab.analysis.correlation import correlation_table, measure_values
from adaptlab.analysis.curves import ndcg_curve_from_records
from adaptlab.analysis.overlap import similarity_distributions
from adaptlab.analysis.present import format_interval, format_number, format_p, format_percent
from adaptlab.analysis.report.cells import (
    ADJUSTMENT_NAMES,
    adjusted_cell,
    ci_label_of,
    extra,
    is_ranking_measure,
    width,
)
from adaptlab.analysis.report.document import Page
from adaptlab.analysis.thresholds import ThresholdResult
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.pvalues import ci_label, p_value_note

__all__ = [
    "ANALYSIS_MEASURES",
    "correlation_section",
    "curve_ks",
    "isotropy_section",
    "other_section",
    "overlap_section",
    "pairs_section",
    "ranking_section",
    "record_figures",
    "threshold_section",
]

ANALYSIS_MEASURES = (
    "threshold",
    "acc_at_threshold",
    "threshold_loss",
    "coe",
    "roe",
    "isoscore",
    "isotropy_mu",
    "isotropy_mu_exact",
)
"""Measures the report shows in their own sections (not under "Other analyses")."""


def ranking_section(page: Page, rows: list[dict[str, Any]]) -> None:
    """The retrieval measures with their CIs, and one CI forest plot per measure."""
    rank_rows = sorted(
        (r for r in rows if r.get("compared_to") is None and is_ranking_measure(r["measure"])),
        key=lambda r: (r["measure"], page.rank(r["system"])),
    )
    if not rank_rows:
        return
    page.doc.h(3, "Retrieval measures")
    label = ci_label_of(rank_rows)
    page.doc.table(
        [
            "System",
            "Measure",
            "Value",
            "Boot mean",
            label,
            "CI width",
            "CI method",
            "Queries",
            "Missing from run",
            "Resamples x size",
        ],
        [
            [
                r["system"],
                r["measure"],
                format_number(r["value"]),
                format_number(r.get("boot_mean")),
                format_interval(r.get("ci_low"), r.get("ci_high")),
                width(r.get("ci_low"), r.get("ci_high")),
                r.get("interval_method") or "not stored",
                format_number(r.get("n_queries")),
                format_number(r.get("missing_from_run")),
                f"{format_number(r.get('n_resamples'))} x {format_number(r.get('sample_size'))}",
            ]
            for r in rank_rows
        ],
    )
    _forest_figure(page, rank_rows, label)


def _forest_figure(page: Page, rank_rows: list[dict[str, Any]], label: str) -> None:
    """One multi-measure forest plot of the dataset: the Value column with its CI per system."""
    with_ci = [r for r in rank_rows if r.get("ci_low") is not None or r.get("ci_high") is not None]
    if not with_ci:
        return
    estimates: dict[str, dict[str, tuple[float, float, float]]] = {}
    for r in sorted(with_ci, key=lambda r: (r["measure"], page.rank(r["system"]))):
        estimates.setdefault(r["measure"], {})[r["system"]] = (
            float(r["value"]),
            _or_nan(r.get("ci_low")),
            _or_nan(r.get("ci_high")),
        )
    fig = plots.plot_forest(estimates, title=f"Retrieval measures on {page.ds} (value with its {label})", ci=label)
    page.figure(
        fig,
        "forest",
        f"retrieval measures with {label} on {page.ds}",
        f"each measure's value (the table's Value column) per system with its {label}; systems whose "
        "intervals do not overlap differ clearly, overlapping ones need the paired test below.",
    )


def _or_nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def pairs_section(page: Page, rows: list[dict[str, Any]]) -> None:
    pair_rows = sorted(
        (r for r in rows if r.get("compared_to") and is_ranking_measure(r["measure"])),
        key=lambda r: (r["measure"], page.rank(r["system"]), page.rank(r["compared_to"])),
    )
    if pair_rows:
        page.doc.h(3, "Paired comparisons (A - B, paired bootstrap)")
        exact = any(r.get("p_exact") is not None for r in pair_rows)
        head = [
            "A",
            "B",
            "Measure",
            "Difference",
            "Boot mean",
            ci_label_of(pair_rows),
            "p-value",
            "p adjusted (family)",
        ]
        if exact:
            head.append("p exact (sign test)")
        table = []
        for r in pair_rows:
            row = [
                r["system"],
                r["compared_to"],
                r["measure"],
                format_number(r["value"]),
                format_number(r.get("boot_mean")),
                format_interval(r.get("ci_low"), r.get("ci_high")),
                format_p(r.get("p_value"), p_draws(r)),
                adjusted_cell(r),
            ]
            if exact:
                row.append(format_p(r.get("p_exact")))
            table.append(row)
        page.doc.table(head, table)
        _pairs_figure(page, pair_rows)
        adj = sorted({str(r.get("adjustment")) for r in pair_rows if r.get("adjustment")})
        page.doc.p(
            _p_note(pair_rows)
            + ". "
            + (
                f"p adjusted: {', '.join(ADJUSTMENT_NAMES.get(a, a) for a in adj)} within each family (one "
                "dataset, one measure; the family size in parentheses); read significance from it, not from "
                "the raw p."
                if adj
                else "No multiplicity adjustment is stored for these rows (written before it existed)."
            )
            + (" Fewer than 30 queries: bootstrap intervals are unreliable, read the exact sign test." if exact else "")
        )


def _p_note(pair_rows: list[dict[str, Any]]) -> str:
    """The tests behind the ``p`` column (stored as ``extra.p_test``; for older rows, the test of
    their number of queries) and the most Monte Carlo draws one of them used."""
    sized = [r for r in pair_rows if r.get("n_queries") and r.get("n_resamples")]
    if not sized:
        return "p: two-sided paired test, bounded below by 2/(m+1) for m resamples"
    tests = sorted({str(extra(r)["p_test"]) for r in sized if extra(r).get("p_test")})
    return p_value_note(
        int(sized[0]["n_queries"]),
        int(sized[0]["n_resamples"]),
        tests=tests,
        n_vectors=max(p_draws(r) or 0 for r in sized),
    )


def _pairs_figure(page: Page, pair_rows: list[dict[str, Any]]) -> None:
    """The paired differences with their CIs, marked by the stored adjusted p."""
    label = ci_label_of(pair_rows)
    fig = plots.plot_paired_differences(pair_rows, title=f"Paired differences on {page.ds} ({label})", ci=label)
    page.figure(
        fig,
        "paired_differences",
        f"paired differences with {label} on {page.ds}",
        f"each difference A - B (the table's Difference column) with its {label}; a filled point is "
        "significant after the multiplicity adjustment (p adjusted < 0.05), a hollow one is not, a cross "
        "has no adjusted p stored.",
    )


def threshold_section(
    page: Page, by: dict[tuple[str, str], dict[str, Any]], thr_results: list[ThresholdResult]
) -> None:
    thr_sys = sorted({s for (s, m) in by if m == "threshold"})
    if not thr_sys:
        return
    page.doc.h(3, "Similarity thresholds (reference 000, Sec. 2.2)")
    trows = []
    for s in thr_sys:
        t, a = by[(s, "threshold")], by.get((s, "acc_at_threshold"), {})
        loss = by.get((s, "threshold_loss"), {})
        te, ae = extra(t), extra(a) if a else {}
        both = []
        for key, name in (("paper", "paper"), ("margin_rule", "margin")):
            ch = te.get(key)
            if isinstance(ch, dict):
                both.append(
                    f"{name}: "
                    + (
                        f"{format_number(ch.get('tau'))} ({format_number(ch.get('psi'), 0)})"
                        if ch.get("tau") is not None
                        else "none"
                    )
                )
        trows.append(
            [
                s,
                format_number(te.get("k")),
                str(te.get("test", "n/a")),
                "none"
                if math.isnan(float(t["value"]))
                else f"{format_number(t['value'])} ({format_number(te.get('psi'), 1)})",
                format_percent(te.get("removed")),
                format_number(ae.get("base_boot_mean")),
                format_number(a.get("boot_mean") if a else None),
                format_interval(a.get("ci_low"), a.get("ci_high")) if a else "n/a",
                format_number(loss.get("value")) if loss else "n/a",
                format_interval(loss.get("ci_low"), loss.get("ci_high")) if loss else "n/a",
                "; ".join(both) or "n/a",
            ]
        )
    label = ci_label_of([by[(s, "threshold")] for s in thr_sys])
    page.doc.table(
        [
            "System",
            "K",
            "Rule",
            "tau (psi)",
            "Top-K removed",
            "Boot acc",
            "Boot acc @ tau",
            f"{label} @ tau",
            "Loss",
            f"Loss {label}",
            "Both rules: tau (psi)",
        ],
        trows,
    )
    page.doc.p(
        "Rules: 'exact' (default) takes the highest tau that loses at most L* queries, L* the largest "
        "count whose one-sided Clopper-Pearson bound is within the margin (0.01 = one point), so with the "
        "stated confidence the true accuracy loss is at most the margin; none exists with too few queries "
        "(about 299 at margin 0.01). 'margin' takes the highest tau whose paired accuracy loss has a CI "
        "upper end at most the margin, resampling all queries; 'paper' the highest tau whose resampled "
        "thresholded accuracies have a percentile CI containing the bootstrap mean accuracy (reference "
        "000's wording). psi: the percentage of the pooled K-th similarities below tau. Top-K removed: the "
        "share of retrieved top-K documents below tau. See docs/metrics.md."
    )
    if thr_results:
        ci = ci_label(thr_results[0].confidence)
        fig = plots.plot_thresholds(thr_results, title=f"Accuracy vs threshold on {page.ds} ({ci})", ci=ci)
        page.figure(fig, "thresholds", f"accuracy against threshold on {page.ds}", _threshold_caption(thr_results))


def _threshold_caption(results: list[ThresholdResult]) -> str:
    """The figure's caption: what each system's rule chose (a star), or plainly that it chose none."""
    chosen = [
        f"{r.system or 'system'}: tau {format_number(r.chosen_tau)} (psi {format_number(r.chosen_psi, 1)}, "
        f"removes {format_percent(r.removed[r.chosen])} of the top-{r.k} documents)"
        for r in results
        if r.chosen is not None
    ]
    none = [f"{r.system or 'system'} ({r.n_queries} queries)" for r in results if r.chosen is None]
    text = (
        "how much top-K accuracy each system keeps as low-similarity documents are dropped; the dotted line "
        "is the accuracy without a threshold."
    )
    if chosen:
        text += " The star marks the chosen threshold: " + "; ".join(chosen) + "."
    if none:
        text += (
            " No threshold was chosen for " + ", ".join(none) + ": none kept the rule's guarantee (the exact "
            "rule needs about 299 queries at margin 0.01), so no star is drawn."
        )
    return text


def overlap_section(page: Page, by: dict[tuple[str, str], dict[str, Any]]) -> None:
    ov_sys = sorted({s for (s, m) in by if m in ("coe", "roe")})
    if not ov_sys:
        return
    page.doc.h(3, "Distribution overlap: COE and ROE (reference 000, Sec. 2.3)")
    orows = []
    for s in ov_sys:
        c, r_ = by.get((s, "coe"), {}), by.get((s, "roe"), {})
        e = extra(c or r_)
        orows.append(
            [
                s,
                format_number(e.get("k")),
                format_number(e.get("psi"), 1),
                format_number(c.get("boot_mean")),
                format_interval(c.get("ci_low"), c.get("ci_high")),
                format_number(r_.get("boot_mean")),
                format_interval(r_.get("ci_low"), r_.get("ci_high")),
            ]
        )
    label = ci_label_of([r for (s, m), r in by.items() if m in ("coe", "roe")])
    page.doc.table(["System", "K", "psi", "COE", f"COE {label}", "ROE", f"ROE {label}"], orows)


def record_figures(page: Page, records: dict[str, Any], k: int, cfg: BootstrapConfig) -> list[str]:
    """Similarity densities and nDCG@k curves drawn from the stored per-query records; returns the
    systems left out of the densities (no gold and random similarities: TREC runs)."""
    from adaptlab.analysis.report.missing import has_similarities

    left_out = [s for s, rec in records.items() if rec.k and not has_similarities(rec)]
    dists = [
        similarity_distributions(rec, k=min(k, rec.k)) for s, rec in records.items() if rec.k and s not in left_out
    ]
    if dists:
        kk = sorted({d.k for d in dists})
        fig = plots.plot_similarity_densities(
            dists, title=f"S_rand (red), S_corr (green), S_top{kk[0] if len(kk) == 1 else 'K'} (blue) on {page.ds}"
        )
        page.figure(
            fig,
            "densities",
            f"similarity densities on {page.ds}",
            "the further the green (gold) and blue (retrieved) densities sit from the red (random) one, "
            "the better a system separates relevant from unrelated documents.",
        )
    _ndcg_curves_figure(page, records, cfg)
    return left_out


def curve_ks(depth: int) -> tuple[int, ...]:
    """The k of the report's nDCG@k curves: 1, 2, 3, 5, 10, 20, 50, 100, ... up to ``depth``,
    and ``depth`` itself (the deepest k the stored rankings answer exactly)."""
    steps = [k for k in (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 500, 1000) if k < depth]
    return (*steps, int(depth))


def _ndcg_curves_figure(page: Page, records: dict[str, Any], cfg: BootstrapConfig) -> None:
    judged = [rec for rec in records.values() if rec.k and any(len(g) for g in rec.gold_ids)]
    if not judged:
        return
    depth = min(int(rec.k) for rec in judged)
    ks = curve_ks(depth)
    curves = [ndcg_curve_from_records(rec, ks, bootstrap=cfg) for rec in judged]
    ci = ci_label(cfg.confidence)
    fig = plots.plot_ndcg_curves(curves, title=f"nDCG@k on {page.ds} (bands: {ci})", ci=ci)
    page.figure(
        fig,
        "ndcg_curves",
        f"nDCG@k curves on {page.ds}",
        f"nDCG@k per system for k = {ks[0]} to {ks[-1]} (log axis), point estimates with shaded {ci}; "
        "a curve above another at small k puts the gold document higher.",
    )
    page.doc.p(
        f"nDCG@k curves from the stored rankings, k up to {ks[-1]}: the depth every system's stored "
        f"top-k reaches, so every point is exact (no lower bound)."
    )


def isotropy_section(page: Page, rows: list[dict[str, Any]]) -> None:
    iso = [r for r in rows if r["measure"] in ("isoscore", "isotropy_mu", "isotropy_mu_exact")]
    if not iso:
        return
    page.doc.h(3, "Isotropy (I_A: Mu et al.; I_B: IsoScore)")
    keyed: dict[tuple[str, str], dict[str, Any]] = {}
    for r in iso:
        keyed.setdefault((r["system"], str(extra(r).get("space", ""))), {})[r["measure"]] = r["value"]
    page.doc.table(
        ["System", "Space", "IsoScore (I_B)", "I_A (approx.)", "I_A (eigenvectors)"],
        [
            [s, sp, *(format_number(v.get(m)) for m in ("isoscore", "isotropy_mu", "isotropy_mu_exact"))]
            for (s, sp), v in sorted(keyed.items())
        ],
    )


def other_section(page: Page, rows: list[dict[str, Any]]) -> None:
    other = sorted(
        (r for r in rows if not is_ranking_measure(r["measure"]) and r["measure"] not in ANALYSIS_MEASURES),
        key=lambda r: (r["measure"], r["system"], str(r.get("compared_to"))),
    )
    if other:
        page.doc.h(3, "Other analyses")
        page.doc.table(
            ["System", "Measure", "Value", "Boot mean", ci_label_of(other), "Compared to", "p-value"],
            [
                [
                    r["system"],
                    r["measure"],
                    format_number(r["value"]),
                    format_number(r.get("boot_mean")),
                    format_interval(r.get("ci_low"), r.get("ci_high")),
                    r.get("compared_to") or "",
                    format_p(r.get("p_value")),
                ]
                for r in other
            ],
        )


def correlation_section(page: Page, rows: list[dict[str, Any]], k: int) -> None:
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
        page.doc.table(
            ["x", "y", "Systems", "Pearson r", "p", "Spearman rho", "p"],
            [
                [
                    c.x,
                    c.y,
                    str(c.n),
                    format_number(c.pearson_r),
                    format_p(c.pearson_p),
                    format_number(c.spearman_rho),
                    format_p(c.spearman_p),
                ]
                for c in corr
            ],
        )
