"""Data-scaling fits: how an adaptation variant's gain over its base grows with the data scale.

For a scale study (systems ``<label>-<variant>-s<N>`` beside ``<label>-base``, see
:mod:`adaptlab.models.variants`) and one measure, the per-query gains
``g_q(n) = v_q(<label>-<variant>-s<n>) - v_q(<label>-base)`` are averaged to the mean gain
``G(n)`` at each scale ``n`` (documents). Two curves are fitted to the points ``(n, G(n))`` by
least squares, with ``x = log2(n)``:

- **log-linear** (2 parameters): ``G(n) = a + b log2(n)``; ``b`` is the gain per doubling of the
  data (``b log2(10)`` per 10x). It never levels off, so its extrapolations are optimistic when
  the real curve saturates.
- **saturating** (3 parameters): ``G(n) = c - a n^(-alpha)``, ``alpha > 0``: the gain approaches
  ``c`` as the data grows, the power-law learning curve of Hestness et al. (2017), "Deep Learning
  Scaling is Predictable, Empirically", arXiv:1712.00409. It is fitted by profiling ``alpha`` over
  a log-spaced grid (:data:`ALPHA_GRID`) with ``(c, a)`` linear least squares at each ``alpha``.

**Choice (stated criterion).** The saturating form is considered only with at least
:data:`MIN_SCALES_SATURATING` scales (so each leave-one-out fit of its 3 parameters keeps a
residual degree of freedom); it is chosen when its leave-one-out root-mean-square prediction error
over the scales is smaller than the log-linear fit's (Stone 1974, "Cross-validatory choice and
assessment of statistical predictions", JRSS B 36(2)). With fewer scales the log-linear form is
used and the result says so. The reported form and point estimates are those chosen on the
measured gains.

**Uncertainty.** The queries are resampled with the same indices for every system
(:func:`adaptlab.stats.resample_indices`: paired, so the correlation of the gains across scales
is kept). Each resample repeats the whole procedure on its own mean gains: where the form is
chosen from the data (``model="auto"`` with at least :data:`MIN_SCALES_SATURATING` scales) the
resample chooses its form again by the same criterion, then fits it. The percentile interval over
the resamples (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", section 13.3) gives
the CI of every reported number and the pointwise band of the curve; being the bootstrap of the
choice and the fit together, it carries the uncertainty of the choice of form (Efron 2014,
"Estimation and accuracy after model selection", JASA 109(507), section 2). The bands cover the
sampling variation of the queries, not the randomness of training (one trained model per scale)
nor a truth of neither form.

Reported per (label, variant): the slope per doubling (and per 10x) at the largest scale with
its CI and whether the gain still rises there (the CI above 0); the predicted gain at the next
scale (2x the largest), an **extrapolation**; the scale at which the fitted gain first reaches a
target (searched up to 10x the largest scale, else "not reached within 10x"); and the gain per
training hour at each scale, from the seconds the store records for each model's training.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis._resample import draw_indices, resample_means
from adaptlab.errors import ConfigError, DataError, StoreError
from adaptlab.models.variants import BASE, PT, PT_FT, curve_order, parse_system_name, system_name
from adaptlab.stats import BootstrapConfig, percentile_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "ALPHA_GRID",
    "MIN_SCALES_SATURATING",
    "SCALING_MODELS",
    "NEXT_FACTOR",
    "SEARCH_FACTOR",
    "ScalingFit",
    "fit_scaling",
    "fits_from_store_rows",
    "format_scaling",
    "plot_scaling",
    "record_scaling",
    "scaling_from_records",
    "scaling_from_store",
    "scaling_rows",
    "scaling_store_rows",
    "scaling_tables",
    "stored_scaling",
    "training_seconds",
    "comparison_scaling",
    "scale_curve_fits",
    "scaling_summary",
    "scaling_summary_rows",
]

MIN_SCALES_SATURATING = 5
"""Fewest scales with which the 3-parameter saturating form is considered."""
ALPHA_GRID = np.geomspace(0.05, 3.0, 60)
"""The exponents ``alpha`` of the saturating form's profile fit."""
NEXT_FACTOR = 2.0
"""The next scale is this multiple of the largest measured scale."""
SEARCH_FACTOR = 10.0
"""A target gain is searched up to this multiple of the largest measured scale."""
_GRID_POINTS = 400
LOG_LINEAR, SATURATING = "log-linear", "saturating"
SCALING_MODELS = ("auto", LOG_LINEAR, SATURATING)


