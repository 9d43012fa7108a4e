"""What the report's cells say about stored rows: the CI label from the rows' stored level and
method, the adjusted p-value with its family, and the reading of a row's ``extra`` JSON. Numbers
are written by :mod:`adaptlab.analysis.present`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adaptlab.analysis._rows import p_draws
from adaptlab.analysis.present import format_interval, format_number, format_p
from adaptlab.metrics import Measure
from adaptlab.stats.pvalues import ci_label

__all__ = ["ADJUSTMENT_NAMES", "adjusted_cell", "ci_label_of", "extra", "is_ranking_measure", "tests_cell", "width"]

ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "none"}


def is_ranking_measure(m: str) -> bool:
    """Whether ``m`` is a retrieval measure's canonical name (``ndcg@10``), not an analysis row."""
    try:
        return str(Measure.parse(m)) == m
    except Exception:  # noqa: BLE001 - any parse failure means "not a ranking measure"
        return False


def ci_label_of(rows: Sequence[dict[str, Any]]) -> str:
    """``"95% CI"`` from the rows' stored ``confidence`` (older rows without it: 95%, the only
    level they could have been written with by default); ``"CI"`` when the rows disagree."""
    levels = {r.get("confidence") for r in rows}
    levels.discard(None)
    methods = {r.get("interval_method") for r in rows} - {None}
    if len(levels) > 1:
        return "CI"
    conf = levels.pop() if levels else 0.95
    return ci_label(conf, methods.pop() if len(methods) == 1 else None)


def adjusted_cell(r: dict[str, Any]) -> str:
    """``0.03 (Holm, n=3)``: the adjusted p-value, the adjustment and the family size."""
    if r.get("p_adjusted") is None:
        return "n/a"
    name = ADJUSTMENT_NAMES.get(str(r.get("adjustment")), r.get("adjustment"))
    return f"{format_p(r['p_adjusted'], p_draws(r))} ({name}, n={format_number(r.get('family_size'))})"


def width(lo: Any, hi: Any) -> str:
    """The CI width ``hi - lo``; ``n/a`` when an end is missing."""
    if lo is None or hi is None:
        return "n/a"
    return format_number(float(hi) - float(lo))


def extra(row: dict[str, Any]) -> dict[str, Any]:
    """The row's ``extra`` JSON object (empty when absent or not an object)."""
    e = row.get("extra")
    if not e:
        return {}
    try:
        out = json.loads(e)
    except (TypeError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def tests_cell(tests: list[dict[str, Any]]) -> str:
    """Stored paired tests of ranking measures: ``ndcg@10: 0.050 [0.010, 0.090], p 0.04``."""
    shown = [t for t in tests if is_ranking_measure(str(t["measure"]))]
    if not shown:
        return "none stored"
    return "; ".join(
        f"{t['measure']}: {format_number(t['difference'])} {format_interval(t['ci_low'], t['ci_high'])}, "
        f"p {format_p(t['p_value'])}"
        for t in sorted(shown, key=lambda t: str(t["measure"]))
    )
