"""Long-format rows for the results store's ``metrics`` table (shared by the analyses).

A row has the store's metric columns except ``run_id``, which the caller fills in when it
commits (``adaptlab.evaluation.persist.commit_summary(extra_metric_rows=...)`` does). The
nullable columns added for issue 15 (``confidence``, ``interval_method``, ``p_adjusted``,
``adjustment``, ``family_size``, ``p_exact``, ``exact_test``, ``rank_low``, ``rank_high``,
``missing_from_run``) are only set when given, so rows stay readable by older writers' code.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["OPTIONAL_COLUMNS", "metric_row", "p_bounds", "p_draws"]

OPTIONAL_COLUMNS: dict[str, type] = {
    "confidence": float,
    "interval_method": str,
    "p_adjusted": float,
    "adjustment": str,
    "family_size": int,
    "p_exact": float,
    "exact_test": str,
    "rank_low": int,
    "rank_high": int,
    "missing_from_run": int,
}
"""The optional metric columns :func:`metric_row` accepts, with their Python types."""


def _num(x: Any) -> float | None:
    if x is None:
        return None
    return float(x)


def metric_row(
    system: str,
    dataset: str,
    measure: str,
    value: float,
    *,
    boot_mean: float | None = None,
    ci_low: float | None = None,
    ci_high: float | None = None,
    n_queries: int | None = None,
    n_resamples: int | None = None,
    sample_size: int | None = None,
    seed: int | None = None,
    compared_to: str | None = None,
    p_value: float | None = None,
    extra: Mapping[str, Any] | None = None,
    **optional: Any,
) -> dict[str, Any]:
    """One ``metrics`` row; ``extra`` is stored as a JSON string with sorted keys; ``optional``
    takes the columns of :data:`OPTIONAL_COLUMNS` (``None`` values are left out)."""

    def _clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if hasattr(v, "item"):  # numpy scalar
            return _clean(v.item())
        if isinstance(v, dict):
            return {k: _clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [_clean(x) for x in v]
        return v

    unknown = sorted(set(optional) - set(OPTIONAL_COLUMNS))
    if unknown:
        raise TypeError(f"metric_row: unknown column(s) {', '.join(unknown)}; known: {', '.join(OPTIONAL_COLUMNS)}")
    row = {
        "system": str(system),
        "dataset": str(dataset),
        "measure": str(measure),
        "value": _num(value),
        "boot_mean": _num(boot_mean),
        "ci_low": _num(ci_low),
        "ci_high": _num(ci_high),
        "n_queries": None if n_queries is None else int(n_queries),
        "n_resamples": None if n_resamples is None else int(n_resamples),
        "sample_size": None if sample_size is None else int(sample_size),
        "seed": None if seed is None else int(seed),
        "compared_to": compared_to,
        "p_value": _num(p_value),
        "extra": json.dumps({k: _clean(v) for k, v in extra.items()}, sort_keys=True) if extra else None,
    }
    for name, v in optional.items():
        if v is not None:
            row[name] = OPTIONAL_COLUMNS[name](v.item() if hasattr(v, "item") else v)
    return row


def p_bounds(row: Mapping[str, Any]) -> tuple[bool, bool]:
    """``(p_bound, p_adjusted_bound)`` of a paired row: whether its ``p_value`` is at its Monte
    Carlo floor and whether its ``p_adjusted`` is set by such a p (the row's own keys, else its
    ``extra`` JSON; False for rows stored before they were recorded). Print with
    ``adaptlab.analysis.present.format_p(p, bound=...)``, which writes a bound as ``<= p``."""
    extra: Any = row.get("extra")
    try:
        extra = json.loads(extra) if isinstance(extra, str) else (extra or {})
    except (TypeError, ValueError):
        extra = {}
    merged = {**(extra if isinstance(extra, dict) else {}), **{k: v for k, v in row.items() if v is not None}}
    return bool(merged.get("p_bound", False)), bool(merged.get("p_adjusted_bound", False))


def p_draws(row: Mapping[str, Any]) -> int | None:
    """The Monte Carlo draws behind a stored paired row's ``p_value`` (``extra.p_draws``: sign
    vectors or resamples; 0, an exact p-value, gives None), or the row's ``n_resamples`` for
    rows stored before it was recorded; what :func:`adaptlab.analysis.present.format_p` needs
    to print a p at its floor as a bound."""
    try:
        ex = json.loads(row.get("extra") or "{}")
    except (TypeError, ValueError):
        ex = {}
    draws = ex.get("p_draws", row.get("n_resamples")) if isinstance(ex, dict) else row.get("n_resamples")
    return int(draws) if draws else None
