"""Ranking metrics against pytrec_eval (trec_eval) and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure, evaluate, parse_measures, rank_documents

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = (1, 3, 5, 10, 20)


def _random_case(seed: int, n_queries: int = 60, n_docs: int = 40):
    """Graded qrels, a run with many exact score ties, some queries missing from the run,
    and some judged queries without any relevant document."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(n_docs)]
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.choice(n_docs, size=rng.integers(1, 8), replace=False)
        rels = rng.integers(0, 4, size=judged.size)  # graded 0..3, some zero-only queries
        qrels[qid] = {docs[j]: int(r) for j, r in zip(judged, rels)}
        if rng.random() < 0.1:
            continue  # missing from the run
        retrieved = rng.choice(n_docs, size=rng.integers(1, 30), replace=False)
        scores = np.round(rng.random(retrieved.size), 1)  # coarse: many ties
        run[qid] = {docs[j]: float(s) for j, s in zip(retrieved, scores)}
    return qrels, run


def _trec(qrels, run):
    names = {
        "recip_rank",
        "map",
        "P." + ",".join(map(str, KS)),
        "recall." + ",".join(map(str, KS)),
        "ndcg_cut." + ",".join(map(str, KS)),
        "map_cut." + ",".join(map(str, KS)),
        "success." + ",".join(map(str, KS)),
    }
    return pytrec_eval.RelevanceEvaluator(qrels, names).evaluate(run)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_pytrec_eval_with_ties_grades_and_missing_queries(seed):
    qrels, run = _random_case(seed)
    ms = [f"{n}@{k}" for n in ("acc", "precision", "recall", "ndcg", "map") for k in KS] + ["mrr", "map"]
    res = evaluate(qrels, run, ms)
    ref = _trec(qrels, run)
    trec_name = {"acc": "success", "precision": "P", "recall": "recall", "ndcg": "ndcg_cut", "map": "map_cut"}
    assert res.missing_from_run, "the case must include judged queries absent from the run"
    assert res.excluded, "the case must include queries without relevant documents"
    checked = 0
    for i, q in enumerate(res.query_ids):
        for m in ms:
            meas = Measure.parse(m)
            got = res.values[str(meas)][i]
            if q not in run:
                assert got == 0.0
                continue
            key = (
                {"mrr": "recip_rank", "map": "map"}[meas.name] if meas.k is None else f"{trec_name[meas.name]}_{meas.k}"
            )
            assert got == pytest.approx(ref[q][key], abs=1e-9), (q, m)
            checked += 1
    assert checked > 500


def test_tie_rule_is_docid_descending():
    assert rank_documents({"a": 1.0, "c": 1.0, "b": 2.0, "d": 0.5}) == ["b", "c", "a", "d"]
    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 0.5, "b": 0.5}}  # tie: b ranks before a
    res = evaluate(qrels, run, "mrr,acc@1,ndcg@2")
    assert res.values["mrr"][0] == 0.5
    assert res.values["acc@1"][0] == 0.0
    assert res.values["ndcg@2"][0] == pytest.approx(1 / math.log2(3))


def test_hand_computed_values():
    qrels = {"q1": {"d1": 2, "d2": 1, "d3": 0}, "q2": {"x": 0}}
    run = {"q1": {"d9": 0.9, "d2": 0.8, "d1": 0.7, "d3": 0.6}}
    res = evaluate(qrels, run, "ndcg@3,recall@2,precision@2,mrr,map@3,acc@1")
    assert res.query_ids == ["q1"] and res.excluded == ["q2"]
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 + 1 / math.log2(3)
    v = {k: float(x[0]) for k, x in res.values.items()}
    assert v["ndcg@3"] == pytest.approx(dcg / idcg)
    assert v["recall@2"] == 0.5 and v["precision@2"] == 0.5 and v["mrr"] == 0.5
    assert v["map@3"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert v["acc@1"] == 0.0


def test_mrr_at_k_cuts_the_ranking():
    qrels = {"q": {"g": 1}}
    run = {"q": {f"d{i}": 1.0 - i / 10 for i in range(5)} | {"g": 0.1}}
    res = evaluate(qrels, run, "mrr@5,mrr@6")
    assert res.values["mrr@5"][0] == 0.0 and res.values["mrr@6"][0] == pytest.approx(1 / 6)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("nDCG@10", "ndcg@10"),
        ("acc@5", "acc@5"),
        ("hits@3", "acc@3"),
        ("MRR", "mrr"),
        ("map@100", "map@100"),
        ("P_10", "precision@10"),
        ("recall@100", "recall@100"),
        ("recip_rank", "mrr"),
    ],
)
def test_measure_parsing(text, expected):
    assert str(Measure.parse(text)) == expected


@pytest.mark.parametrize("bad", ["foo@3", "ndcg@0", "acc", "ndcg@x", ""])
def test_measure_parsing_errors(bad):
    with pytest.raises(ConfigError):
        parse_measures(bad) if bad == "" else Measure.parse(bad)


def test_non_finite_scores_and_runs_without_judged_queries_are_errors():
    import math

    import pytest

    from adaptlab.errors import DataError
    from adaptlab.metrics import evaluate

    qrels = {"q1": {"gold": 1}, "q2": {"g2": 1}}
    with pytest.raises(DataError, match="non-finite"):
        evaluate(qrels, {"q1": {"gold": math.nan, "x": 0.5}}, "acc@1")
    with pytest.raises(DataError, match="non-finite"):
        evaluate(qrels, {"q1": {"gold": 0.1, "x": math.inf}}, "mrr")
    with pytest.raises(DataError, match="empty"):
        evaluate(qrels, {}, "acc@1")
    with pytest.raises(DataError, match="shares no query"):
        evaluate(qrels, {"other": {"gold": 1.0}}, "acc@1")
    res = evaluate(qrels, {"q1": {"gold": 1.0}}, "acc@1")
    assert res.missing_from_run == ["q2"] and res.values["acc@1"].tolist() == [1.0, 0.0]


def test_many_queries_evaluate_in_linear_time():
    import time

    from adaptlab.metrics import evaluate

    n = 20000
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(n)}
    run = {f"q{i}": {f"d{i}": 1.0, "x": 0.5} for i in range(n)}
    t = time.perf_counter()
    res = evaluate(qrels, run, "acc@1", query_ids=list(qrels))
    assert res.n_queries == n and time.perf_counter() - t < 5.0
