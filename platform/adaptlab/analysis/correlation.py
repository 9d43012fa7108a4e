"""Correlations between measures across the systems of a study (reference 000, Table 3).

For two measures ``x`` and ``y`` with one value per system, the Pearson correlation
(``scipy.stats.pearsonr``) and the Spearman rank correlation (``scipy.stats.spearmanr``), each
with its two-sided p-value. Systems lacking either measure are left out of that pair; a pair
with fewer than ``min_systems`` (default 3) systems, or a constant measure, gives NaN.

The default pairs follow the paper: accuracy vs COE, accuracy vs ROE, threshold vs ROE,
accuracy vs ``I_A`` (``isotropy_mu``) and accuracy vs ``I_B`` (``isoscore``), with accuracy
``acc@K``. By default each system's bootstrap mean is used where the store has one (the paper
correlates bootstrapped values), else its point value.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError

__all__ = ["Correlation", "correlation_table", "default_correlation_pairs", "measure_values"]


def default_correlation_pairs(k: int = 5) -> list[tuple[str, str]]:
    """The pairs of Table 3 of reference 000 with accuracy ``acc@k``."""
    acc = f"acc@{int(k)}"
    return [(acc, "coe"), (acc, "roe"), ("threshold", "roe"), (acc, "isotropy_mu"), (acc, "isoscore")]


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman correlation of measure ``y`` with measure ``x`` over ``systems``."""

    x: str
    y: str
    systems: tuple[str, ...]
    pearson_r: float
    pearson_p: float
    spearman_rho: float
    spearman_p: float

    @property
    def n(self) -> int:
        return len(self.systems)

    def to_metric_rows(self, dataset: str = "") -> list[dict[str, Any]]:
        """Rows ``pearson`` and ``spearman`` with ``system = "*"`` (across systems); extra: x, y, systems."""
        extra = {"x": self.x, "y": self.y, "systems": list(self.systems)}
        return [
            metric_row("*", dataset, "pearson", self.pearson_r, p_value=self.pearson_p, extra=extra),
            metric_row("*", dataset, "spearman", self.spearman_rho, p_value=self.spearman_p, extra=extra),
        ]


def _correlate(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    from scipy.stats import pearsonr, spearmanr

    nan = float("nan")
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return nan, nan, nan, nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pr = pearsonr(x, y)
        sr = spearmanr(x, y)
    return float(pr.statistic), float(pr.pvalue), float(sr.statistic), float(sr.pvalue)


def correlation_table(
    values: Mapping[str, Mapping[str, float]],
    pairs: Sequence[tuple[str, str]] | None = None,
    *,
    k: int = 5,
    min_systems: int = 3,
) -> list[Correlation]:
    """Correlations for ``pairs`` from ``values[system][measure]``.

    ``pairs`` defaults to :func:`default_correlation_pairs` ``(k)``.
    """
    if int(min_systems) < 2:
        raise ConfigError(f"min_systems must be >= 2, got {min_systems!r}")
    pairs = default_correlation_pairs(k) if pairs is None else [tuple(p) for p in pairs]  # type: ignore[misc]
    out = []
    for x_name, y_name in pairs:
        systems = tuple(
            s
            for s, per in values.items()
            if per.get(x_name) is not None
            and per.get(y_name) is not None
            and np.isfinite(float(per[x_name]))
            and np.isfinite(float(per[y_name]))
        )
        x = np.array([float(values[s][x_name]) for s in systems])
        y = np.array([float(values[s][y_name]) for s in systems])
        if len(systems) < int(min_systems):
            stats = (float("nan"),) * 4
        else:
            stats = _correlate(x, y)
        out.append(Correlation(x_name, y_name, systems, *stats))
    return out


def measure_values(rows: Any, *, prefer: str = "boot_mean") -> dict[str, dict[str, float]]:
    """``{system: {measure: value}}`` from metric rows (a pyarrow Table, pandas DataFrame or a
    list of dicts) of one dataset, ignoring paired comparisons (rows with ``compared_to``).

    ``prefer="boot_mean"`` takes the bootstrap mean where present, else ``value``;
    ``prefer="value"`` always takes the point value.
    """
    if prefer not in ("boot_mean", "value"):
        raise ConfigError(f"prefer must be 'boot_mean' or 'value', got {prefer!r}")
    if hasattr(rows, "to_pylist"):
        records = rows.to_pylist()
    elif hasattr(rows, "to_dict"):
        records = rows.to_dict("records")
    else:
        records = list(rows)
    out: dict[str, dict[str, float]] = {}
    for r in records:
        cmp = r.get("compared_to")
        if cmp is not None and not (isinstance(cmp, float) and np.isnan(cmp)) and cmp != "":
            continue
        v = r.get(prefer) if prefer == "boot_mean" else None
        if v is None or (isinstance(v, float) and np.isnan(v)):
            v = r.get("value")
        if v is None:
            continue
        out.setdefault(str(r["system"]), {})[str(r["measure"])] = float(v)
    return out
