"""nDCG@k curves per system (reference 004, Figure 3 and Appendix A.1).

``nDCG@k = DCG@k / IDCG@k`` with ``DCG@k = sum_{i <= k} rel_i / log2(i + 1)`` and ``IDCG@k``
the DCG of the judged relevant documents sorted by relevance, cut at ``k`` (trec_eval
``ndcg_cut``), for ``k`` in ``(1, 5, 10, 20, 30, 80)`` and at the corpus size (reference 004
reports nDCG at the number of contexts ranked). Each point has a bootstrap CI over queries.

Per-query records keep only the top-``K`` documents (``K`` = the retrieval depth), so from
records nDCG@k is exact for ``k <= K``; for larger ``k`` (also the full corpus size when it
exceeds ``K``) the value computed from the truncated ranking is a **lower bound** and is
flagged in :attr:`NDCGCurve.exact`. Retrieve with ``top_k >= max(ks)`` (or the corpus size)
for exact curves. Records carry gold ids without grades, so relevance is binary there; a
graded ``run`` + ``qrels`` goes through :func:`ndcg_curve`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from adaptlab.analysis._options import BootstrapOptions, split_options
from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure, evaluate, ranked_values
from adaptlab.stats import BootstrapConfig, bootstrap_ci
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_NDCG_KS", "NDCGCurve", "ndcg_curve", "ndcg_curve_from_records", "ndcg_curves"]

DEFAULT_NDCG_KS: tuple[int, ...] = (1, 5, 10, 20, 30, 80)


@dataclass(frozen=True)
class NDCGCurve:
    """nDCG@k of one system for each ``k`` in ``ks`` (fractions in [0, 1]).

    ``exact[i]`` is False where ``ks[i]`` exceeds the depth of the ranking the values were
    computed from (``depth``); those values are lower bounds. ``per_query`` is [len(ks), Q].
    """

    system: str
    dataset: str
    ks: tuple[int, ...]
    values: np.ndarray
    boot_mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    exact: np.ndarray
    depth: int
    n_queries: int
    per_query: np.ndarray


def _check_ks(ks: Sequence[int], corpus_size: int | None) -> tuple[int, ...]:
    kk = {int(k) for k in ks}
    if corpus_size is not None:
        if int(corpus_size) < 1:
            raise ConfigError(f"corpus_size must be >= 1, got {corpus_size!r}")
        kk.add(int(corpus_size))
    if not kk or min(kk) < 1:
        raise ConfigError(f"ks must be non-empty cutoffs >= 1, got {list(ks)}")
    return tuple(sorted(kk))


def _binary_ndcg(rel: np.ndarray, n_rel: np.ndarray, ks: tuple[int, ...]) -> np.ndarray:
    """nDCG@k [len(ks), Q] for binary relevance ``rel`` [Q, depth] and ``n_rel`` [Q] relevant
    documents per query: :func:`adaptlab.metrics.ranked_values` with ``n_rel`` ideal gains of 1."""
    ideal = (np.arange(max(int(n_rel.max(initial=0)), 1))[None, :] < n_rel[:, None]).astype(np.float64)
    out = np.empty((len(ks), rel.shape[0]))
    for i, k in enumerate(ks):
        out[i] = ranked_values(Measure("ndcg", int(k)), rel, ideal)
    return out


def _curve(
    per_query: np.ndarray,
    ks: tuple[int, ...],
    depth: int,
    full_ranking: bool,
    system: str,
    dataset: str,
    bootstrap: BootstrapConfig,
) -> NDCGCurve:
    if per_query.shape[1] == 0:
        raise ConfigError(f"system {system!r} on {dataset!r}: no query has a relevant document")
    ci = bootstrap_ci(per_query, **bootstrap.kwargs())
    exact = np.array([full_ranking or k <= depth for k in ks], dtype=bool)
    return NDCGCurve(
        system,
        dataset,
        ks,
        np.asarray(ci.point, dtype=np.float64),
        np.asarray(ci.boot_mean),
        np.asarray(ci.ci_low),
        np.asarray(ci.ci_high),
        exact,
        int(depth),
        int(per_query.shape[1]),
        per_query,
    )


def ndcg_curve_from_records(
    records: object,
    ks: Sequence[int] = DEFAULT_NDCG_KS,
    *,
    corpus_size: int | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[BootstrapOptions],
) -> NDCGCurve:
    """The nDCG@k curve of one system's :class:`PerQueryRecords` (binary relevance: gold ids).

    ``corpus_size`` adds ``k = corpus_size``; when the records' depth reaches it, every value
    is exact. Bootstrap settings: one :class:`~adaptlab.stats.BootstrapConfig` (``bootstrap``)
    or the loose ``n_resamples`` (default 1000), ``sample_size`` (default: all queries), ``seed``
    (default 0) and ``confidence`` (default 0.95), not both.
    """
    cfg = resolve_bootstrap(
        "ndcg_curve_from_records", bootstrap, **split_options("ndcg_curve_from_records", options, BootstrapOptions)[0]
    )
    for name in ("topk_ids", "gold_ids"):
        if not hasattr(records, name):
            raise ConfigError(f"expected PerQueryRecords (with .{name}), got {type(records).__name__}")
    kk = _check_ks(ks, corpus_size)
    gold = [set(g) for g in records.gold_ids]  # type: ignore[attr-defined]
    ranked = [list(t) for t, g in zip(records.topk_ids, gold) if g]  # type: ignore[attr-defined]
    golds = [g for g in gold if g]
    depth = max((len(t) for t in ranked), default=0)
    rel = np.zeros((len(ranked), depth))
    for i, (t, g) in enumerate(zip(ranked, golds)):
        rel[i, : len(t)] = [d in g for d in t]
    n_rel = np.array([len(g) for g in golds], dtype=np.int64)
    min_depth = min((len(t) for t in ranked), default=0)
    full = corpus_size is not None and min_depth >= int(corpus_size)
    return _curve(
        _binary_ndcg(rel, n_rel, kk),
        kk,
        min_depth,
        full,
        str(getattr(records, "system", "")),
        str(getattr(records, "dataset", "")),
        cfg,
    )


def ndcg_curve(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    ks: Sequence[int] = DEFAULT_NDCG_KS,
    *,
    corpus_size: int | None = None,
    system: str = "",
    dataset: str = "",
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[BootstrapOptions],
) -> NDCGCurve:
    """The nDCG@k curve of a run with graded ``qrels`` (via :func:`adaptlab.metrics.evaluate`).

    The depth is the shortest ranking among the judged queries; values at larger ``k`` are
    flagged inexact unless that depth reaches ``corpus_size``. Bootstrap settings as in
    :func:`ndcg_curve_from_records`: ``bootstrap`` or the keywords, not both.
    """
    cfg = resolve_bootstrap("ndcg_curve", bootstrap, **split_options("ndcg_curve", options, BootstrapOptions)[0])
    kk = _check_ks(ks, corpus_size)
    pq = evaluate(qrels, run, [f"ndcg@{k}" for k in kk])
    per_query = np.vstack([pq.values[f"ndcg@{k}"] for k in kk]) if pq.n_queries else np.zeros((len(kk), 0))
    min_depth = min((len(run.get(q, {})) for q in pq.query_ids), default=0)
    full = corpus_size is not None and min_depth >= int(corpus_size)
    return _curve(per_query, kk, min_depth, full, system, dataset, cfg)


def ndcg_curves(
    records: Mapping[str, object] | Sequence[object],
    ks: Sequence[int] = DEFAULT_NDCG_KS,
    *,
    corpus_size: int | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[BootstrapOptions],
) -> list[NDCGCurve]:
    """:func:`ndcg_curve_from_records` for several systems (a mapping or a sequence of records),
    all on the same bootstrap settings (``bootstrap`` or the keywords, not both)."""
    cfg = resolve_bootstrap("ndcg_curves", bootstrap, **split_options("ndcg_curves", options, BootstrapOptions)[0])
    items = list(records.values()) if isinstance(records, Mapping) else list(records)
    return [ndcg_curve_from_records(r, ks, corpus_size=corpus_size, bootstrap=cfg) for r in items]