@dataclass(frozen=True)
class ScalingFit:
    """The fitted gain curve of one (dataset, label, variant) and what it answers.

    ``scales``, ``gains`` and ``gain_ci`` are the measured points; ``params`` the fitted
    parameters (``a``, ``b`` of the log-linear form; ``c``, ``a``, ``alpha`` of the saturating
    one); ``loo_rmse`` each form's leave-one-out error (None where not computable); ``band``
    the curve on ``band_scales`` with its pointwise CI (rows: low, fitted, high).
    ``target_scale`` is None when the target is not reached within ``SEARCH_FACTOR`` x the
    largest scale (``target_note`` says so); ``hours`` and ``gain_per_hour`` are None where the
    store records no training seconds.
    """

    dataset: str
    label: str
    variant: str
    measure: str
    model: str
    criterion: str
    scales: tuple[int, ...]
    gains: tuple[float, ...]
    gain_ci: tuple[tuple[float, float], ...]
    params: dict[str, float]
    loo_rmse: dict[str, float | None]
    slope_per_doubling: float
    slope_ci: tuple[float, float]
    trend: str
    next_scale: int
    predicted_next: float
    predicted_next_ci: tuple[float, float]
    target: float | None
    target_scale: float | None
    target_scale_ci: tuple[float, float] | None
    target_note: str
    hours: tuple[float | None, ...]
    gain_per_hour: tuple[float | None, ...]
    gain_per_hour_ci: tuple[tuple[float, float] | None, ...]
    n_queries: int
    n_resamples: int
    seed: int
    confidence: float
    band_scales: np.ndarray = field(repr=False, compare=False)
    band: np.ndarray = field(repr=False, compare=False)

    @property
    def slope_per_10x(self) -> float:
        """The slope at the largest scale per tenfold increase of the data."""
        return self.slope_per_doubling * float(np.log2(10.0))

    @property
    def slope_per_10x_ci(self) -> tuple[float, float]:
        k = float(np.log2(10.0))
        return self.slope_ci[0] * k, self.slope_ci[1] * k


