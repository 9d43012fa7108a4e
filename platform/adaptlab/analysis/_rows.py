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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OPTIONAL_COLUMNS", "MetricColumns", "metric_row", "p_bounds", "p_draws"]

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


class MetricColumns(TypedDict, total=False):
    """The columns of a ``metrics`` row besides its key and ``value``, as keywords of
    :func:`metric_row`: the bootstrap estimate and its settings, the paired comparison, and
    the optional columns of :data:`OPTIONAL_COLUMNS`."""

    boot_mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_queries: int | None
    n_resamples: int | None
    sample_size: int | None
    seed: int | None
    compared_to: str | None
    p_value: float | None
    confidence: float | None
    interval_method: str | None
    p_adjusted: float | None
    adjustment: str | None
    family_size: int | None
    p_exact: float | None
    exact_test: str | None
    rank_low: int | None
    rank_high: int | None
    missing_from_run: int | None


def _num(x: Any) -> float | None:
    if x is None:
        return None
    return float(x)


def _int(x: Any) -> int | None:
    return None if x is None else int(x)


def _same(x: Any) -> Any:
    return x


_CORE: dict[str, Callable[[Any], Any]] = {
    "boot_mean": _num,
    "ci_low": _num,
    "ci_high": _num,
    "n_queries": _int,
    "n_resamples": _int,
    "sample_size": _int,
    "seed": _int,
    "compared_to": _same,
    "p_value": _num,
}
"""The columns every row has (``None`` when not given), in the row's order, with their conversion."""


def _clean(v: Any) -> Any:
    """``v`` as plain JSON values: numpy scalars as Python ones, non-finite floats as None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):  # numpy scalar
        return _clean(v.item())
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def metric_row(
    system: str,
    dataset: str,
    measure: str,
    value: float,
    *,
    extra: Mapping[str, Any] | None = None,
    **columns: Unpack[MetricColumns],
) -> dict[str, Any]:
    """One ``metrics`` row; ``extra`` is stored as a JSON string with sorted keys; ``columns``
    the other columns by name (:class:`MetricColumns`; ``None`` values of the optional columns
    of :data:`OPTIONAL_COLUMNS` are left out)."""
    unknown = sorted(set(columns) - set(_CORE) - set(OPTIONAL_COLUMNS))
    if unknown:
        raise TypeError(
            f"metric_row: unknown column(s) {', '.join(unknown)}; known: {', '.join([*_CORE, *OPTIONAL_COLUMNS])}"
        )
    given: dict[str, Any] = dict(columns)
    row = {"system": str(system), "dataset": str(dataset), "measure": str(measure), "value": _num(value)}
    row.update({name: convert(given.get(name)) for name, convert in _CORE.items()})
    row["extra"] = json.dumps({k: _clean(v) for k, v in extra.items()}, sort_keys=True) if extra else None
    for name, v in given.items():
        if name in OPTIONAL_COLUMNS and v is not None:
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
