"""Curve forms of the data-scaling fits: the log-linear and the saturating gain curve, their
least-squares fits, the leave-one-out choice between them and the refits of every resample
(method in :mod:`adaptlab.analysis.scaling`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError

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
