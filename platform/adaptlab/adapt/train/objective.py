"""The objective of a sweep's trial, and the split of the validation queries it is scored on.

Objective of a trial (maximised): after each epoch the trained model (merged with the base as
``w * theta_ft + (1 - w) * theta_base`` when the trial has a ``merge_weight``) encodes the
validation queries and the validation corpus, and the house's one measuring path scores it:

    records  = adaptlab.retrieval.build_records  (exact inner-product search of the L2-normalised
                                                  embeddings; ties: higher document id first)
    values   = adaptlab.metrics.evaluate         (the chosen measure per query, e.g. acc@5 = 1 if
                                                  a relevant document is in the top 5)
    objective = lower end of the bootstrapped 95% percentile CI of the mean of the values
                (adaptlab.stats.bootstrap_ci with one BootstrapConfig)

(Roychowdhury et al. 2024, section 2.1, bootstrap the accuracy the same way).

Selection and confirmation: the judged validation queries are split once, seeded
(:func:`split_queries`, ``derive_seed(seed, "tune-confirmation")``), into a selection part
(``1 - confirm_fraction``, default half) and a confirmation part
(:data:`~adaptlab.adapt.train.sweep_config.CONFIRM_FRACTION`).
Trials, ASHA and the choice of the best trial and epoch see only the selection part's
``objective``. The largest of several selection lower bounds is optimistic: with equal true
quality the chosen one exceeds the truth far more often than a 95% bound should (the max over
trials of noisy bounds). So the chosen trial's value at its chosen epoch is re-scored on the
confirmation part, questions that took no part in the selection (``confirmed_*`` in
:attr:`SweepResult.best`): that lower bound exceeds the truth at about the nominal rate. Every
row's value and CI come from one epoch (its best by the selection objective), and the best row's
``config/epochs`` is that epoch, so applying the best configuration trains the epochs that won.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from adaptlab.adapt.train.sweep_config import CONFIRM_FRACTION, check_confirm_fraction
from adaptlab.data.dataset import Dataset
from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure, evaluate
from adaptlab.retrieval import PerQueryRecords, build_records
from adaptlab.stats import BootstrapConfig, bootstrap_ci, derive_seed

__all__ = ["epoch_report", "per_query_values", "split_queries", "trial_objective", "validation_records"]


def validation_records(
    model: Any,
    validation: Dataset,
    measure: str | Measure,
    *,
    query_prefix: str = "",
    passage_prefix: str = "",
    batch_size: int = 64,
) -> PerQueryRecords:
    """The per-query records of ``model`` on ``validation``, deep enough for ``measure``.

    The judged queries (``validation.judged_queries()``) and the whole corpus, each text with
    its prefix, are encoded and L2-normalised; :func:`adaptlab.retrieval.build_records` ranks
    the corpus exactly by inner product (score descending, then document id descending, as
    trec_eval) down to the measure's cutoff ``k`` (the whole corpus when it has none).
    """
    m = Measure.parse(measure)
    qids = validation.judged_queries()
    if not qids:
        raise ConfigError(f"validation set {validation.name!r} has no query with a relevant document")
    doc_ids = list(validation.corpus)
    docs = _encode(model, [passage_prefix + validation.corpus[d].full_text() for d in doc_ids], batch_size)
    queries = _encode(model, [query_prefix + validation.queries[q] for q in qids], batch_size)
    depth = len(doc_ids) if m.k is None else min(m.k, len(doc_ids))
    return build_records(
        qids, queries, doc_ids, docs, validation.qrels, system="tune-trial", dataset=validation.name, k=depth
    )


def _encode(model: Any, texts: list[str], batch_size: int) -> np.ndarray:
    """``texts`` encoded by the sentence-transformers ``model``, L2-normalised, as float32."""
    out = model.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(out, dtype=np.float32)


def per_query_values(
    model: Any,
    validation: Dataset,
    measure: str | Measure,
    *,
    query_prefix: str = "",
    passage_prefix: str = "",
    batch_size: int = 64,
) -> np.ndarray:
    """Per-query values of ``measure`` for ``model`` on ``validation``: the records of
    :func:`validation_records` scored by :func:`adaptlab.metrics.evaluate` against the graded
    ``validation.qrels`` (relevance > 0 counts as relevant). Queries without relevant documents
    are left out. Order: ``validation.judged_queries()``."""
    m = Measure.parse(measure)
    records = validation_records(
        model, validation, m, query_prefix=query_prefix, passage_prefix=passage_prefix, batch_size=batch_size
    )
    return evaluate(validation.qrels, records.to_run(), [m], query_ids=records.query_ids).values[str(m)]


def trial_objective(values: np.ndarray, bootstrap: BootstrapConfig, measure: str | None = None) -> dict[str, float]:
    """The trial's report for one epoch from the per-query values ``x_1..x_Q``:

        objective = ci_low = (1 - c)/2 quantile of the bootstrapped means (c = confidence)

    (:func:`adaptlab.stats.bootstrap_ci` with ``bootstrap``; Roychowdhury et al. 2024, section
    2.1), ``ci_high`` the upper end, ``mean`` = ``point`` = ``sum_q x_q / Q``; ``measure`` decides
    the interval (Wilson for acc@k, :func:`adaptlab.stats.intervals.measure_interval`)."""
    res = bootstrap_ci(values, measure=measure, **bootstrap.kwargs())
    low, high = float(res.ci_low), float(res.ci_high)
    mean = float(values.mean())
    return {
        "objective": low,
        "ci_low": low,
        "ci_high": high,
        "mean": mean,
        "point": mean,
        "n_queries": int(values.size),
    }


def split_queries(n_queries: int, confirm_fraction: float = CONFIRM_FRACTION, seed: int = 0) -> np.ndarray:
    """A boolean mask over ``n_queries`` (in ``validation.judged_queries()`` order): ``True`` for
    the selection part, ``False`` for the ``round(confirm_fraction * n)`` confirmation queries
    (at least one of each), drawn by a seeded permutation (``derive_seed(seed, "tune-confirmation")``)."""
    check_confirm_fraction(confirm_fraction)
    if n_queries < 2:
        raise ConfigError(
            f"the sweep's validation set has {n_queries} judged query(ies): expected at least 2 "
            "(one part selects the trial, the other confirms it)"
        )
    n_confirm = min(n_queries - 1, max(1, round(float(confirm_fraction) * n_queries)))
    rng = np.random.default_rng(derive_seed(int(seed), "tune-confirmation"))
    mask = np.ones(n_queries, dtype=bool)
    mask[rng.permutation(n_queries)[:n_confirm]] = False
    return mask


def epoch_report(
    values: np.ndarray, selection: np.ndarray, bootstrap: BootstrapConfig, measure: str | None = None
) -> dict[str, float]:
    """One epoch's report: :func:`trial_objective` of the selection part (``objective``, the
    only value the search sees) and the same CI of the confirmation part (``confirm_*``)."""
    values = np.asarray(values, dtype=np.float64)
    confirm = trial_objective(values[~selection], bootstrap, measure)
    return {
        **trial_objective(values[selection], bootstrap, measure),
        **{f"confirm_{k}": confirm[k] for k in ("ci_low", "ci_high", "mean", "n_queries")},
    }
