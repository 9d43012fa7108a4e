"""BCa against scipy on binary, tied and continuous data (same resamples), and the "auto" default
interval: Wilson for 0/1 measures, unchanged percentile numbers for the others (issue 23)."""

import warnings

import numpy as np
import pytest
import scipy.stats as ss

from adaptlab.evaluation.summary import SampleSizeWarning, summarise
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import bootstrap_ci
from adaptlab.stats.intervals import FewOutcomesWarning, bca_interval, few_outcomes, measure_interval, resolve_interval
from adaptlab.stats.settings import sample_size_note


def _scipy_bca_same_resamples(x: np.ndarray, m: int, seed: int, conf: float) -> tuple[np.ndarray, tuple[float, float]]:
    """scipy's own resampled means of ``x`` and its BCa interval computed on exactly them."""
    perc = ss.bootstrap((x,), np.mean, n_resamples=m, method="percentile", rng=np.random.default_rng(seed))
    bca = ss.bootstrap((x,), np.mean, n_resamples=0, method="BCa", confidence_level=conf, bootstrap_result=perc)
    return perc.bootstrap_distribution, (float(bca.confidence_interval.low), float(bca.confidence_interval.high))


DATA = {
    "binary 27/30 (the issue's case)": np.r_[np.ones(27), np.zeros(3)],
    "binary 0.95 of 100": (np.random.default_rng(5).random(100) < 0.95).astype(float),
    "tied (reciprocal ranks)": 1.0 / np.random.default_rng(6).integers(1, 4, 40),
    "continuous": np.random.default_rng(7).exponential(size=60),
}


@pytest.mark.parametrize("name", list(DATA))
@pytest.mark.parametrize("conf", [0.95, 0.9])
def test_bca_equals_scipy_on_scipys_resamples(name: str, conf: float) -> None:
    x = DATA[name]
    dist, ref = _scipy_bca_same_resamples(x, 999, seed=11, conf=conf)
    assert bca_interval(x, dist, conf) == pytest.approx(ref, abs=1e-12)


def test_bca_tie_rule_moves_the_binary_interval_as_the_issue_reports() -> None:
    x = DATA["binary 27/30 (the issue's case)"]
    dist, ref = _scipy_bca_same_resamples(x, 999, seed=0, conf=0.95)
    assert np.mean(dist == x.mean()) > 0.15  # many resamples tie with the estimate
    assert ref[0] == pytest.approx(0.7333, abs=1e-4) and bca_interval(x, dist, 0.95) == pytest.approx(ref)


def test_measure_interval_rules() -> None:
    """The interval is a property of the measure's definition and the settings, not of values."""
    assert measure_interval("auto", "acc@5", n_queries=3, sample_size=3) == "wilson"
    assert measure_interval("auto", "hits@5", n_queries=3, sample_size=3) == "wilson"
    assert measure_interval("auto", "success@1", n_queries=3, sample_size=3) == "wilson"
    assert measure_interval("auto", "acc@5", n_queries=3, sample_size=2) == "percentile"  # l < Q: an l-query mean
    assert measure_interval("auto", "ndcg@10", n_queries=3, sample_size=3) == "studentized"
    assert measure_interval("auto", "recall@100", n_queries=3, sample_size=3) == "studentized"
    assert measure_interval("auto", "mrr", n_queries=3, sample_size=3) == "studentized"
    assert measure_interval("auto", None, n_queries=3, sample_size=3) == "studentized"
    assert measure_interval("auto", "acc@5", n_queries=3, sample_size=3, difference=True) == "studentized"
    assert measure_interval("jeffreys", "ndcg@10", n_queries=3, sample_size=3) == "studentized"
    assert measure_interval("jeffreys", "acc@1", n_queries=3, sample_size=3) == "jeffreys"
    assert measure_interval("bca", "acc@1", n_queries=3, sample_size=3) == "bca"
    # the old data-driven helper no longer picks Wilson for 0/1 values of an unnamed measure
    assert resolve_interval("auto", np.array([0.0, 1.0, 1.0]), 3, 3) == "studentized"


def test_auto_default_is_wilson_for_accuracy_and_studentized_for_graded_values() -> None:
    rng = np.random.default_rng(3)
    acc = (rng.random(200) < 0.97).astype(float)
    ref = ss.binomtest(int(acc.sum()), 200).proportion_ci(method="wilson")
    r = bootstrap_ci(acc, n_resamples=300, seed=1, measure="acc@10")
    assert r.interval == "wilson" and (r.ci_low, r.ci_high) == pytest.approx((ref.low, ref.high))
    ndcg = rng.random((2, 200))
    auto = bootstrap_ci(ndcg, n_resamples=300, seed=1, measure="ndcg@10")
    stud = bootstrap_ci(ndcg, n_resamples=300, seed=1, interval="studentized")
    assert auto.interval == "studentized"
    np.testing.assert_array_equal(auto.ci_low, stud.ci_low)
    np.testing.assert_array_equal(auto.ci_high, stud.ci_high)


def test_few_outcomes_message_and_summary_warnings() -> None:
    assert few_outcomes(np.r_[np.ones(98), np.zeros(2)]) == "2 failures among 100 queries"
    assert few_outcomes(np.r_[np.ones(3), np.zeros(50)]) == "3 successes among 53 queries"
    assert few_outcomes(np.r_[np.ones(50), np.zeros(50)]) is None and few_outcomes(np.linspace(0, 1, 9)) is None
    q = 60
    acc = np.r_[np.ones(q - 2), np.zeros(2)]
    per = {
        s: PerQueryMetrics([f"q{i}" for i in range(q)], {"acc@5": np.roll(acc, i), "mrr": np.roll(acc, i) / 2})
        for i, s in enumerate(("a", "b"))
    }
    with pytest.warns(FewOutcomesWarning, match="a on acc@5: 2 failures among 60 queries"):
        s = summarise(per, n_resamples=100)
    assert s.systems["a"]["acc@5"].interval == "wilson" and s.systems["a"]["mrr"].interval == "studentized"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewOutcomesWarning)
        with pytest.warns(SampleSizeWarning, match="CI of an 20-query mean.*paired tests lose power"):
            s = summarise(per, n_resamples=100, sample_size=20)
    assert s.systems["a"]["acc@5"].interval == "percentile"


def test_sample_size_note() -> None:
    assert sample_size_note(300, 300) == ""
    note = sample_size_note(100, 1000, pairs=False)
    assert note.startswith("sample_size 100 < 1000 queries: each CI is the CI of an 100-query mean") and "3.2x" in note
    assert "paired" not in note and "paired tests lose power" in sample_size_note(100, 1000)


def test_one_query_gets_an_interval_not_an_error():
    """A dataset of one query (a tiny scale study's held-out split) has no standard error: the
    graded measures and differences get the percentile interval (the point itself), acc@k its
    Wilson interval, instead of the studentized interval's error."""
    from adaptlab.stats import bootstrap_ci
    from adaptlab.stats.intervals import measure_interval

    assert measure_interval("auto", "ndcg@10", n_queries=1, sample_size=1) == "percentile"
    assert measure_interval("auto", "ndcg@10", n_queries=1, sample_size=1, difference=True) == "percentile"
    assert measure_interval("auto", "acc@1", n_queries=1, sample_size=1) == "wilson"
    ci = bootstrap_ci([0.5], n_resamples=50, seed=0, measure="ndcg@10")
    assert (ci.ci_low, ci.ci_high) == (0.5, 0.5)
