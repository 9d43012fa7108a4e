"""``ScalingFit``: the fitted gain curve of one (dataset, label, variant) and what it answers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
