"""Per-query ranking metrics with trec_eval's conventions.

Ranking: each query's retrieved documents are sorted by score descending, then by document id
descending (string order), which is trec_eval's tie rule (``form_res_rels``). A document is
relevant when its judged relevance is > 0. With ``rel_i`` the relevance of the document at rank
``i`` (1-based, 0 when unjudged) and ``R`` the number of relevant judged documents:

- ``acc@k`` (hit rate, trec_eval ``success``): ``1[any rel_i > 0 for i <= k]``
- ``precision@k``: ``|{i <= k : rel_i > 0}| / k`` (divides by k even when fewer are retrieved)
- ``recall@k``: ``|{i <= k : rel_i > 0}| / R``
- ``mrr`` / ``mrr@k``: ``1 / min{i : rel_i > 0}`` (0 when no relevant document is ranked, or
  none within k)
- ``ndcg@k``: ``DCG@k / IDCG@k`` with ``DCG@k = sum_{i<=k} rel_i / log2(i + 1)`` (gain =
  graded relevance) and IDCG@k the DCG of all judged documents sorted by relevance, cut at k
  (Jarvelin & Kekalainen 2002; trec_eval ``ndcg_cut``)
- ``map`` / ``map@k``: ``(1/R) sum_{i<=k, rel_i>0} precision@i`` (trec_eval ``map_cut``)
- ``err@k`` (expected reciprocal rank): ``sum_{i<=k} (r_i / i) prod_{j<i} (1 - r_j)`` with the
  stopping probability ``r_i = (2^g_i - 1) / 2^4``, ``g_i = max(rel_i, 0)`` on a 0..4 grade scale
  (Chapelle et al., CIKM 2009; the TREC Web track's gdeval, which ir_measures runs for ``ERR@k``);
  a grade above 4 is a :class:`~adaptlab.errors.DataError`
- ``judged@k``: the fraction of the top ``min(k, n)`` documents that have a judgment (any
  relevance, 0 included), ``n`` the number retrieved (ir_measures ``Judged@k``); 0 when none is
- ``rprec``, ``bpref``, ``infap``: through ir_measures (:mod:`adaptlab.metrics.external`)

Queries without any relevant judged document are excluded (and listed); judged queries absent
from the run score 0 on every measure (trec_eval ``-c``) and are listed in ``missing_from_run``.
A run that is empty or shares no judged query is a :class:`~adaptlab.errors.DataError`, and so
is a non-finite (NaN or infinite) score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adaptlab.errors import DataError
from adaptlab.metrics.external import ir_measures_values
from adaptlab.metrics.measures import Measure, parse_measures

__all__ = ["ERR_MAX_GRADE", "PerQueryMetrics", "evaluate", "rank_documents", "ranked_values"]

ERR_MAX_GRADE = 4
"""The top grade of ERR's relevance scale (gdeval's ``MAX_JUDGMENT``): ``r_i = (2^g - 1) / 2^4``."""


@dataclass
class PerQueryMetrics:
    """Per-query metric values: ``values[str(measure)][i]`` belongs to ``query_ids[i]``."""

    query_ids: list[str]
    values: dict[str, np.ndarray]
    excluded: list[str] = field(default_factory=list)
    missing_from_run: list[str] = field(default_factory=list)

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def mean(self) -> dict[str, float]:
        """The average over the evaluated queries of every measure."""
        return {m: float(v.mean()) if v.size else float("nan") for m, v in self.values.items()}

    def matrix(self, measure: str | Measure) -> np.ndarray:
        return self.values[str(Measure.parse(measure))]


def _check_finite(run: Mapping[str, Mapping[str, float]], query_ids: Sequence[str]) -> None:
    """Reject NaN and infinite scores: they sort arbitrarily (a NaN gold document ranked first)."""
    for q in query_ids:
        scores = run.get(q)
        if not scores:
            continue
        arr = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        if not np.isfinite(arr).all():
            bad = [d for d, v in scores.items() if not np.isfinite(float(v))]
            raise DataError(
                f"query {q!r}: {len(bad)} non-finite score(s) (e.g. document {bad[0]!r} scored "
                f"{scores[bad[0]]}); scores must be finite numbers: fix or drop them before evaluating"
            )


def rank_documents(scores: Mapping[str, float]) -> list[str]:
    """Document ids by score descending, ties by document id descending (trec_eval)."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def _ranked_gains(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    query_ids: Sequence[str],
    depth: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Relevance of the ranked documents [Q, L] (0-padded), R [Q], ideal gains [Q, G], and
    whether each ranked document is judged [Q, L] (int8: 1 judged, 0 not, -1 padding)."""
    ranked: list[list[int]] = []
    seen: list[list[int]] = []
    ideal: list[list[int]] = []
    n_rel = np.zeros(len(query_ids), dtype=np.int64)
    for i, q in enumerate(query_ids):
        judged = qrels[q]
        docs = rank_documents(run.get(q, {}))
        if depth is not None:
            docs = docs[:depth]
        ranked.append([judged.get(d, 0) for d in docs])
        seen.append([int(d in judged) for d in docs])
        gains = sorted((r for r in judged.values() if r > 0), reverse=True)
        ideal.append(gains)
        n_rel[i] = len(gains)
    width = max((len(r) for r in ranked), default=0)
    rel = np.zeros((len(query_ids), max(width, 1)), dtype=np.float64)
    judged_mask = np.full(rel.shape, -1, dtype=np.int8)
    for i, r in enumerate(ranked):
        rel[i, : len(r)] = r
        judged_mask[i, : len(r)] = seen[i]
    gwidth = max((len(g) for g in ideal), default=0)
    ideal_arr = np.zeros((len(query_ids), max(gwidth, 1)), dtype=np.float64)
    for i, g in enumerate(ideal):
        ideal_arr[i, : len(g)] = g
    return rel, n_rel, ideal_arr, judged_mask


def _cut(a: np.ndarray, k: int | None, fill: int = 0) -> np.ndarray:
    """The first k columns, padded with ``fill`` when the array is narrower."""
    if k is None:
        return a
    if a.shape[1] >= k:
        return a[:, :k]
    return np.pad(a, ((0, 0), (0, k - a.shape[1])), constant_values=fill)


def _err(rel: np.ndarray, k: int) -> np.ndarray:
    """ERR@k (module docstring) from ranked graded relevance [Q, L]."""
    grades = _cut(np.maximum(rel, 0.0), k)
    if grades.size and grades.max() > ERR_MAX_GRADE:
        raise DataError(
            f"err@{k}: relevance grade {grades.max():g} is above ERR's scale 0..{ERR_MAX_GRADE} "
            "(gdeval's); map the grades to 0..4 or use ndcg@k"
        )
    stop = (np.exp2(grades) - 1.0) / 2.0**ERR_MAX_GRADE
    reach = np.cumprod(np.hstack([np.ones((stop.shape[0], 1)), 1.0 - stop[:, :-1]]), axis=1)
    return (stop * reach / np.arange(1, stop.shape[1] + 1)).sum(axis=1)


def _judged(judged_mask: np.ndarray, k: int) -> np.ndarray:
    """Judged@k (module docstring) from the judged mask [Q, L] (1 judged, 0 not, -1 padding)."""
    top = _cut(judged_mask, k, fill=-1)
    shown = (top >= 0).sum(axis=1)
    return np.divide((top == 1).sum(axis=1), shown, out=np.zeros(top.shape[0]), where=shown > 0)


def _measure_kernel(
    m: Measure, rel: np.ndarray, n_rel: np.ndarray, ideal: np.ndarray, judged_mask: np.ndarray | None = None
) -> np.ndarray:
    """Vectorised per-query values of one measure from the ranked relevance matrix."""
    if m.name == "err":
        return _err(rel, m.k)  # type: ignore[arg-type]
    if m.name == "judged":
        if judged_mask is None:
            raise ValueError(f"{m} needs to know which documents are judged; use evaluate(qrels, run, ...)")
        return _judged(judged_mask, m.k)  # type: ignore[arg-type]
    hit = rel > 0
    hk = _cut(hit, m.k)
    if m.name == "acc":
        return np.asarray(hk.any(axis=1), dtype=np.float64)
    if m.name == "precision":
        return hk.sum(axis=1) / float(m.k)  # type: ignore[arg-type]
    if m.name == "recall":
        return hk.sum(axis=1) / n_rel
    if m.name == "mrr":
        first = np.where(hk.any(axis=1), hk.argmax(axis=1) + 1, 0)
        return np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)
    if m.name == "ndcg":
        gains = _cut(rel, m.k)
        disc = 1.0 / np.log2(np.arange(2, gains.shape[1] + 2))
        dcg = (np.where(gains > 0, gains, 0.0) * disc).sum(axis=1)
        ig = _cut(ideal, m.k)
        idisc = 1.0 / np.log2(np.arange(2, ig.shape[1] + 2))
        idcg = (ig * idisc).sum(axis=1)
        return np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)
    if m.name == "map":
        cum = np.cumsum(hk, axis=1)
        prec_at_i = cum / np.arange(1, hk.shape[1] + 1)
        return (prec_at_i * hk).sum(axis=1) / n_rel
    raise ValueError(f"no kernel for measure {m}")  # unreachable: Measure validates names


def ranked_values(measure: str | Measure, relevance: np.ndarray, ideal_gains: np.ndarray) -> np.ndarray:
    """Per-query values of ``measure`` from already ranked relevance (the formulas of the module
    docstring, trec_eval's conventions).

    ``relevance`` [Q, L]: the judged relevance of the documents at ranks 1..L of each query
    (0 for an unjudged or irrelevant document, and as padding after a short ranking).
    ``ideal_gains`` [Q, G]: each query's relevant gains (> 0) sorted descending, 0-padded; their
    count is ``R`` and they make IDCG@k. Returns float64 [Q]. For binary relevance ``ideal_gains``
    is ``R`` ones per row.
    """
    m = Measure.parse(measure)
    if m.ir_measures_name is not None:
        raise ValueError(
            f"{m} is computed through ir_measures from the qrels and the run; use evaluate(qrels, run, ...)"
        )
    rel = np.asarray(relevance, dtype=np.float64)
    ideal = np.asarray(ideal_gains, dtype=np.float64)
    if rel.ndim != 2 or ideal.ndim != 2 or rel.shape[0] != ideal.shape[0]:
        raise ValueError(
            f"relevance [Q, L] and ideal_gains [Q, G] must be 2-D with the same Q, got shapes "
            f"{rel.shape} and {ideal.shape}"
        )
    n_rel = (ideal > 0).sum(axis=1)
    return _measure_kernel(m, rel, n_rel, ideal)


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    measures: str | Iterable[str | Measure],
    *,
    query_ids: Sequence[str] | None = None,
) -> PerQueryMetrics:
    """Per-query values of ``measures`` for ``run`` against ``qrels``.

    ``query_ids`` restricts and orders the evaluated queries (default: the judged queries of
    ``qrels`` in their order). Queries without a relevant document are excluded and listed in
    ``excluded``; judged queries that the run lacks score 0 and are listed in
    ``missing_from_run``.
    """
    ms = parse_measures(measures)
    candidates = list(qrels) if query_ids is None else list(query_ids)
    keep = [q for q in candidates if any(r > 0 for r in qrels.get(q, {}).values())]
    keep_set = set(keep)  # once: a set per query made this quadratic
    excluded = [q for q in candidates if q not in keep_set]
    missing = [q for q in keep if q not in run or not run[q]]
    if keep and len(missing) == len(keep):
        raise DataError(
            "the run is empty"
            if not any(run.values())
            else f"the run shares no query with the {len(keep)} judged queries (first run query ids: "
            f"{', '.join(list(run)[:3])}; first judged: {', '.join(keep[:3])}); check that it belongs to this "
            "dataset and uses the same query ids"
        )
    _check_finite(run, keep)
    return PerQueryMetrics(keep, _values(qrels, run, keep, ms), excluded, missing)


def _values(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    keep: Sequence[str],
    ms: Sequence[Measure],
) -> dict[str, np.ndarray]:
    """Per-query values of ``ms`` on the queries ``keep``: ours from the ranked relevance matrix
    (read to the deepest cutoff), the others through ir_measures; in the order of ``ms``."""
    ours = [m for m in ms if m.ir_measures_name is None]
    values = ir_measures_values(qrels, run, keep, [m for m in ms if m.ir_measures_name is not None])
    if ours:
        depth = None if any(m.k is None for m in ours) else max(m.k for m in ours if m.k is not None)
        rel, n_rel, ideal, judged_mask = _ranked_gains(qrels, run, keep, depth)
        values.update({str(m): _measure_kernel(m, rel, n_rel, ideal, judged_mask) for m in ours})
    return {str(m): values[str(m)] for m in ms}