# ----------------------------------------------------------------------------- the two forms
def _lin_fit(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Least-squares ``(a, b)`` of ``g = a + b x`` for every row of ``g`` [B, S] -> [B, 2]."""
    design = np.column_stack([np.ones_like(x), x])
    return g @ np.linalg.pinv(design).T


def _sat_fit(n: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Least-squares ``(c, a, alpha)`` of ``g = c - a n^-alpha`` per row of ``g`` [B, S] -> [B, 3],
    ``alpha`` profiled over :data:`ALPHA_GRID` (``(c, a)`` linear at each ``alpha``; the first
    ``alpha`` of the smallest residual sum of squares)."""
    designs = np.stack([np.column_stack([np.ones_like(n), -(n**-alpha)]) for alpha in ALPHA_GRID])  # [A, S, 2]
    coef = np.einsum("bs,aks->bak", g, np.linalg.pinv(designs))  # [B, A, 2]
    sse = ((g[:, None, :] - np.einsum("bak,ask->bas", coef, designs)) ** 2).sum(axis=2)  # [B, A]
    best = np.argmin(sse, axis=1)
    rows = np.arange(g.shape[0])
    return np.column_stack([coef[rows, best], ALPHA_GRID[best]])


def _predict(model: str, params: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The fitted gain at scales ``n`` [G] for every parameter row [B, k] -> [B, G]."""
    if model == LOG_LINEAR:
        return params[:, :1] + params[:, 1:2] * np.log2(n)[None, :]
    return params[:, :1] - params[:, 1:2] * n[None, :] ** -params[:, 2:3]


def _slope(model: str, params: np.ndarray, n: float) -> np.ndarray:
    """``dG / dlog2(n)`` at scale ``n`` (gain per doubling there) per parameter row -> [B]."""
    if model == LOG_LINEAR:
        return params[:, 1]
    return params[:, 1] * params[:, 2] * n ** -params[:, 2] * np.log(2.0)


def _fit(model: str, n: np.ndarray, g: np.ndarray) -> np.ndarray:
    return _lin_fit(np.log2(n), g) if model == LOG_LINEAR else _sat_fit(n, g)


def _loo_rmse_rows(model: str, n: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Leave-one-out root-mean-square prediction error of ``model`` on the points (n, g) for
    every row of ``g`` [B, S] -> [B]: each scale is predicted by the fit to the others."""
    sq = np.zeros(g.shape[0])
    for i in range(n.size):
        keep = np.arange(n.size) != i
        p = _fit(model, n[keep], g[:, keep])
        sq += (_predict(model, p, n[i : i + 1])[:, 0] - g[:, i]) ** 2
    return np.sqrt(sq / n.size)


def _loo_rmse(model: str, n: np.ndarray, g: np.ndarray) -> float | None:
    """Leave-one-out root-mean-square prediction error of ``model`` on the points (n, g), None
    with too few scales for a residual degree of freedom in every left-one-out fit."""
    need = 3 if model == LOG_LINEAR else MIN_SCALES_SATURATING
    if n.size < need:
        return None
    return float(_loo_rmse_rows(model, n, g[None, :])[0])


def _choose(n: np.ndarray, g: np.ndarray, model: str) -> tuple[str, str, dict[str, float | None]]:
    """The form, the sentence that says why, and both forms' leave-one-out errors."""
    loo = {LOG_LINEAR: _loo_rmse(LOG_LINEAR, n, g), SATURATING: _loo_rmse(SATURATING, n, g)}
    if model == LOG_LINEAR or (model == SATURATING and n.size >= 3):
        return model, f"{model}: asked for", loo
    if model == SATURATING:
        raise ConfigError(f"model {SATURATING!r} needs at least 3 scales (3 parameters), got {n.size}")
    if loo[SATURATING] is None:
        return (
            LOG_LINEAR,
            (f"log-linear: {n.size} scales (the saturating form needs at least {MIN_SCALES_SATURATING})"),
            loo,
        )
    if loo[SATURATING] < loo[LOG_LINEAR]:  # type: ignore[operator]
        return SATURATING, "saturating: smaller leave-one-out error than log-linear", loo
    return LOG_LINEAR, "log-linear: leave-one-out error not larger than the saturating form's", loo


@dataclass(frozen=True)
class _Refits:
    """Every bootstrap resample's fit, in the form that resample's own gains choose.

    ``saturating`` [B] marks the resamples fitted with the saturating form (``sat`` [B, 3]),
    the others use ``lin`` [B, 2]; a form no resample uses may be None. Choosing again in each
    resample bootstraps the whole procedure (choice, then fit), so the percentile intervals carry
    the uncertainty of the choice (Efron 2014, "Estimation and accuracy after model selection",
    JASA 109(507), section 2).
    """

    lin: np.ndarray | None
    sat: np.ndarray | None
    saturating: np.ndarray

    def _pick(self, of_lin: Any, of_sat: Any) -> np.ndarray:
        if self.sat is None:
            return np.asarray(of_lin(self.lin))
        if self.lin is None:
            return np.asarray(of_sat(self.sat))
        lin, sat = of_lin(self.lin), of_sat(self.sat)
        mask = self.saturating if lin.ndim == 1 else self.saturating[:, None]
        return np.where(mask, sat, lin)

    def predict(self, grid: np.ndarray) -> np.ndarray:
        """Each resample's fitted gain at ``grid`` [G] -> [B, G]."""
        return self._pick(lambda p: _predict(LOG_LINEAR, p, grid), lambda p: _predict(SATURATING, p, grid))

    def slope(self, top: float) -> np.ndarray:
        """Each resample's gain per doubling at scale ``top`` -> [B]."""
        return self._pick(lambda p: _slope(LOG_LINEAR, p, top), lambda p: _slope(SATURATING, p, top))


def _refit(n: np.ndarray, boot_gains: np.ndarray, form: str, chosen: str) -> _Refits:
    """Fit every resample's mean gains [B, S]; with ``form`` ``"auto"`` and enough scales for
    both forms, each resample chooses its form by the criterion of :func:`_choose` (smaller
    leave-one-out RMSE), else every resample keeps ``chosen``."""
    b = boot_gains.shape[0]
    if form != "auto" or n.size < MIN_SCALES_SATURATING:
        params = _fit(chosen, n, boot_gains)
        if chosen == LOG_LINEAR:
            return _Refits(params, None, np.zeros(b, dtype=bool))
        return _Refits(None, params, np.ones(b, dtype=bool))
    sat = _loo_rmse_rows(SATURATING, n, boot_gains) < _loo_rmse_rows(LOG_LINEAR, n, boot_gains)
    return _Refits(_fit(LOG_LINEAR, n, boot_gains), _fit(SATURATING, n, boot_gains), sat)


# ----------------------------------------------------------------------------- the answers
def _trend(lo: float, hi: float) -> str:
    if lo > 0:
        return "still rising"
    if hi < 0:
        return "falling"
    return "not shown to rise (CI includes 0)"


def _first_reach(curves: np.ndarray, grid: np.ndarray, target: float) -> np.ndarray:
    """Per row of ``curves`` [B, G]: the first grid scale where the gain reaches ``target``
    (>= for a target >= 0, <= below 0), inf when none does."""
    hit = curves >= target if target >= 0 else curves <= target
    first = np.argmax(hit, axis=1)
    return np.where(hit.any(axis=1), grid[first], np.inf)


def _target(
    model: str,
    point: np.ndarray,
    boot_curves: np.ndarray,
    grid: np.ndarray,
    target: float | None,
    top: float,
    confidence: float,
) -> tuple[float | None, tuple[float, float] | None, str]:
    if target is None:
        return None, None, "no target given"
    est = float(_first_reach(_predict(model, point, grid), grid, target)[0])
    lo, hi = (
        float(v)
        for v in np.quantile(
            _first_reach(boot_curves, grid, target),
            [(1 - confidence) / 2, (1 + confidence) / 2],
            method="inverted_cdf",
        )
    )
    if not np.isfinite(est):
        return None, (lo, hi), f"not reached within {SEARCH_FACTOR:g}x the largest scale ({top * SEARCH_FACTOR:g})"
    if est <= grid[0]:
        return est, (lo, hi), f"already reached at the smallest scale ({grid[0]:g})"
    where = "within the measured scales" if est <= top else "an extrapolation beyond the largest scale"
    upper = f"{hi:.0f}" if np.isfinite(hi) else f"beyond {SEARCH_FACTOR:g}x"
    return est, (lo, hi), f"about {est:.0f} ({where}; CI {lo:.0f} to {upper})"


def _per_hour(
    gains: np.ndarray, ci: np.ndarray, seconds: Sequence[float | None]
) -> tuple[tuple[float | None, ...], tuple[float | None, ...], tuple[tuple[float, float] | None, ...]]:
    hours = tuple(None if s is None or s <= 0 else float(s) / 3600.0 for s in seconds)
    rate = tuple(None if h is None else float(g) / h for g, h in zip(gains, hours))
    rate_ci = tuple(None if h is None else (float(c[0]) / h, float(c[1]) / h) for c, h in zip(ci, hours))
    return hours, rate, rate_ci


# ----------------------------------------------------------------------------- entry points
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
    if model not in SCALING_MODELS:
        raise ConfigError(f"fit_scaling: model must be one of {', '.join(SCALING_MODELS)}, got {model!r}")
    if target is not None and (
        isinstance(target, bool) or not isinstance(target, (int, float)) or not np.isfinite(target)
    ):
        raise ConfigError(
            f"fit_scaling: target must be a finite number (a gain in the measure's units), got {target!r}"
        )
    boot = boot or BootstrapConfig()
    names, values = _values(per_query)
    idx = draw_indices(values.shape[1], boot)
    seconds = dict(training_seconds or {})
    fits = []
    for (label, variant), points in _curves(names).items():
        if len(points) < 2:
            continue
        base = values[names.index(system_name(label, BASE))]
        diffs = np.stack([values[names.index(s)] - base for _n, s in points])
        fits.append(
            _fit_curve(
                dataset,
                label,
                variant,
                str(measure),
                np.array([n for n, _s in points], float),
                diffs,
                idx,
                boot,
                target,
                [seconds.get(s) for _n, s in points],
                model,
            )
        )
    return fits


def _fit_curve(
    dataset: str,
    label: str,
    variant: str,
    measure: str,
    n: np.ndarray,
    diffs: np.ndarray,
    idx: np.ndarray,
    boot: BootstrapConfig,
    target: float | None,
    seconds: list[float | None],
    form: str,
) -> ScalingFit:
    gains = diffs.mean(axis=1)
    boot_gains = resample_means(diffs, idx)  # [B, S], the same queries for every scale
    model, why, loo = _choose(n, gains, form)
    point, refits = _fit(model, n, gains[None, :]), _refit(n, boot_gains, form, model)
    if refits.lin is not None and refits.sat is not None:
        why += f"; chosen again in every resample (saturating in {refits.saturating.mean():.0%} of them)"
    conf = boot.confidence
    top = float(n.max())

    def ci(x: np.ndarray) -> tuple[float, float]:
        lo, hi = percentile_interval(x, conf)
        return float(lo), float(hi)

    slope_ci = ci(refits.slope(top))
    nxt = np.array([top * NEXT_FACTOR])
    grid = np.geomspace(n.min(), top * SEARCH_FACTOR, _GRID_POINTS)
    band_grid = np.geomspace(n.min(), top * NEXT_FACTOR, 120)
    lo, hi = percentile_interval(refits.predict(band_grid), conf, axis=0)
    gci = np.stack(percentile_interval(boot_gains, conf, axis=0), axis=1)
    t_scale, t_ci, t_note = _target(model, point, refits.predict(grid), grid, target, top, conf)
    hours, rate, rate_ci = _per_hour(gains, gci, seconds)
    names = ("a", "b") if model == LOG_LINEAR else ("c", "a", "alpha")
    return ScalingFit(
        dataset=dataset,
        label=label,
        variant=variant,
        measure=measure,
        model=model,
        criterion=why,
        scales=tuple(int(x) for x in n),
        gains=tuple(float(g) for g in gains),
        gain_ci=tuple((float(a), float(b)) for a, b in gci),
        params=dict(zip(names, map(float, point[0]))),
        loo_rmse=loo,
        slope_per_doubling=float(_slope(model, point, top)[0]),
        slope_ci=slope_ci,
        trend=_trend(*slope_ci),
        next_scale=int(round(top * NEXT_FACTOR)),
        predicted_next=float(_predict(model, point, nxt)[0, 0]),
        predicted_next_ci=ci(refits.predict(nxt)[:, 0]),
        target=target,
        target_scale=t_scale,
        target_scale_ci=t_ci,
        target_note=t_note,
        hours=hours,
        gain_per_hour=rate,
        gain_per_hour_ci=rate_ci,
        n_queries=int(diffs.shape[1]),
        n_resamples=int(idx.shape[0]),
        seed=boot.seed,
        confidence=conf,
        band_scales=band_grid,
        band=np.stack([lo, _predict(model, point, band_grid)[0], hi]),
    )


def _seconds_of(info: Any) -> float | None:
    """The training seconds of one ``config.systems`` entry: ``training.seconds`` (bi-encoder
    loops) or ``training.wall_s`` (ColBERT), else those of its artifact's manifest."""
    if not isinstance(info, dict):
        return None
    t = info.get("training")
    if not t and info.get("artifact_path"):
        from adaptlab.adapt.train.artifacts import read_manifest

        try:
            t = read_manifest(str(info["artifact_path"])).get("training")
        except StoreError:
            t = None
    s = t.get("seconds", t.get("wall_s")) if isinstance(t, dict) else None
    return float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 else None


def training_seconds(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``{system: seconds}`` of each adapted model's training, from ``config.systems.<name>`` of
    the store's runs (the latest run's entry wins; see :func:`_seconds_of`). A ``pt-ft`` model
    adds the seconds of its PT stage (``<label>-pt-s<N>``) to those of its FT stage; a model
    without a recorded time (a merge trains nothing) is left out."""
    out: dict[str, float] = {}
    for run in runs:
        try:
            config = json.loads(run.get("config") or "{}")
        except (TypeError, ValueError):
            continue
        entries = config.get("systems") if isinstance(config, dict) else None
        for name, info in entries.items() if isinstance(entries, dict) else ():
            seconds = _seconds_of(info)
            if seconds is not None:
                out[str(name)] = seconds
    for name in list(out):
        parsed = parse_system_name(name)
        if parsed is not None and parsed[1] == PT_FT and system_name(parsed[0], PT, parsed[2]) in out:
            out[name] += out[system_name(parsed[0], PT, parsed[2])]
    return out


def _store_fits(
    store: Any,
    measures: Sequence[str],
    dataset: str | None,
    target: float | None,
    boot: BootstrapConfig | None,
    model: str,
) -> tuple[list[ScalingFit], Any]:
    """:func:`fit_scaling` of every (dataset, measure) group of the store's records, and the groups."""
    from adaptlab.analysis.compare import store_groups

    groups = store_groups(store, dataset, list(measures))
    seconds = training_seconds(store.runs().to_pylist())
    fits = []
    for (ds, m), (names, values) in groups.items():
        fits += fit_scaling(
            dict(zip(names, values)), m, dataset=ds, target=target, boot=boot, training_seconds=seconds, model=model
        )
    return fits, groups


def scaling_from_store(
    store: Any,
    measure: str = "ndcg@10",
    *,
    dataset: str | None = None,
    target: float | None = None,
    boot: BootstrapConfig | None = None,
    model: str = "auto",
) -> list[ScalingFit]:
    """:func:`fit_scaling` on a results store's latest per-query records (re-scored as
    :func:`adaptlab.compare` does), every dataset (or ``dataset``), with the training seconds of
    its runs."""
    fits, groups = _store_fits(store, [measure], dataset, target, boot, model)
    if not fits:
        have = "; ".join(f"{ds}: {', '.join(names)}" for (ds, _m), (names, _v) in groups.items())
        raise ConfigError(
            "no scale-study variant with at least 2 scales and its own <label>-base on one dataset "
            f"(systems named <label>-<variant>-s<N>); the store has {have}"
        )
    return fits


def scaling_from_records(
    records: Mapping[str, Any],
    measure: str = "ndcg@10",
    *,
    dataset: str = "",
    target: float | None = None,
    boot: BootstrapConfig | None = None,
    training_seconds: Mapping[str, float] | None = None,
) -> list[ScalingFit]:
    """:func:`fit_scaling` on ``{system: PerQueryRecords}`` of one dataset: ``measure`` per query
    from the stored rankings (the gold documents relevant, as :func:`adaptlab.compare` re-scores a
    store), on the queries every system has."""
    from adaptlab.metrics import evaluate, parse_measures

    m = parse_measures([measure])[0]
    recs = dict(records)
    if not recs:
        return []
    common = [q for q in next(iter(recs.values())).query_ids if all(q in set(r.query_ids) for r in recs.values())]
    qrels = {q: {g: 1 for g in gold} for r in recs.values() for q, gold in zip(r.query_ids, r.gold_ids) if gold}
    common = [q for q in common if q in qrels]
    if len(common) < 2:
        return []
    values = {
        s: np.asarray(evaluate(qrels, r.to_run(), [m], query_ids=common).matrix(str(m)), dtype=np.float64)
        for s, r in recs.items()
    }
    return fit_scaling(values, str(m), dataset=dataset, target=target, boot=boot, training_seconds=training_seconds)


def scaling_rows(fits: Sequence[ScalingFit]) -> list[dict[str, Any]]:
    """One JSON-ready dict per fit (the measured points under ``points``)."""

    def num(x: float | None) -> float | None:
        return None if x is None or not np.isfinite(x) else float(x)

    rows = []
    for f in fits:
        rows.append(
            {
                "dataset": f.dataset,
                "label": f.label,
                "variant": f.variant,
                "measure": f.measure,
                "model": f.model,
                "criterion": f.criterion,
                "params": f.params,
                "loo_rmse": f.loo_rmse,
                "slope_per_doubling": f.slope_per_doubling,
                "slope_per_doubling_ci": list(f.slope_ci),
                "slope_per_10x": f.slope_per_10x,
                "slope_per_10x_ci": list(f.slope_per_10x_ci),
                "trend": f.trend,
                "next_scale": f.next_scale,
                "predicted_next": f.predicted_next,
                "predicted_next_ci": list(f.predicted_next_ci),
                "extrapolation": True,
                "target": f.target,
                "target_scale": num(f.target_scale),
                "target_scale_ci": None if f.target_scale_ci is None else [num(v) for v in f.target_scale_ci],
                "target_note": f.target_note,
                "n_queries": f.n_queries,
                "n_resamples": f.n_resamples,
                "seed": f.seed,
                "confidence": f.confidence,
                "points": [
                    {
                        "n_documents": n,
                        "gain": g,
                        "gain_ci": list(c),
                        "training_hours": h,
                        "gain_per_hour": r,
                        "gain_per_hour_ci": None if rc is None else list(rc),
                    }
                    for n, g, c, h, r, rc in zip(
                        f.scales, f.gains, f.gain_ci, f.hours, f.gain_per_hour, f.gain_per_hour_ci
                    )
                ],
            }
        )
    return rows


def plot_scaling(
    fits: Sequence[ScalingFit], path: str | Path | None = None, *, title: str | None = None, dpi: int | None = None
) -> Figure:
    """The measured gains (points with their CI bars) and each fitted curve with its pointwise
    band, the part beyond the largest scale dashed (an extrapolation), against the data scale on
    a log axis; one panel per dataset, one legend below. Saved to ``path`` when given (PNG, PDF
    or SVG)."""
    if not fits:
        raise ConfigError("plot_scaling: nothing to plot")
    from adaptlab.analysis.plots import DEFAULT_DPI, _figure, _finish

    datasets = list(dict.fromkeys(f.dataset for f in fits))
    ncols = min(3, len(datasets))
    nrows = (len(datasets) + ncols - 1) // ncols
    fig = _figure(max(7.2, 5.2 * ncols), 4.2 * nrows + 0.8)
    grid = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax in grid.ravel()[len(datasets) :]:
        ax.set_visible(False)
    handles: dict[str, Any] = {}
    colors = {key: f"C{i % 10}" for i, key in enumerate(dict.fromkeys((f.label, f.variant) for f in fits))}
    for ax, ds in zip(grid.ravel(), datasets):
        _scaling_panel(ax, [f for f in fits if f.dataset == ds], colors, handles)
        if len(datasets) > 1 or ds:
            ax.set_title(ds)
    grid[0, 0].set_ylabel(f"{fits[0].measure}: variant - own base")
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(4, len(handles)))
    pct = f"{fits[0].confidence * 100:g}%"
    fig.suptitle(title or f"gain over own base against data scale (bands: pointwise {pct} CI)")
    return _finish(fig, path, DEFAULT_DPI if dpi is None else dpi)


def _scaling_panel(
    ax: Any, fits: Sequence[ScalingFit], colors: Mapping[tuple[str, str], str], handles: dict[str, Any]
) -> None:
    """One dataset's fits on ``ax`` (a colour per label and variant, the same in every panel);
    each variant's line handle goes into ``handles`` by legend label."""
    from matplotlib.ticker import NullLocator

    for f in fits:
        color, top = colors[(f.label, f.variant)], max(f.scales)
        inside = f.band_scales <= top * (1 + 1e-9)
        ax.fill_between(f.band_scales, f.band[0], f.band[2], color=color, alpha=0.15)
        (line,) = ax.plot(f.band_scales[inside], f.band[1][inside], color=color)
        handles.setdefault(f"{f.label} {f.variant} ({f.model} fit)", line)
        ax.plot(f.band_scales[~inside], f.band[1][~inside], color=color, linestyle="--")
        g = np.array(f.gains)
        err = np.clip(np.array([[gv - c[0], c[1] - gv] for gv, c in zip(g, f.gain_ci)]).T, 0.0, None)
        ax.errorbar(f.scales, g, yerr=err, fmt="o", color=color, capsize=3)
    ax.axhline(0.0, color="k", linewidth=1)
    ax.set_xscale("log")
    scales = sorted({n for f in fits for n in f.scales} | {f.next_scale for f in fits})
    ax.set_xticks(scales, labels=[str(n) for n in scales])  # the scales themselves and the next one
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("documents (log scale; dashed: extrapolation)")
    ax.grid(alpha=0.3)


def scaling_tables(
    fits: Sequence[ScalingFit],
) -> tuple[tuple[list[str], list[list[str]]], tuple[list[str], list[list[str]]]]:
    """Two tables ``(header, rows)``: one row per fit (form, slope, trend, the extrapolated next
    scale, the target), and one per measured point (gain, training hours, gain per hour)."""
    from adaptlab.analysis.present import format_interval, format_number

    pct = f"{fits[0].confidence * 100:g}% CI" if fits else "CI"
    fit_rows = [
        [
            f.dataset,
            f"{f.label} {f.variant}",
            f.model,
            f"{format_number(f.slope_per_doubling)} {format_interval(*f.slope_ci)}",
            f.trend,
            str(f.next_scale),
            f"{format_number(f.predicted_next)} {format_interval(*f.predicted_next_ci)}",
            f.target_note if f.target is not None else "-",
        ]
        for f in fits
    ]
    point_rows = [
        [
            f.dataset,
            f"{f.label} {f.variant}",
            str(n),
            f"{format_number(g)} {format_interval(*c)}",
            "not recorded" if h is None else f"{h:.3g}",
            "n/a" if r is None else f"{format_number(r)} {format_interval(*rc)}",
        ]
        for f in fits
        for n, g, c, h, r, rc in zip(f.scales, f.gains, f.gain_ci, f.hours, f.gain_per_hour, f.gain_per_hour_ci)
    ]
    return (
        (
            [
                "Dataset",
                "Variant",
                "Fit",
                f"Gain per doubling at the largest scale [{pct}]",
                "At the largest scale",
                "Next scale",
                f"Predicted gain there (extrapolation) [{pct}]",
                "Scale for the target gain",
            ],
            fit_rows,
        ),
        (
            [
                "Dataset",
                "Variant",
                "Documents",
                f"Gain over own base [{pct}]",
                "Training hours",
                f"Gain per training hour [{pct}]",
            ],
            point_rows,
        ),
    )


def format_scaling(fits: Sequence[ScalingFit], style: str = "text") -> str:
    """Both tables of :func:`scaling_tables` and a footer (measure, queries, resamples, the
    criterion of each fit, the extrapolation caveat) in a :func:`adaptlab.analysis.present.
    render_table` style."""
    from adaptlab.analysis.present import render_table

    if not fits:
        raise ConfigError("format_scaling: no fit to show")
    (h1, r1), (h2, r2) = scaling_tables(fits)
    f = fits[0]
    counts = dict.fromkeys(f"{g.dataset} {g.n_queries}" if g.dataset else str(g.n_queries) for g in fits)
    queries = f"{f.n_queries} queries" if len(counts) == 1 else f"the queries of each dataset ({', '.join(counts)})"
    notes = [
        f"{f.measure}: mean gain of each variant over its own <label>-base on {queries}; "
        f"intervals: percentile bootstrap over {f.n_resamples} paired resamples of the queries (seed {f.seed}).",
        *dict.fromkeys(f"{g.label} {g.variant}: {g.criterion}." for g in fits),
        f"The next scale ({NEXT_FACTOR:g}x the largest) and targets beyond the largest scale are extrapolations "
        "of the fitted form: they hold only if the curve keeps its shape; the intervals cover the query "
        "sample (and, where the form is chosen from the data, that choice), not one training run's luck nor a "
        "true curve of neither form.",
        *(
            []
            if any(h is not None for g in fits for h in g.hours)
            else ["Training hours: the store records no training seconds for these models (gain per hour n/a)."]
        ),
    ]
    return "\n\n".join([render_table(h1, r1, style), render_table(h2, r2, style), "\n".join(notes)])


# ----------------------------------------------------------------------------- the store's typed rows
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


# ----------------------------------------------------------------------------- the summary of compare / inspect
def scale_curve_fits(
    per_query: Mapping[str, Any],
    measure: str,
    *,
    dataset: str = "",
    boot: BootstrapConfig | None = None,
    only: tuple[str, str] | None = None,
) -> list[ScalingFit]:
    """:func:`fit_scaling` of the systems that form scale curves (``<label>-base`` and at least 2
    scales of ``<label>-<variant>-s<N>``), [] when none do; ``only``: that (label, variant)."""
    names = [str(n) for n in per_query]
    curves = {k: v for k, v in _curves(names).items() if len(v) >= 2 and (only is None or k == only)}
    if not curves:
        return []
    keep = {system_name(label, BASE) for label, _v in curves} | {s for v in curves.values() for _n, s in v}
    fits = fit_scaling({n: v for n, v in per_query.items() if str(n) in keep}, measure, dataset=dataset, boot=boot)
    return [f for f in fits if (f.label, f.variant) in curves]


def comparison_scaling(result: Any) -> list[ScalingFit]:
    """The scale curves among the systems of a :class:`~adaptlab.analysis.compare.Comparison`
    (every dataset and measure), fitted with its bootstrap settings."""
    fits: list[ScalingFit] = []
    for g in result.groups:
        fits += scale_curve_fits(dict(zip(g.names, g.values)), g.measure, dataset=g.dataset, boot=result.boot)
    return fits


def _sentence(f: ScalingFit) -> str:
    from adaptlab.analysis.present import format_interval, format_number

    pct = f"{f.confidence * 100:g}%"
    where = f" on {f.dataset} ({f.n_queries} queries)" if f.dataset else f" ({f.n_queries} queries)"
    return (
        f"{f.label} {f.variant}{where}: {format_number(f.slope_per_10x)} {f.measure} per 10x more documents at the "
        f"largest scale ({max(f.scales)}; {pct} CI {format_interval(*f.slope_per_10x_ci)}, {f.model} fit over "
        f"scales {', '.join(map(str, f.scales))}), {f.trend}; predicted gain at {f.next_scale} documents "
        f"{format_number(f.predicted_next)} {format_interval(*f.predicted_next_ci)}, an extrapolation of the "
        "fitted curve."
    )


def scaling_summary(fits: Sequence[ScalingFit], style: str = "text") -> str:
    """One paragraph on the scale curves (module doc): per variant its gain over its own base per
    10x more documents at the largest scale with CI, whether it still rises there, and the
    predicted gain at 2x the largest scale, stated as an extrapolation; "" without fits. Stored
    names are escaped for the terminal, and in ``style`` ``"latex"`` / ``"html"`` for those."""
    import html

    from adaptlab.analysis.present import latex_escape, terminal_escape

    if not fits:
        return ""
    f = fits[0]
    text = terminal_escape(
        f"Data scaling (gain over each variant's own base; percentile bootstrap over "
        f"{f.n_resamples} paired resamples of the queries): " + " ".join(_sentence(x) for x in fits)
    )
    if style == "latex":
        return latex_escape(text)
    return html.escape(text) if style == "html" else text


def scaling_summary_rows(fits: Sequence[ScalingFit]) -> list[dict[str, Any]]:
    """The numbers of :func:`scaling_summary`, one flat dict per fit (JSON and CSV outputs)."""
    return [
        {
            "dataset": f.dataset,
            "measure": f.measure,
            "label": f.label,
            "variant": f.variant,
            "form": f.model,
            "scales": ",".join(map(str, f.scales)),
            "slope_per_10x": f.slope_per_10x,
            "slope_per_10x_ci_low": f.slope_per_10x_ci[0],
            "slope_per_10x_ci_high": f.slope_per_10x_ci[1],
            "trend": f.trend,
            "next_scale": f.next_scale,
            "predicted_next": f.predicted_next,
            "predicted_next_ci_low": f.predicted_next_ci[0],
            "predicted_next_ci_high": f.predicted_next_ci[1],
            "extrapolation": True,
            "confidence": f.confidence,
            "n_queries": f.n_queries,
            "n_resamples": f.n_resamples,
        }
        for f in fits
    ]
