"""``adaptlab.evaluate``: score one run against qrels from whatever a notebook holds.

``qrels`` and ``run`` may each be:

- a nested mapping (pytrec_eval / ranx dicts): ``{query_id: {doc_id: relevance or score}}``;
- a pandas DataFrame in long format, one row per (query, document), with the column names of
  ir_measures (``query_id``, ``doc_id``, ``relevance`` / ``score``), ranx (``q_id``,
  ``doc_id``, ``score``) or plain ``query``, ``doc``;
- the path of a TREC file (``qid iter docid rel`` / ``qid Q0 docid rank score tag``).

The result is the per-query values (a :class:`~adaptlab.metrics.PerQueryMetrics`, so every
function that took ``metrics.evaluate``'s result still does) with ``.frame()`` (one row per
query) and ``.summary`` (the bootstrap CI of each measure, as ``adaptlab evaluate`` prints it).
With ``groups=`` (query labels) ``.group_summaries`` holds the same per group
(:mod:`adaptlab.evaluation.groups`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adaptlab.data.trec import read_trec_qrels, read_trec_run
from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation.groups import GroupedSummary, check_group_column, summarise_groups
from adaptlab.evaluation.summary import EvaluationSummary, summarise
from adaptlab.metrics import Measure, PerQueryMetrics
from adaptlab.metrics import evaluate as per_query_values
from adaptlab.stats.settings import resolve_bootstrap
from adaptlab.storage.names import check_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Evaluation", "evaluate"]

QUERY_COLUMNS = ("query_id", "q_id", "qid", "query")
DOC_COLUMNS = ("doc_id", "docid", "did", "doc")
RUN_VALUE_COLUMNS = ("score", "sim", "similarity")
QRELS_VALUE_COLUMNS = ("relevance", "rel", "score", "label")
"""Accepted DataFrame column names, first match wins (ir_measures, ranx, trec_eval names)."""
BOOTSTRAP_KEYWORDS = frozenset(
    {"boot", "n_resamples", "sample_size", "seed", "confidence", "allow_oversampling", "interval", "adjustment"}
)
"""The keywords of :func:`~adaptlab.evaluation.summarise` that :func:`evaluate` passes on."""


class Evaluation(PerQueryMetrics):
    """Per-query values of one run (``values[measure][i]`` belongs to ``query_ids[i]``) with
    its summary: ``summary`` bootstraps on first use with the settings given to :func:`evaluate`."""

    def __init__(
        self,
        per_query: PerQueryMetrics,
        system: str,
        bootstrap: Mapping[str, Any],
        groups: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(per_query.query_ids, per_query.values, per_query.excluded, per_query.missing_from_run)
        self.system = system
        self.groups = dict(groups or {})
        self._bootstrap = dict(bootstrap)
        self._summary: EvaluationSummary | None = None
        self._groups: dict[str, GroupedSummary] | None = None

    def __repr__(self) -> str:
        means = ", ".join(f"{m}={v:.4f}" for m, v in self.mean().items())
        return f"Evaluation({self.system!r}: {self.n_queries} queries, {means})"

    @property
    def summary(self) -> EvaluationSummary:
        """Value, CI and rank of each measure (``summary.systems[system][measure]``)."""
        if self._summary is None:
            plain = PerQueryMetrics(self.query_ids, self.values, self.excluded, self.missing_from_run)
            self._summary = summarise({self.system: plain}, workers="local", **self._bootstrap)
        return self._summary

    @property
    def group_summaries(self) -> dict[str, GroupedSummary]:
        """``{column: GroupedSummary}``: value and CI of each measure per group of each grouping
        column given as ``groups=`` (empty without), computed on first use."""
        if self._groups is None:
            plain = {self.system: PerQueryMetrics(self.query_ids, self.values, self.excluded, self.missing_from_run)}
            self._groups = {
                c: summarise_groups(plain, labels, column=c, workers="local", **self._bootstrap)
                for c, labels in self.groups.items()
            }
        return self._groups

    def frame(self) -> pd.DataFrame:
        """One row per evaluated query (index ``query_id``), one column per measure."""
        import pandas as pd

        return pd.DataFrame(dict(self.values), index=pd.Index(self.query_ids, name="query_id"))

    def summary_frame(self) -> pd.DataFrame:
        """One row per measure: ``value``, ``ci_low``, ``ci_high`` (floats) of the summary."""
        import pandas as pd

        per = self.summary.systems[self.system]
        rows = {m: {"value": r.value, "ci_low": r.ci_low, "ci_high": r.ci_high} for m, r in per.items()}
        return pd.DataFrame.from_dict(rows, orient="index").rename_axis("measure")


def _column(frame: Any, names: Sequence[str], what: str, role: str) -> str:
    cols = [str(c) for c in frame.columns]
    found = next((n for n in names if n in cols), None)
    if found is None:
        raise DataError(
            f"{what} DataFrame: no {role} column; expected one of {', '.join(names)} (columns: {', '.join(cols[:8])})"
        )
    return found


def _from_frame(frame: Any, what: str, values: Sequence[str], cast: type) -> dict[str, dict[str, Any]]:
    """``{query: {doc: value}}`` from a long DataFrame; a (query, doc) listed twice is an error."""
    q, d, v = (
        _column(frame, QUERY_COLUMNS, what, "query id"),
        _column(frame, DOC_COLUMNS, what, "document id"),
        _column(frame, values, what, "value"),
    )
    out: dict[str, dict[str, Any]] = {}
    for qid, did, val in zip(frame[q].astype(str), frame[d].astype(str), frame[v]):
        docs = out.setdefault(qid, {})
        if did in docs:
            raise DataError(f"{what} DataFrame: query {qid!r}, document {did!r} appears twice; keep one row each")
        try:
            docs[did] = cast(val)
        except (TypeError, ValueError) as e:
            raise DataError(
                f"{what} DataFrame: {v} of query {qid!r}, document {did!r} is {val!r}, expected a number"
            ) from e
    return out


def _as_mapping(data: Any, what: str) -> Mapping[str, Mapping[str, Any]]:
    """A nested mapping from a mapping, a DataFrame or a TREC file path."""
    if isinstance(data, (str, os.PathLike)):
        return read_trec_qrels(data) if what == "qrels" else read_trec_run(data)
    if isinstance(data, Mapping):
        return data
    if hasattr(data, "columns") and hasattr(data, "__getitem__"):
        return _from_frame(
            data, what, QRELS_VALUE_COLUMNS if what == "qrels" else RUN_VALUE_COLUMNS, int if what == "qrels" else float
        )
    raise DataError(
        f"{what}: expected a {{query: {{doc: value}}}} mapping, a pandas DataFrame or a TREC file "
        f"path, got {type(data).__name__}"
    )


def evaluate(
    qrels: Any,
    run: Any,
    measures: str | Iterable[str | Measure] = "ndcg@10",
    *,
    query_ids: Sequence[str] | None = None,
    system: str = "run",
    groups: Mapping[str, Any] | None = None,
    **bootstrap: Any,
) -> Evaluation:
    """Per-query values of ``measures`` for ``run`` against ``qrels``, with the summary on ``.summary``.

    Parameters
    ----------
    qrels : mapping, DataFrame or path
        ``{query_id: {doc_id: relevance}}``, a long DataFrame or a TREC qrels file (module doc).
    run : mapping, DataFrame or path
        ``{query_id: {doc_id: score}}``, a long DataFrame or a TREC run file; ranked by score
        descending, ties by document id descending (trec_eval).
    measures : str or iterable
        Canonical names such as ``"ndcg@10"``, ``"mrr"``, ``"acc@5"`` (docs/metrics.md).
    query_ids : sequence of str, optional
        Restricts and orders the queries (default: the judged ones of ``qrels``). Queries
        without a relevant document are excluded (``.excluded``); judged queries the run lacks
        score 0 (``.missing_from_run``).
    system : str
        The run's name in ``.summary``.
    groups : mapping, optional
        Query labels for per-group results: ``{query_id: group}`` (the column is named
        ``group``) or ``{column: {query_id: group}}`` for several grouping columns. Each
        column's :class:`~adaptlab.evaluation.groups.GroupedSummary` is in
        ``.group_summaries[column]``: every measure's value and CI on each group's queries.
    **bootstrap
        The keywords of :func:`adaptlab.evaluation.summarise` used by ``.summary``: ``boot=``
        (a :class:`~adaptlab.stats.BootstrapConfig`) or ``n_resamples``, ``seed``,
        ``confidence``, ..., not both (checked here).

    Returns
    -------
    Evaluation
        ``values[measure][i]`` belongs to ``query_ids[i]``; ``mean()``, ``frame()`` and
        ``summary`` (value, bootstrap CI and rank of each measure).

    Examples
    --------
    >>> qrels = {"q1": {"d1": 1}, "q2": {"d3": 1}, "q3": {"d5": 1}}
    >>> run = {"q1": {"d1": 0.9, "d2": 0.5}, "q2": {"d4": 0.8, "d3": 0.7}, "q3": {"d6": 0.3}}
    >>> ev = evaluate(qrels, run, ["mrr", "ndcg@10"], n_resamples=200)
    >>> ev.query_ids, ev.values["mrr"].tolist()
    (['q1', 'q2', 'q3'], [1.0, 0.5, 0.0])
    >>> round(ev.mean()["ndcg@10"], 4)  # (1 + 1/log2(3) + 0) / 3
    0.5436
    >>> cell = ev.summary.systems["run"]["mrr"]
    >>> bool(cell.ci_low <= cell.value == 0.5 <= cell.ci_high)
    True
    """
    system = check_name(system, "evaluate(): system")
    unknown = sorted(set(bootstrap) - BOOTSTRAP_KEYWORDS)
    if unknown:
        raise ConfigError(
            f"evaluate(): unknown keyword(s) {', '.join(unknown)}; the bootstrap keywords are "
            f"{', '.join(sorted(BOOTSTRAP_KEYWORDS))}"
        )
    boot = resolve_bootstrap("evaluate", bootstrap.pop("boot", None), config_key="boot", **bootstrap)
    per_query = per_query_values(_as_mapping(qrels, "qrels"), _as_mapping(run, "run"), measures, query_ids=query_ids)
    return Evaluation(per_query, system, {"boot": boot}, _group_labels(groups))


def _group_labels(groups: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """``groups=`` as ``{column: {query_id: value}}`` (a flat mapping is the column ``group``)."""
    if not groups:
        return {}
    if all(isinstance(v, Mapping) for v in groups.values()):
        return {
            check_group_column(c, "evaluate(): groups"): {str(q): str(v) for q, v in labels.items()}
            for c, labels in groups.items()
        }
    if any(isinstance(v, Mapping) for v in groups.values()):
        raise ConfigError("evaluate(): groups: give {query_id: group} or {column: {query_id: group}}, not a mix")
    return {"group": {str(q): str(v) for q, v in groups.items()}}
