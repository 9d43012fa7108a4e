"""Analyses the report computes when the store lacks them: similarity thresholds and COE/ROE
of every system whose per-query records are stored but whose rows are not (marked as computed
for the report, with the bootstrap settings used). COE/ROE need each query's similarity to its
gold document and to a random one, which only embedded retrieval records; systems scored from
TREC run files (``adaptlab evaluate``) have none and are listed as left out."""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptlab.analysis.overlap import overlap_metrics
from adaptlab.analysis.thresholds import ThresholdResult, similarity_thresholds
from adaptlab.stats import BootstrapConfig

__all__ = ["compute_missing_analyses", "has_similarities"]


def has_similarities(records: Any) -> bool:
    """Whether some judged query has both a gold and a random similarity (embedded retrieval
    records them; a TREC run does not)."""
    judged = np.array([len(g) > 0 for g in records.gold_ids], dtype=bool)
    gold = np.asarray(records.sim_gold, dtype=np.float64)[judged]
    rand = np.asarray(records.sim_random, dtype=np.float64)[judged]
    return bool(np.isfinite(gold).any() and np.isfinite(rand).any())


def compute_missing_analyses(
    rows: list[dict[str, Any]],
    records: dict[str, Any],
    k: int,
    cfg: BootstrapConfig,
) -> tuple[list[dict[str, Any]], list[ThresholdResult], list[str], list[str]]:
    """Thresholds and COE/ROE for the systems whose records are stored but whose rows are not:
    ``(rows, threshold results, what was computed, systems whose COE/ROE was left out for want
    of similarities)``."""
    rows = list(rows)
    have = {(r["system"], r["measure"]) for r in rows}
    thr_results: list[ThresholdResult] = []
    computed: list[str] = []
    left_out: list[str] = []
    for s, rec in records.items():
        kk = min(k, rec.k) if rec.k else 0
        if kk < 1 or not any(len(g) for g in rec.gold_ids):
            continue
        if (s, "threshold") not in have:
            tr = similarity_thresholds(rec, k=kk, bootstrap=cfg)
            thr_results.append(tr)
            rows += tr.to_metric_rows()
            computed.append(f"{s}: threshold")
        if (s, "coe") not in have and not has_similarities(rec):
            left_out.append(s)
        elif (s, "coe") not in have:
            rows += overlap_metrics(rec, k=kk, bootstrap=cfg).to_metric_rows()
            computed.append(f"{s}: COE/ROE")
    return rows, thr_results, computed, left_out
