import numpy as np
import pytest

from adaptlab.analysis import DEFAULT_NDCG_KS, ndcg_curve, ndcg_curve_from_records, ndcg_curves
from adaptlab.errors import ConfigError


def test_records_curve_matches_pytrec_eval(make_records):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rec = make_records("m", k=30, n_unjudged=3, seed=4)
    c = ndcg_curve_from_records(rec, (1, 5, 10, 20, 30, 80), n_resamples=50)
    qrels = {q: {g[0]: 1} for q, g in zip(rec.query_ids, rec.gold_ids) if g}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,5,10,20,30,80"})
    res = ev.evaluate({q: r for q, r in rec.to_run().items() if q in qrels})
    for i, k in enumerate(c.ks):
        ref = np.mean([res[q][f"ndcg_cut_{k}"] for q in qrels])
        assert c.values[i] == pytest.approx(ref, abs=1e-9)
    assert c.n_queries == len(qrels) and c.depth == 30
    np.testing.assert_array_equal(c.exact, [True] * 5 + [False])  # k = 80 > depth: a lower bound
    assert np.all(c.ci_low <= c.boot_mean + 1e-12) and np.all(c.boot_mean <= c.ci_high + 1e-12)


def test_corpus_size_point_is_exact_when_everything_is_ranked(make_records):
    rec = make_records("m", n_docs=40, k=40, seed=5)
    c = ndcg_curve_from_records(rec, corpus_size=40, n_resamples=20)
    assert 40 in c.ks and c.exact.all()
    assert c.values[-1] == pytest.approx(np.mean(1 / np.log2(rec.gold_rank + 1)))  # one gold doc, always ranked
    curves = ndcg_curves({"a": rec, "b": rec}, (1, 5), n_resamples=10)
    assert len(curves) == 2 and curves[0].ks == (1, 5)


def test_graded_curve_matches_pytrec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}, "q3": {"x": 0}}
    run = {"q1": {"a": 0.9, "b": 0.5, "c": 0.7}, "q2": {"a": 0.3, "c": 0.2}, "q3": {"x": 1.0}}
    c = ndcg_curve(qrels, run, (1, 2, 3), n_resamples=10, system="s")
    judged = {q: v for q, v in qrels.items() if q != "q3"}
    res = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.1,2,3"}).evaluate(run)
    for i, k in enumerate(c.ks):
        assert c.values[i] == pytest.approx(np.mean([res[q][f"ndcg_cut_{k}"] for q in ("q1", "q2")]))
    assert c.n_queries == 2 and c.depth == 2 and list(c.exact) == [True, True, False]


def test_errors(make_records):
    rec = make_records("m")
    with pytest.raises(ConfigError, match="ks"):
        ndcg_curve_from_records(rec, (0, 5))
    with pytest.raises(ConfigError, match="corpus_size"):
        ndcg_curve_from_records(rec, DEFAULT_NDCG_KS, corpus_size=0)
    with pytest.raises(ConfigError, match="PerQueryRecords"):
        ndcg_curve_from_records(object())
