"""The report's sections for a scale study (systems named ``<label>-<variant>-s<N>``): measures
against the data scale with the paired gain over each family's own base, nDCG@k for k = 1..10
per scale and variant (reference 004, Figure 3), and the inspection of adapted systems against
their own base (win/loss counts beside the paired tests, the queries that differ most)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adaptlab.analysis import plots
from adaptlab.analysis.curves import ndcg_curve_from_records
from adaptlab.analysis.inspect import format_inspection, inspect_queries, win_loss
from adaptlab.analysis.present import format_interval, format_number, format_p
from adaptlab.analysis.report.cells import ci_label_of, tests_cell
from adaptlab.analysis.report.document import Page, slug
from adaptlab.analysis.scale_curves import plot_scale_curves, scale_curves
from adaptlab.analysis.scaling import plot_scaling, scaling_from_records, scaling_tables, training_seconds
from adaptlab.errors import ConfigError
from adaptlab.models.variants import BASE, curve_order, parse_system_name, system_name
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.pvalues import ci_label

__all__ = ["inspection_section", "ndcg_at_k_section", "scale_section", "scaling_section"]


def scale_section(page: Page, rows: list[dict[str, Any]]) -> None:
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
        ci = ci_label_of([r for r in mrows if r.get("compared_to") is None])
        fig = plot_scale_curves(curves, title=f"{m} against data scale on {page.ds}", ci=ci)
        page.figure(
            fig,
            f"{slug(m)}_scale",
            f"{m} against data scale on {page.ds}",
            f"left: does {m} rise with more domain documents, and above the dashed base line ({ci} "
            "bands)? right: the paired gain over the family's own base; filled points are significant.",
        )
        table = []
        for c in curves:
            for p in c.points:
                gain = p.gain is not None
                if not gain:
                    without.add(f"{c.label} {c.variant}")
                table.append(
                    [
                        f"{c.label} {c.variant}",
                        format_number(p.n_documents),
                        format_number(p.value),
                        format_interval(p.ci_low, p.ci_high),
                        system_name(c.label, BASE),
                        format_number(p.gain) if gain else "none",
                        format_interval(p.gain_ci_low, p.gain_ci_high) if gain else "none",
                        format_p(p.p_value) if gain else "none",
                        format_p(p.p_adjusted) if gain else "none",
                    ]
                )
        page.doc.table(
            ["Variant", "Documents", "Value", ci, "Gain over", "Gain", f"Gain {ci}", "p", "p adjusted"], table
        )
    if without:
        page.doc.p(
            "Gains are read only against each family's own base (a ColBERT variant against colbert-base, "
            "a bi-encoder variant against its <label>-base). 'none': the store holds no paired comparison "
            "of " + ", ".join(sorted(without)) + " with its own base."
        )


def _own_base_pairs(systems: Sequence[str]) -> list[tuple[str, str]]:
    """(adapted system, its own base) for every scale-study variant whose base is present."""
    have = set(systems)
    out = []
    for s in sorted(have):
        parsed = parse_system_name(s)
        if parsed is not None and parsed[1] != BASE and system_name(parsed[0], BASE) in have:
            out.append((s, system_name(parsed[0], BASE)))
    return out


def inspection_section(page: Page, systems: Sequence[str], limit: int = 5) -> None:
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
        rows += [
            [
                system,
                base,
                *(format_number(c[key]) for key in ("queries", "wins", "losses", "ties")),
                tests_cell(c["paired_tests"]),
            ]
            for c in counts
        ]
        blocks.append(format_inspection(table))
    if not rows:
        return
    page.doc.h(3, "Inspection: adapted systems against their own base")
    page.doc.table(["System", "Against", "Queries", "Wins", "Losses", "Ties", "Paired tests (A - B, CI, p)"], rows)
    page.doc.p(
        "Per query, a win is a higher reciprocal rank of the first gold document than the base's (1/rank "
        "within the stored top-k, 0 when not retrieved), a loss a lower one. Below: for each pair, the "
        f"{limit} queries where the two differ most (adaptlab inspect shows more)."
    )
    page.doc.pre("\n\n".join(blocks))


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
        if variant == BASE:
            bases[label] = c
        else:
            fams.setdefault((label, variant), []).append((int(n or 0), c))
    panels: dict[str, list[tuple[str, Any]]] = {}
    for (label, variant), pts in sorted(fams.items(), key=lambda kv: (kv[0][0], curve_order(kv[0][1]))):
        lines = [(f"{label} base", bases[label])] if label in bases else []
        panels[f"{label} {variant}"] = lines + [(f"{n} documents", c) for n, c in sorted(pts, key=lambda x: x[0])]
    return panels


def ndcg_at_k_section(page: Page, records: dict[str, Any], cfg: BootstrapConfig) -> None:
    """nDCG@k for k = 1..10 of every scale-study system (reference 004, Figure 3), from the
    stored rankings; one figure per dataset, one panel per model family and variant."""
    curves = {
        s: ndcg_curve_from_records(rec, _K10, bootstrap=cfg)
        for s, rec in records.items()
        if parse_system_name(s) is not None and rec.k and any(len(g) for g in rec.gold_ids)
    }
    panels = _ndcg_panels(curves)
    if not panels:
        return
    ci = ci_label(cfg.confidence)
    page.doc.h(3, "nDCG@k for k = 1..10 per data scale and variant")
    fig = plots.plot_ndcg_at_k(panels, title=f"nDCG@k, k = 1..10, on {page.ds} (shaded: {ci})", ci=ci)
    page.figure(
        fig,
        "ndcg_at_k",
        f"nDCG@k for k = 1..10 per data scale and variant on {page.ds}",
        "does each adapted variant lie above its dashed base at small k (gold ranked higher), and does "
        f"more domain data lift the curve? Bands: {ci} over queries.",
    )
    shown = [s for s in sorted(curves) if parse_system_name(s) is not None]
    page.doc.table(
        ["System", *[f"@{k}" for k in _K10], f"@10 {ci}", "Queries"],
        [
            [
                s,
                *[format_number(float(v)) for v in curves[s].values],
                format_interval(curves[s].ci_low[-1], curves[s].ci_high[-1]),
                str(curves[s].n_queries),
            ]
            for s in shown
        ],
    )
    inexact = [s for s in shown if not bool(curves[s].exact.all())]
    page.doc.p(
        "nDCG@k on all queries with a gold document (binary relevance; with one gold document "
        "nDCG@k = 1/log2(1 + rank) when rank <= k, else 0), from the stored top-k rankings; bootstrap "
        f"{cfg.n_resamples} resamples, seed {cfg.seed}."
        + (
            f" Stored rankings shorter than 10 (lower bounds beyond their depth): {', '.join(inexact)}."
            if inexact
            else ""
        )
    )


SCALING_MEASURE = "ndcg@10"
"""The measure of the report's data-scaling fit (``adaptlab scaling --metric`` fits any other)."""


