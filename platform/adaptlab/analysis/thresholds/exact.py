"""The exact rule: the largest threshold whose one-sided Clopper-Pearson bound on the accuracy loss
stays within the margin, an order statistic of the hits' gold similarities (module doc of
:mod:`adaptlab.analysis.thresholds`).
"""

from __future__ import annotations

import numpy as np

from adaptlab.analysis.thresholds.grid import _pooled_psi


def _choose(ok: np.ndarray) -> int | None:
    where = np.flatnonzero(ok)
    return int(where.max()) if where.size else None


def lost_bound(n_queries: int, confidence: float, margin: float) -> int | None:
    """``L*``: the largest number of lost queries whose one-sided Clopper-Pearson upper bound
    ``Beta^-1(c; L + 1, Q - L)`` is ``<= margin`` (None when even ``L = 0`` fails)."""
    from scipy.stats import beta

    q = int(n_queries)
    lost = np.arange(q)
    upper = beta.ppf(float(confidence), lost + 1, q - lost)
    ok = np.flatnonzero(upper <= float(margin) + 1e-12)
    return int(ok.max()) if ok.size else None


def exact_rule(
    hits: np.ndarray,
    confidence: float,
    margin: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """The exact rule on a grid (module doc): ``hits`` [1 + P, Q] (row 0 without the threshold,
    rows in increasing ``tau``) -> ``(lost [P], loss_upper [P], passes [P], last)``: each
    threshold's lost queries, their one-sided Clopper-Pearson upper bound, whether it loses at
    most ``L*`` (:func:`lost_bound`; equivalently its bound is ``<= margin``) and the highest
    grid index that passes (None when none does)."""
    from scipy.stats import beta

    q = hits.shape[1]
    lost = np.rint((hits[0][None, :] - hits[1:]).clip(min=0).sum(axis=1)).astype(np.int64)
    upper = np.ones(lost.shape, dtype=np.float64)
    some = lost < q
    upper[some] = beta.ppf(float(confidence), lost[some] + 1, q - lost[some])
    bound = lost_bound(q, confidence, margin)
    passes = lost <= (-1 if bound is None else bound)
    return lost, upper, passes, _choose(passes)


def order_statistic_threshold(
    topk: np.ndarray,
    rank: np.ndarray,
    confidence: float,
    margin: float,
) -> float | None:
    """The exact rule's threshold (module doc): ``g_(L* + 1)``, the ``(L* + 1)``-th smallest
    gold similarity among the top-K hits, or the highest retrieved similarity when there are at
    most ``L*`` hits; None when no threshold can keep the guarantee at this number of queries."""
    bound = lost_bound(topk.shape[0], confidence, margin)
    if bound is None:
        return None
    hit = rank > 0
    gold = np.sort(topk[np.flatnonzero(hit), rank[hit] - 1])
    if gold.size <= bound:
        return float(np.nanmax(topk))
    return float(gold[bound])


def _with_exact_choice(
    psi: np.ndarray,
    tau: np.ndarray,
    topk: np.ndarray,
    rank: np.ndarray,
    qmin: np.ndarray,
    idx: np.ndarray,
    confidence: float,
    margin: float,
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """``(psi, tau, i)``: the grid with the exact rule's threshold inserted in ``tau`` order at
    its own ``psi`` (:func:`_pooled_psi`), and its index (None, grid unchanged, when none)."""
    chosen = order_statistic_threshold(topk, rank, confidence, margin)
    if chosen is None:
        return psi, tau, None
    i = int(np.searchsorted(tau, chosen, side="right"))
    return np.insert(psi, i, _pooled_psi(qmin, idx, chosen)), np.insert(tau, i, chosen), i
