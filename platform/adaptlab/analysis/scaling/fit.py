"""``fit_scaling``: the gain curves of a scale study's per-query values, with the selection-aware
paired bootstrap of the module doc of :mod:`adaptlab.analysis.scaling`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.analysis._resample import draw_indices, resample_means
from adaptlab.analysis.scaling.forms import (
    _GRID_POINTS,
    LOG_LINEAR,
    NEXT_FACTOR,
    SCALING_MODELS,
    SEARCH_FACTOR,
    _choose,
    _fit,
    _predict,
    _refit,
    _Refits,
    _slope,
)
from adaptlab.analysis.scaling.projection import _per_hour, _target, _trend
from adaptlab.analysis.scaling.result import ScalingFit
from adaptlab.errors import ConfigError, DataError
from adaptlab.models.variants import BASE, curve_order, parse_system_name, system_name
from adaptlab.stats import BootstrapConfig, percentile_interval


def _curves(names: Sequence[str]) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """(label, variant) -> [(scale, system)] for every variant whose own base is present."""
    have = set(names)
    out: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for s in names:
        parsed = parse_system_name(s)
        if parsed is None or parsed[1] == BASE or parsed[2] is None or system_name(parsed[0], BASE) not in have:
            continue
        out.setdefault((parsed[0], parsed[1]), []).append((int(parsed[2]), s))
    return {k: sorted(v) for k, v in sorted(out.items(), key=lambda kv: (kv[0][0], curve_order(kv[0][1])))}


def _values(per_query: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
    names = [str(n) for n in per_query]
    try:
        rows = [np.asarray(v, dtype=np.float64) for v in per_query.values()]
    except (TypeError, ValueError) as e:
        raise DataError(f"fit_scaling: per-query values must be numbers: {e}") from e
    sizes = {r.shape for r in rows}
    if len(sizes) != 1 or rows[0].ndim != 1 or rows[0].size < 2:
        raise DataError(
            "fit_scaling: every system needs a 1-D array of per-query values on the same queries "
            f"(at least 2), got shapes {sorted(sizes)}"
        )
    values = np.stack(rows)
    if not np.all(np.isfinite(values)):
        raise DataError("fit_scaling: per-query values must be finite")
    return names, values


def fit_scaling(
    per_query: Mapping[str, Any],
    measure: str = "ndcg@10",
    *,
    dataset: str = "",
    target: float | None = None,
    boot: BootstrapConfig | None = None,
    training_seconds: Mapping[str, float] | None = None,
    model: str = "auto",
) -> list[ScalingFit]:
    """Fit every scale-study variant's gain over its own base against the data scale.

    Method, criterion and references in the module doc.

    Parameters
    ----------
    per_query : mapping
        ``{system: per-query values}`` on the same queries in the same order, with the systems
        named ``<label>-base`` and ``<label>-<variant>-s<N>``; a variant needs at least 2 scales.
    measure : str
        The measure's name (labels only).
    dataset : str
        The dataset's name (labels only).
    target : float, optional
        A target gain; the scale needed to reach it is searched up to 10x the largest scale.
    boot : BootstrapConfig, optional
        Resamples, seed and confidence (default ``BootstrapConfig()``).
    training_seconds : mapping, optional
        ``{system: seconds of its training}`` for the gain per training hour.
    model : str
        ``"auto"`` (the criterion of the module doc), ``"log-linear"`` or ``"saturating"`` (the
        latter needs at least 3 scales).

    Returns
    -------
    list of ScalingFit
        One per (label, variant) with at least 2 scales.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> base = rng.random(200)
    >>> pq = {
    ...     "m-base": base,
    ...     **{f"m-ft-s{n}": base + 0.01 * np.log2(n) + rng.normal(0, 0.02, 200) for n in (10, 100, 1000)},
    ... }
    >>> (fit,) = fit_scaling(pq, "ndcg@10", target=0.12, boot=BootstrapConfig(n_resamples=200))
    >>> fit.model, round(fit.slope_per_doubling, 3), fit.next_scale
    ('log-linear', 0.01, 2000)
    """
    _check_fit_options(model, target)
    boot = boot or BootstrapConfig()
    names, values = _values(per_query)
    settings = _FitSettings(draw_indices(values.shape[1], boot), boot, target, model)
    curves = _measured_curves(names, values, str(measure), dataset, dict(training_seconds or {}))
    return [_fit_curve(c, settings) for c in curves]


def _check_fit_options(model: str, target: float | None) -> None:
    """``model`` one of :data:`SCALING_MODELS`, ``target`` None or a finite number."""
    if model not in SCALING_MODELS:
        raise ConfigError(f"fit_scaling: model must be one of {', '.join(SCALING_MODELS)}, got {model!r}")
    if target is not None and (
        isinstance(target, bool) or not isinstance(target, (int, float)) or not np.isfinite(target)
    ):
        raise ConfigError(
            f"fit_scaling: target must be a finite number (a gain in the measure's units), got {target!r}"
        )


@dataclass(frozen=True)
class _Curve:
    """The measured points of one (label, variant): scales ``n`` [S], per-query gains over its
    base ``diffs`` [S, Q] and the training seconds of each scale's model."""

    dataset: str
    label: str
    variant: str
    measure: str
    n: np.ndarray
    diffs: np.ndarray
    seconds: list[float | None]


