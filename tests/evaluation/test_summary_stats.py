import json
import warnings

import numpy as np
import pytest
import scipy.stats as ss

from adaptlab.analysis.evaluation_table import format_pairs, format_summary
from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation import summarise
from adaptlab.evaluation.summary import SmallSampleWarning, summarise_runs
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import paired_bootstrap


def _pq(values: dict[str, np.ndarray], missing=()):
    q = len(next(iter(values.values())))
    return PerQueryMetrics(
        [f"q{i}" for i in range(q)],
        {m: np.asarray(v, float) for m, v in values.items()},
        missing_from_run=list(missing),
    )


def _systems(q=60, seed=0):
    rng = np.random.default_rng(seed)
    base = (rng.random(q) < 0.5).astype(float)
    return {
        "a": _pq({"acc@5": base, "mrr": base * 0.5}),
        "b": _pq({"acc@5": np.maximum(base, rng.random(q) < 0.3), "mrr": base * 0.6}),
        "c": _pq({"acc@5": (rng.random(q) < 0.5).astype(float), "mrr": base * 0.4}),
    }


def test_holm_adjustment_within_each_measure_and_raw_p_unchanged():
    per = _systems()
    s = summarise(per, n_resamples=400, seed=1)
    assert s.adjustment == "holm"
    for m in ("acc@5", "mrr"):
        fam = [p for p in s.pairs if p.measure == m]
        assert len(fam) == 3 and all(p.family_size == 3 for p in fam)
        raw = np.array([p.p_value for p in fam])
        order = np.argsort(raw, kind="stable")
        expect = np.maximum.accumulate(np.minimum(1, (3 - np.arange(3)) * raw[order]))
        np.testing.assert_allclose(np.array([p.p_adjusted for p in fam])[order], expect)
    # the raw p-values are today's numbers
    vals = np.stack([per[n].values["acc@5"] for n in "abc"])
    ref = paired_bootstrap(vals, names=list("abc"), n_resamples=400, seed=1)
    assert [p.p_value for p in s.pairs if p.measure == "acc@5"] == [d.p_value for d in ref]
    bh = summarise(per, n_resamples=400, seed=1, adjustment="bh")
    fam = [p for p in bh.pairs if p.measure == "mrr"]
    np.testing.assert_allclose([p.p_adjusted for p in fam], ss.false_discovery_control([p.p_value for p in fam]))


def test_rows_store_adjusted_p_family_size_confidence_and_missing():
    per = _systems()
    per["b"].missing_from_run.extend(["q1", "q2"])
    s = summarise(per, n_resamples=200, seed=0, confidence=0.9)
    rows = s.metric_rows({"a": "ra", "b": "rb", "c": "rc"}, "d")
    pair = [r for r in rows if r["compared_to"]]
    assert all(r["p_adjusted"] >= r["p_value"] and r["family_size"] == 3 and r["adjustment"] == "holm" for r in pair)
    assert all(r["confidence"] == 0.9 for r in rows)
    single = {r["system"]: r for r in rows if not r["compared_to"] and r["measure"] == "acc@5"}
    assert single["b"]["missing_from_run"] == 2 and single["a"]["missing_from_run"] == 0
    assert single["a"]["interval_method"] == "wilson"  # the default "auto" on a 0/1 measure
    assert all(r["interval_method"] == "studentized" for r in rows if r["measure"] != "acc@5" or r["compared_to"])
    text = format_summary(s)
    assert "90% CI" in text and "95% CI" not in text and "b 2" in text
    pairs = format_pairs(s)
    assert "p adj (n)" in pairs and "(3)" in pairs and "Holm" in pairs
    assert json.dumps(s.to_json())  # serialisable


def test_small_samples_get_exact_tests_and_a_warning():
    per = {"a": _pq({"acc@1": [1, 1, 1]}), "b": _pq({"acc@1": [0, 0, 0]})}
    with pytest.warns(SmallSampleWarning, match="exact sign test"):
        s = summarise(per, n_resamples=999, seed=0)
    p = s.pairs[0]
    assert p.p_value == 0.25 and p.test == "sign-flip-exact"  # the randomization test at small Q, exact here
    assert p.p_exact == pytest.approx(0.25) and p.p_wilcoxon == pytest.approx(0.25)
    row = [r for r in s.metric_rows({"a": "1", "b": "2"}, "d") if r["compared_to"]][0]
    assert row["p_exact"] == pytest.approx(0.25) and row["exact_test"] == "sign"
    assert "p sign" in format_pairs(s) and "warning" in format_summary(s)
    big = _systems(q=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSampleWarning)
        s = summarise(big, n_resamples=100)
    assert all(p.p_exact is None for p in s.pairs)


