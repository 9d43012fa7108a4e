"""What a fitted gain curve answers beyond the measured scales: the trend at the largest scale, the
scale at which a target gain is reached (an extrapolation), the gain per training hour.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from adaptlab.analysis.scaling.forms import SEARCH_FACTOR, _predict


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
