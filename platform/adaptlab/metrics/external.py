"""Measures computed through ir_measures: R-precision, bpref and infAP.

ir_measures (MacAvaney et al., ECIR 2022) evaluates them with its pytrec_eval provider, i.e.
trec_eval's own code, so the tie rule (score descending, then document id descending) and the
relevance level (judged relevance >= 1) are the ones of every other adaptlab measure. With ``R``
the number of relevant judged documents of a query and ``N`` the number of documents judged
non-relevant (relevance 0):

- ``rprec`` (R-Prec): precision at rank ``R``, ``|{i <= R : rel_i > 0}| / R`` (trec_eval ``Rprec``).
- ``bpref``: ``(1/R) sum_{relevant retrieved r} (1 - min(n_r, R) / min(R, N))`` with ``n_r`` the
  judged non-relevant documents ranked above ``r`` (the term is 1 when ``N = 0``); unjudged documents
  are ignored (Buckley & Voorhees, SIGIR 2004; trec_eval ``bpref``).
- ``infap``: inferred average precision, an estimate of AP when the judgments are a uniform random
  sample of the pool; documents judged ``-1`` are pooled but unjudged (Yilmaz & Aslam, CIKM 2006;
  trec_eval ``infAP``). With complete judgments it equals AP up to trec_eval's smoothing
  constant (~1e-6).

The caller (:func:`adaptlab.metrics.evaluate`) decides which queries count; a query absent from
the run scores 0 here as everywhere (trec_eval ``-c``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.metrics.measures import Measure

__all__ = ["ir_measures_values"]

_INSTALL = "pip install 'ir-measures>=0.4'"


def _ir_measures(measures: Sequence[Measure]) -> Any:
    """The ir_measures module, or one line naming the package and the measures that need it."""
    try:
        import ir_measures
    except ImportError as e:
        names = ", ".join(str(m) for m in measures)
        raise ConfigError(
            f"measure(s) {names} are computed through ir_measures, which is not installed: {_INSTALL}"
        ) from e
    return ir_measures


def ir_measures_values(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    query_ids: Sequence[str],
    measures: Sequence[Measure],
) -> dict[str, np.ndarray]:
    """Per-query values (float64, in ``query_ids`` order) of ``measures`` (each with an
    ``ir_measures_name``), keyed by the canonical measure string; 0 for a query not in ``run``."""
    if not measures:
        return {}
    irm = _ir_measures(measures)
    parsed = {irm.parse_measure(str(m.ir_measures_name)): str(m) for m in measures}
    judged = {q: {str(d): int(r) for d, r in qrels[q].items()} for q in query_ids}
    ranked = {q: {str(d): float(s) for d, s in run[q].items()} for q in query_ids if run.get(q)}
    out = {name: np.zeros(len(query_ids), dtype=np.float64) for name in parsed.values()}
    if not ranked:
        return out
    position = {q: i for i, q in enumerate(query_ids)}
    evaluator = irm.pytrec_eval.evaluator(list(parsed), judged)
    for metric in evaluator.iter_calc(ranked):
        out[parsed[metric.measure]][position[metric.query_id]] = float(metric.value)
    return out
