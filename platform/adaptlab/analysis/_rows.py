"""Long-format rows for the results store's ``metrics`` table (shared by the analyses).

A row has the store's metric columns except ``run_id``, which the caller fills in when it
commits (``adaptlab.evaluation.persist.commit_summary(extra_metric_rows=...)`` does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["metric_row"]


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
) -> dict[str, Any]:
    """One ``metrics`` row; ``extra`` is stored as a JSON string with sorted keys."""

    def _clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if hasattr(v, "item"):  # numpy scalar
            return _clean(v.item())
        return v

    return {
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
