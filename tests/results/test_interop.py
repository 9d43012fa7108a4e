"""Interop (issue 20): MTEB measure names, MTEB TaskResult JSON out and in, ranx run/qrels JSON
and DataFrames in and out, and one MLflow run per stored run in a local tracking store."""

from __future__ import annotations

import pytest

from adaptlab.errors import ConfigError
from adaptlab.metrics.measures import Measure
from adaptlab.results.validate import canonical_measure


@pytest.mark.parametrize(("mteb", "ours"), [
    ("ndcg_at_10", "ndcg@10"), ("NDCG_AT_10", "ndcg@10"), ("recall_at_100", "recall@100"),
    ("mrr_at_10", "mrr@10"), ("map_at_1000", "map@1000"), ("precision_at_5", "precision@5"),
    ("hit_rate_at_10", "acc@10"),
])
def test_mteb_measure_names_parse(mteb: str, ours: str) -> None:
    assert str(Measure.parse(mteb)) == ours
    assert canonical_measure(mteb) == ours


def test_main_score_is_refused_with_its_meaning() -> None:
    with pytest.raises(ConfigError, match="main_score.*per-task.*ndcg@10"):
        Measure.parse("main_score")
    with pytest.raises(ConfigError, match="unknown measure 'foo_at'"):
        Measure.parse("foo_at_10")
