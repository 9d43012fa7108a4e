"""The store's typed ``scaling`` rows: fits written as rows, read back as fits."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from adaptlab.analysis.scaling.projection import _per_hour
from adaptlab.analysis.scaling.result import ScalingFit
from adaptlab.analysis.scaling.sources import _store_fits
from adaptlab.stats import BootstrapConfig


def scaling_store_rows(
    fits: Sequence[ScalingFit], *, study: str | None = None, timestamp: datetime | None = None
) -> list[dict[str, Any]]:
    """One row of the store's ``scaling`` table (:data:`adaptlab.results.schema.COLUMNS`) per
    fit: every number of :class:`ScalingFit`, the measured points and the band as typed columns,
    so :func:`fits_from_store_rows` gives the same fits back."""
    when = timestamp or datetime.now(timezone.utc)

    def ci(pair: tuple[float, float] | None, i: int) -> float | None:
        return None if pair is None else float(pair[i])

    return [
        {
            "dataset": f.dataset,
            "label": f.label,
            "variant": f.variant,
            "measure": f.measure,
            "form": f.model,
            "criterion": f.criterion,
            "params": json.dumps(f.params, sort_keys=True),
            "loo_rmse": json.dumps(f.loo_rmse, sort_keys=True),
            "slope_per_doubling": f.slope_per_doubling,
            "slope_low": f.slope_ci[0],
            "slope_high": f.slope_ci[1],
            "trend": f.trend,
            "largest_scale": max(f.scales),
            "next_scale": f.next_scale,
            "predicted_next": f.predicted_next,
            "predicted_next_low": f.predicted_next_ci[0],
            "predicted_next_high": f.predicted_next_ci[1],
            "target": f.target,
            "target_scale": f.target_scale,
            "target_scale_low": ci(f.target_scale_ci, 0),
            "target_scale_high": ci(f.target_scale_ci, 1),
            "target_note": f.target_note,
            "scales": list(f.scales),
            "gains": list(f.gains),
            "gains_low": [c[0] for c in f.gain_ci],
            "gains_high": [c[1] for c in f.gain_ci],
            "training_hours": list(f.hours),
            "band_scales": [float(x) for x in f.band_scales],
            "band_low": [float(x) for x in f.band[0]],
            "band_fit": [float(x) for x in f.band[1]],
            "band_high": [float(x) for x in f.band[2]],
            "n_queries": f.n_queries,
            "n_resamples": f.n_resamples,
            "seed": f.seed,
            "confidence": f.confidence,
            "study": study,
            "timestamp": when,
        }
        for f in fits
    ]


def fits_from_store_rows(rows: Sequence[Mapping[str, Any]]) -> list[ScalingFit]:
    """The :class:`ScalingFit` of each stored ``scaling`` row (``store.scaling().to_pylist()``)."""
    return [_fit_of_row(r) for r in rows]


def _fit_of_row(r: Mapping[str, Any]) -> ScalingFit:
    gains = np.asarray(r["gains"], dtype=np.float64)
    gci = np.column_stack([r["gains_low"], r["gains_high"]]).astype(np.float64)
    hours_given = r.get("training_hours") or [None] * gains.size
    seconds = [None if h is None else float(h) * 3600.0 for h in hours_given]
    hours, rate, rate_ci = _per_hour(gains, gci, seconds)
    t_lo, t_hi = r.get("target_scale_low"), r.get("target_scale_high")
    band = [r.get(k) or [] for k in ("band_low", "band_fit", "band_high")]
    return ScalingFit(
        dataset=r["dataset"],
        label=r["label"],
        variant=r["variant"],
        measure=r["measure"],
        model=r["form"],
        criterion=r["criterion"],
        scales=tuple(int(n) for n in r["scales"]),
        gains=tuple(float(g) for g in gains),
        gain_ci=tuple((float(a), float(b)) for a, b in gci),
        params=json.loads(r["params"]),
        loo_rmse=json.loads(r["loo_rmse"]),
        slope_per_doubling=float(r["slope_per_doubling"]),
        slope_ci=(float(r["slope_low"]), float(r["slope_high"])),
        trend=r["trend"],
        next_scale=int(r["next_scale"]),
        predicted_next=float(r["predicted_next"]),
        predicted_next_ci=(float(r["predicted_next_low"]), float(r["predicted_next_high"])),
        target=r.get("target"),
        target_scale=r.get("target_scale"),
        target_scale_ci=None if t_lo is None or t_hi is None else (float(t_lo), float(t_hi)),
        target_note=r.get("target_note") or "no target given",
        hours=hours,
        gain_per_hour=rate,
        gain_per_hour_ci=rate_ci,
        n_queries=int(r["n_queries"]),
        n_resamples=int(r["n_resamples"]),
        seed=int(r["seed"]),
        confidence=float(r["confidence"]),
        band_scales=np.asarray(r.get("band_scales") or [], dtype=np.float64),
        band=np.asarray(band, dtype=np.float64),
    )


def record_scaling(
    store: Any, measures: Sequence[str], *, boot: BootstrapConfig | None = None, study: str | None = None
) -> list[ScalingFit]:
    """Fit every scale-study curve of ``store`` (:func:`scaling_from_store`, each of ``measures``
    that the stored records can re-score) and commit the fits as rows of its ``scaling`` table,
    in one commit; returns the fits (none, and nothing committed, when no variant has 2 scales
    beside its own base). Fits the store holds already (the same numbers: a study run again)
    are not committed again."""
    from adaptlab.metrics import parse_measures

    usable = [str(m) for m in parse_measures(list(measures)) if not m.needs_judgments]
    if not usable:
        return []
    fits, _groups = _store_fits(store, usable, None, None, boot, "auto")
    rows = scaling_store_rows(fits, study=study)
    if rows and not _stored_already(store, rows):
        store.commit_scaling(rows)
    return fits


def _stored_already(store: Any, rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the newest stored fit of every row's curve is that row (all but ``timestamp`` and
    ``study``): a study run again on the same records adds nothing, as its evaluation does."""

    def key(r: Mapping[str, Any]) -> tuple[Any, ...]:
        return r["dataset"], r["label"], r["variant"], r["measure"]

    def same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        return all(a[c] == b.get(c) for c in a if c not in ("timestamp", "study"))

    stored = {key(r): r for r in store.scaling(latest=True, measure=sorted({r["measure"] for r in rows})).to_pylist()}
    return all(key(r) in stored and same(r, stored[key(r)]) for r in rows)


def stored_scaling(store: Any, measure: str = "ndcg@10", *, dataset: str | None = None) -> list[ScalingFit]:
    """The newest stored fits of ``measure`` (every dataset, or ``dataset``) from the store's
    ``scaling`` table, [] when it has none (a store from before the table, or a plain study)."""
    from adaptlab.results.validate import canonical_measure

    filters: dict[str, Any] = {"measure": canonical_measure(measure)}
    if dataset is not None:
        filters["dataset"] = dataset
    if not hasattr(store, "scaling"):  # a store of the previous layout
        return []
    return fits_from_store_rows(store.scaling(latest=True, **filters).to_pylist())
