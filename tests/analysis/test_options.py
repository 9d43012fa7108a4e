"""Settings objects and their keywords: one way in, the same numbers either way, and a clear
error for an unknown keyword or for both ways at once."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.analysis import (
    PlanSettings,
    ThresholdRule,
    compare_shift,
    plan_sample_size,
    plot_ci_forest,
    similarity_thresholds,
    thresholds_from_arrays,
)
from adaptlab.analysis._options import split_options
from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig

RNG = np.random.default_rng(11)
TOPK = np.sort(RNG.random((80, 5)), axis=1)[:, ::-1]
RANK = RNG.integers(0, 6, 80)


def test_a_rule_object_and_its_keywords_give_the_same_thresholds() -> None:
    rule = ThresholdRule(psi_grid=(10.0, 40.0, 70.0), test="margin", margin=0.05, gamma="resample_min")
    by_object = thresholds_from_arrays(TOPK, RANK, rule=rule, n_resamples=60, seed=1)
    by_keywords = thresholds_from_arrays(
        TOPK,
        RANK,
        psi_grid=(10.0, 40.0, 70.0),
        test="margin",
        margin=0.05,
        gamma="resample_min",
        n_resamples=60,
        seed=1,
    )
    assert by_object.to_metric_rows() == by_keywords.to_metric_rows()
    assert by_object.test == "margin" and by_object.gamma == "resample_min"
    # the rule is used: another test is recorded and applied
    other = thresholds_from_arrays(TOPK, RANK, rule=ThresholdRule(psi_grid=(10.0, 40.0, 70.0), test="paper"), seed=1)
    assert other.test == "paper"


def test_a_rule_and_rule_keywords_at_once_is_an_error_naming_both() -> None:
    with pytest.raises(
        ConfigError, match=r"^thresholds_from_arrays: .*rule= or as keywords, not both \(got rule= and margin\)"
    ):
        thresholds_from_arrays(TOPK, RANK, rule=ThresholdRule(), margin=0.02)


def test_an_unknown_keyword_is_a_type_error_listing_the_valid_ones() -> None:
    with pytest.raises(
        TypeError,
        match=r"thresholds_from_arrays\(\) got an unexpected keyword argument 'magrin'; expected one of .*margin",
    ):
        thresholds_from_arrays(TOPK, RANK, magrin=0.02)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"similarity_thresholds\(\) .* 'system'; expected one of"):
        similarity_thresholds(object(), system="s")  # type: ignore[call-arg]
    with pytest.raises(
        TypeError, match=r"compare_shift\(\) .* 'sample_size'; expected one of confidence, n_resamples, seed$"
    ):
        compare_shift([0.1, 0.2], [0.2, 0.3], sample_size=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"plot_ci_forest\(\) .* 'colour'"):
        plot_ci_forest(["a"], [0.1], [0.0], [0.2], colour="red")  # type: ignore[call-arg]


def test_rule_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="test='ks' is not valid"):
        thresholds_from_arrays(TOPK, RANK, rule=ThresholdRule(test="ks"))


def test_compare_shift_takes_a_bootstrap_config_or_its_keywords() -> None:
    x, y = RNG.random(50), RNG.random(50) + 0.1
    by_config = compare_shift(x, y, bootstrap=BootstrapConfig(n_resamples=300, seed=4, confidence=0.9))
    by_keywords = compare_shift(x, y, n_resamples=300, seed=4, confidence=0.9)
    assert (by_config.diff_ci_low, by_config.diff_ci_high) == (by_keywords.diff_ci_low, by_keywords.diff_ci_high)
    assert by_config.confidence == 0.9 and by_config.n_resamples == 300
    with pytest.raises(ConfigError, match=r"^compare_shift: .*not both \(got bootstrap= and seed\)"):
        compare_shift(x, y, bootstrap=BootstrapConfig(), seed=1)


def test_plan_settings_and_keywords_give_the_same_plan() -> None:
    a, b = RNG.random(40) * 0.5 + 0.2, RNG.random(40) * 0.5
    kw = {"effect": 0.2, "n_experiments": 10, "n_resamples": 19, "grid": [10, 20], "max_queries": 20, "seed": 3}
    by_keywords = plan_sample_size(a, b, **kw)
    by_config = plan_sample_size(a, b, config=PlanSettings(**kw))
    assert str(by_config) == str(by_keywords)
    assert by_config.curve.equals(by_keywords.curve)
    with pytest.raises(ConfigError, match=r"^plan_sample_size: .*not both \(got config= and seed\)"):
        plan_sample_size(a, b, config=PlanSettings(effect=0.2), seed=1)
    with pytest.raises(ConfigError, match="n_experiments must be an integer >= 10"):
        plan_sample_size(a, b, config=PlanSettings(effect=0.2, n_experiments=3))


def test_metric_row_keeps_its_columns_and_refuses_unknown_ones() -> None:
    row = metric_row("s", "d", "m", 0.5, ci_low=np.float64(0.4), p_adjusted=np.float64(0.02), rank_low=None)
    assert list(row)[:14] == [
        "system",
        "dataset",
        "measure",
        "value",
        "boot_mean",
        "ci_low",
        "ci_high",
        "n_queries",
        "n_resamples",
        "sample_size",
        "seed",
        "compared_to",
        "p_value",
        "extra",
    ]
    assert row["ci_low"] == 0.4 and row["p_adjusted"] == 0.02 and "rank_low" not in row
    with pytest.raises(TypeError, match="metric_row: unknown column"):
        metric_row("s", "d", "m", 0.5, ci_lo=0.1)  # type: ignore[call-arg]


def test_split_options_sorts_keys_into_their_groups() -> None:
    from adaptlab.analysis._options import BootstrapOptions, Labels

    boot, labels = split_options("f", {"seed": 1, "system": "s"}, BootstrapOptions, Labels)
    assert boot == {"seed": 1} and labels == {"system": "s"}