def test_oversampling_rejected_before_any_work():
    per = _systems(q=50)
    with pytest.raises(ConfigError, match="sample_size=100 exceeds the 50 queries.*paper setting"):
        summarise(per, n_resamples=500, sample_size=100)
    s = summarise(per, n_resamples=50, sample_size=100, allow_oversampling=True)
    assert s.sample_size == 100


def test_bootstrap_p_prints_as_a_bound():
    q = 200
    # graded differences on 100 queries: no exact count, so 999 random sign vectors, none reaching
    # the observed sum: p = 1/1000, at its floor 1/(N+1), printed as the bound "<= 0.001"
    graded = 1.0 / np.log2(np.arange(q // 2) % 9 + 3.0)
    per = {"a": _pq({"ndcg@10": np.ones(q)}), "b": _pq({"ndcg@10": np.r_[graded, np.ones(q // 2)]})}
    s = summarise(per, n_resamples=999, seed=0)
    assert s.pairs[0].test == "sign-flip" and s.pairs[0].p_draws == 999 and s.pairs[0].p_value == 1 / 1000
    assert s.pairs[0].p_bound and s.pairs[0].p_text == "<= 0.001"
    assert "<= 0.001 " in format_pairs(s) and "999 random sign vectors" in format_pairs(s)
    assert s.to_json()["pairs"][0]["p_text"] == "<= 0.001" and s.to_json()["pairs"][0]["p_bound"] is True


def test_summarise_runs_empty_run_is_an_error():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    with pytest.raises(DataError, match="run is empty"):
        summarise_runs(qrels, {"a": {}, "b": {"q1": {"d1": 1.0}}}, "acc@1", n_resamples=10)


def test_rank_intervals_and_tied_with_best_group():
    from adaptlab.stats import resample_indices

    rng = np.random.default_rng(5)
    q = 300
    vals = {"weak": (rng.random(q) < 0.3), "good": (rng.random(q) < 0.7), "good2": (rng.random(q) < 0.71)}
    per = {n: _pq({"acc@5": v.astype(float)}) for n, v in vals.items()}
    s = summarise(per, n_resamples=400, seed=2)
    acc = {n: s.systems[n]["acc@5"] for n in vals}
    assert acc["weak"].rank == 3 and (acc["weak"].rank_low, acc["weak"].rank_high) == (3, 3)
    assert acc["good"].tied_with_best and acc["good2"].tied_with_best and not acc["weak"].tied_with_best
    # by hand from the shared resamples
    idx = resample_indices(q, n_resamples=400, seed=2)
    means = np.stack([per[n].values["acc@5"][idx].mean(axis=1) for n in vals], axis=1)
    ranks = 1 + (means[:, None, :] > means[:, :, None]).sum(axis=2)
    lo = np.quantile(ranks, 0.025, axis=0, method="inverted_cdf")
    hi = np.quantile(ranks, 0.975, axis=0, method="inverted_cdf")
    assert [acc[n].rank_low for n in vals] == lo.tolist() and [acc[n].rank_high for n in vals] == hi.tolist()
    rows = {r["system"]: r for r in s.metric_rows({n: n for n in vals}, "d") if not r["compared_to"]}
    assert rows["weak"]["rank_low"] == 3 and rows["good"]["rank_low"] == 1
    assert "rank [interval]" in format_summary(s) and "*" in format_summary(s)


def test_explicit_pairs_form_the_family_of_each_measure():
    per = _systems()
    s = summarise(per, n_resamples=300, seed=2, pairs=[("b", "a"), ("c", "b")])
    for m in ("acc@5", "mrr"):
        fam = [p for p in s.pairs if p.measure == m]
        assert [(p.a, p.b) for p in fam] == [("b", "a"), ("c", "b")]
        assert all(p.family_size == 2 for p in fam)
    ref = summarise(per, n_resamples=300, seed=2, baseline="a")
    assert [p.p_value for p in s.pairs if (p.a, p.b) == ("b", "a")] == [
        p.p_value for p in ref.pairs if (p.a, p.b) == ("b", "a")
    ]
    with pytest.raises(ConfigError, match="'z' is not among the systems"):
        summarise(per, n_resamples=50, pairs=[("z", "a")])
    with pytest.raises(ConfigError, match="either baseline= or pairs="):
        summarise(per, n_resamples=50, baseline="a", pairs=[("b", "a")])