def scaling_section(page: Page, records: dict[str, Any], cfg: BootstrapConfig) -> None:
    """The data-scaling fit of every scale-study variant with at least 2 scales
    (:mod:`adaptlab.analysis.scaling`): the figure with bands and the measured points, and its
    two tables."""
    scale_recs = {s: r for s, r in records.items() if parse_system_name(s) is not None}
    seconds = training_seconds(page.store.runs().to_pylist()) if page.store is not None else {}
    fits = scaling_from_records(scale_recs, SCALING_MEASURE, dataset=page.ds, boot=cfg, training_seconds=seconds)
    if not fits:
        return
    page.doc.h(3, f"Data-scaling fit of the gain ({SCALING_MEASURE})")
    fig = plot_scaling(fits, title=f"{SCALING_MEASURE} gain over own base against data scale on {page.ds}")
    page.figure(
        fig,
        "scaling_fit",
        f"{SCALING_MEASURE} gain against data scale with fitted curves on {page.ds}",
        "do the measured gains (points, CI bars) still climb at the largest scale? The line is the fitted "
        "curve, the band its pointwise CI; the dashed part beyond the largest scale is an extrapolation.",
    )
    (h1, r1), (h2, r2) = scaling_tables(fits)
    page.doc.table(h1, r1)
    page.doc.table(h2, r2)
    notes = list(dict.fromkeys(f"{f.label} {f.variant}: {f.criterion}." for f in fits))
    if not any(h is not None for f in fits for h in f.hours):
        notes.append("The store records no training seconds for these models: gain per training hour is n/a.")
    page.doc.p(
        " ".join(notes) + f" Intervals: percentile bootstrap over {cfg.n_resamples} paired resamples of "
        f"the queries (seed {cfg.seed}); they cover the query sample, not training randomness or a wrong "
        "curve form. The next scale and targets beyond the largest scale are extrapolations "
        "(adaptlab scaling --target shows the scale a target gain needs)."
    )