@dataclass(frozen=True)
class _FitSettings:
    """What every curve of one :func:`fit_scaling` call shares: the resamples ``idx`` [B, Q]
    (the same queries for every scale and variant), their settings, the target gain and the
    form (``"auto"`` or one of the two)."""

    idx: np.ndarray
    boot: BootstrapConfig
    target: float | None
    form: str


def _measured_curves(
    names: list[str], values: np.ndarray, measure: str, dataset: str, seconds: Mapping[str, float]
) -> list[_Curve]:
    """One :class:`_Curve` per (label, variant) with at least 2 scales."""
    out = []
    for (label, variant), points in _curves(names).items():
        if len(points) < 2:
            continue
        base = values[names.index(system_name(label, BASE))]
        diffs = np.stack([values[names.index(s)] - base for _n, s in points])
        n = np.array([n for n, _s in points], float)
        out.append(_Curve(dataset, label, variant, measure, n, diffs, [seconds.get(s) for _n, s in points]))
    return out


def _fit_curve(curve: _Curve, settings: _FitSettings) -> ScalingFit:
    """The chosen form fitted to the curve's mean gains, with every resample choosing and fitting
    again (module doc of :mod:`adaptlab.analysis.scaling`), and what the fit answers."""
    n, diffs, idx, form = curve.n, curve.diffs, settings.idx, settings.form
    gains = diffs.mean(axis=1)
    boot_gains = resample_means(diffs, idx)  # [B, S], the same queries for every scale
    model, why, loo = _choose(n, gains, form)
    point, refits = _fit(model, n, gains[None, :]), _refit(n, boot_gains, form, model)
    if refits.lin is not None and refits.sat is not None:
        why += f"; chosen again in every resample (saturating in {refits.saturating.mean():.0%} of them)"
    conf = settings.boot.confidence
    gci = np.stack(percentile_interval(boot_gains, conf, axis=0), axis=1)
    hours, rate, rate_ci = _per_hour(gains, gci, curve.seconds)
    names = ("a", "b") if model == LOG_LINEAR else ("c", "a", "alpha")
    return ScalingFit(
        dataset=curve.dataset,
        label=curve.label,
        variant=curve.variant,
        measure=curve.measure,
        model=model,
        criterion=why,
        scales=tuple(int(x) for x in n),
        gains=tuple(float(g) for g in gains),
        gain_ci=tuple((float(a), float(b)) for a, b in gci),
        params=dict(zip(names, map(float, point[0]))),
        loo_rmse=loo,
        hours=hours,
        gain_per_hour=rate,
        gain_per_hour_ci=rate_ci,
        n_queries=int(diffs.shape[1]),
        n_resamples=int(idx.shape[0]),
        seed=settings.boot.seed,
        confidence=conf,
        **_answers(model, point, refits, n, settings),
    )


def _answers(model: str, point: np.ndarray, refits: _Refits, n: np.ndarray, settings: _FitSettings) -> dict[str, Any]:
    """What the fitted curve answers, each with its percentile CI over the refits: the slope at
    the largest scale and its trend, the predicted gain at the next scale, the target's scale and
    the pointwise band, under :class:`ScalingFit`'s field names."""
    conf = settings.boot.confidence
    top = float(n.max())

    def ci(x: np.ndarray) -> tuple[float, float]:
        lo, hi = percentile_interval(x, conf)
        return float(lo), float(hi)

    slope_ci = ci(refits.slope(top))
    nxt = np.array([top * NEXT_FACTOR])
    grid = np.geomspace(n.min(), top * SEARCH_FACTOR, _GRID_POINTS)
    band_grid = np.geomspace(n.min(), top * NEXT_FACTOR, 120)
    lo, hi = percentile_interval(refits.predict(band_grid), conf, axis=0)
    t_scale, t_ci, t_note = _target(model, point, refits.predict(grid), grid, settings.target, top, conf)
    return {
        "slope_per_doubling": float(_slope(model, point, top)[0]),
        "slope_ci": slope_ci,
        "trend": _trend(*slope_ci),
        "next_scale": int(round(top * NEXT_FACTOR)),
        "predicted_next": float(_predict(model, point, nxt)[0, 0]),
        "predicted_next_ci": ci(refits.predict(nxt)[:, 0]),
        "target": settings.target,
        "target_scale": t_scale,
        "target_scale_ci": t_ci,
        "target_note": t_note,
        "band_scales": band_grid,
        "band": np.stack([lo, _predict(model, point, band_grid)[0], hi]),
    }
