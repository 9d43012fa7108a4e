"""How a threshold is chosen: the candidate percentiles of ``Gamma``, the selection test, the accuracy
margin and how ``Gamma`` is built (:class:`ThresholdRule`; the method in
:mod:`adaptlab.analysis.thresholds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from adaptlab.errors import ConfigError

PSI_GRID: tuple[float, ...] = tuple(float(p) for p in range(5, 101, 5))
"""The percentiles of ``Gamma`` tried by default: 5, 10, ..., 100."""


TESTS: tuple[str, ...] = ("exact", "margin", "paper")
"""Accepted values of ``test``: the exact fixed-sequence rule (default), the bootstrap margin rule
and the paper's rule."""


GAMMAS: tuple[str, ...] = ("pooled", "resample_min")
"""Accepted values of ``gamma``: pooled per-query K-th similarities (default) or one minimum
per resample (the paper's literal text)."""


@dataclass(frozen=True)
class ThresholdRule:
    """How a threshold is chosen (module doc): the candidate percentiles ``psi_grid`` of
    ``Gamma``, the selection ``test`` (one of :data:`TESTS`), the accuracy loss ``margin`` it may
    cost and how ``gamma`` is built (one of :data:`GAMMAS`). Checked by :meth:`checked_grid`."""

    psi_grid: Sequence[float] = PSI_GRID
    test: str = "exact"
    margin: float = 0.01
    gamma: str = "pooled"

    def checked_grid(self) -> np.ndarray:
        """Check the rule; return the grid sorted, float64."""
        return _check_rule(self.psi_grid, self.test, self.gamma, self.margin)


class ThresholdRuleOptions(TypedDict, total=False):
    """The fields of :class:`ThresholdRule` as keywords."""

    psi_grid: Sequence[float]
    test: str
    margin: float
    gamma: str


def _check_rule(psi_grid: Sequence[float], test: str, gamma: str, margin: float) -> np.ndarray:
    """Check ``psi_grid``, ``test``, ``gamma`` and ``margin``; return the grid sorted, float64."""
    psi = np.asarray(list(psi_grid), dtype=np.float64)
    if psi.size == 0 or np.any((psi < 0) | (psi > 100)):
        raise ConfigError(f"psi_grid must be non-empty percentiles in [0, 100], got {list(psi_grid)}")
    psi = np.sort(psi)
    if test not in TESTS:
        raise ConfigError(f"test={test!r} is not valid; expected one of {', '.join(TESTS)}")
    if gamma not in GAMMAS:
        raise ConfigError(f"gamma={gamma!r} is not valid; expected one of {', '.join(GAMMAS)}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0.0 <= float(margin) < 1.0:
        raise ConfigError(f"margin must be an accuracy loss in [0, 1) (0.01 = one point), got {margin!r}")
    return psi
