"""bootstrap_ci / paired_bootstrap take their settings one way: a BootstrapConfig (config=) or its
fields as keyword options, never both; the execution options (method, backend, n_jobs) go with
either; an unknown keyword is a TypeError naming the valid ones. The config and the equivalent
keywords give the same numbers, bit for bit. The TypedDicts name exactly the config's fields."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, bootstrap_ci, paired_bootstrap
from adaptlab.stats.options import CIOptions, Execution, ExecutionOptions, PairedOptions, resampling
from adaptlab.stats.settings import BootstrapOptions, ResampleOptions

LOOSE = {"n_resamples": 120, "seed": 5, "confidence": 0.9, "sample_size": 30, "interval": "percentile"}
CONFIG = BootstrapConfig(**LOOSE)


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.round(rng.random((3, 40)), 2)


def _same(a: object, b: object) -> bool:
    """Two results equal field by field (arrays bit for bit)."""
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    fa, fb = dataclasses.asdict(a), dataclasses.asdict(b)  # type: ignore[call-overload]  # result dataclasses
    return fa.keys() == fb.keys() and all(np.array_equal(fa[k], fb[k]) for k in fa)


def test_the_options_name_exactly_the_config_fields() -> None:
    fields = {f.name for f in dataclasses.fields(BootstrapConfig)}
    assert set(BootstrapOptions.__optional_keys__) == fields
    assert set(ResampleOptions.__optional_keys__) == set(CONFIG.kwargs())
    assert set(ExecutionOptions.__optional_keys__) == {f.name for f in dataclasses.fields(Execution)}
    assert set(CIOptions.__optional_keys__) == set(CONFIG.kwargs()) | set(ExecutionOptions.__optional_keys__)
    assert set(PairedOptions.__optional_keys__) == set(CONFIG.paired_kwargs()) | set(ExecutionOptions.__optional_keys__)
    # the options' types are the config's, field by field
    hints = typing.get_type_hints(BootstrapConfig)
    assert typing.get_type_hints(BootstrapOptions) == {k: hints[k] for k in BootstrapOptions.__optional_keys__}


def test_config_and_keywords_give_the_same_numbers(values: np.ndarray) -> None:
    by_config = bootstrap_ci(values, config=CONFIG, measure="ndcg@10")
    assert _same(by_config, bootstrap_ci(values, measure="ndcg@10", **LOOSE))
    assert by_config.n_resamples == 120 and by_config.sample_size == 30 and by_config.confidence == 0.9
    assert not _same(by_config, bootstrap_ci(values, measure="ndcg@10", **{**LOOSE, "seed": 6}))
    tested = dataclasses.replace(CONFIG, test="bootstrap")
    by_config_p = paired_bootstrap(values, baseline=0, config=tested)
    assert _same(by_config_p, paired_bootstrap(values, baseline=0, **LOOSE, test="bootstrap"))
    assert {d.test for d in by_config_p} == {"bootstrap"}  # the config's test is used


def test_execution_options_go_with_a_config(values: np.ndarray) -> None:
    ref = bootstrap_ci(values, config=CONFIG)
    assert _same(ref, bootstrap_ci(values, config=CONFIG, n_jobs=1, backend="numpy"))
    index = bootstrap_ci(values, config=CONFIG, method="index")
    assert index.method == "index"
    assert _same(index, bootstrap_ci(values, method="index", **LOOSE))
    pairs = paired_bootstrap(values, config=CONFIG, method="multinomial", n_jobs=2)
    assert {d.method for d in pairs} == {"multinomial"}


def test_numpy_numbers_are_accepted_as_before(values: np.ndarray) -> None:
    ref = bootstrap_ci(values, n_resamples=50, confidence=0.9)
    same = bootstrap_ci(values, n_resamples=np.int64(50), confidence=np.float64(0.9), seed=np.int32(0))
    assert _same(ref, same)
    narrow = bootstrap_ci(values, n_resamples=50, confidence=np.float32(0.9))  # a numbers.Real, as before
    assert narrow.confidence == float(np.float32(0.9))


def test_defaults_are_the_configs(values: np.ndarray) -> None:
    assert _same(bootstrap_ci(values), bootstrap_ci(values, config=BootstrapConfig()))
    assert _same(paired_bootstrap(values), paired_bootstrap(values, config=BootstrapConfig()))


@pytest.mark.parametrize("call", ["bootstrap_ci", "paired_bootstrap"])
def test_mixing_a_config_and_statistics_keywords_is_an_error(values: np.ndarray, call: str) -> None:
    fn = bootstrap_ci if call == "bootstrap_ci" else paired_bootstrap
    with pytest.raises(
        ConfigError, match=rf"^{call}: give .* as config= or as keywords, not both \(got config= and seed\)"
    ):
        fn(values, config=CONFIG, seed=5)  # even when the keyword agrees with the config


@pytest.mark.parametrize(
    ("call", "key"),
    [
        ("bootstrap_ci", "adjustment"),
        ("bootstrap_ci", "test"),
        ("paired_bootstrap", "n_resample"),
        ("bootstrap_ci", "boot"),
    ],
)
def test_an_unknown_keyword_is_a_type_error_naming_the_valid_ones(values: np.ndarray, call: str, key: str) -> None:
    fn = bootstrap_ci if call == "bootstrap_ci" else paired_bootstrap
    with pytest.raises(
        TypeError, match=rf"^{call}\(\) got an unexpected keyword argument '{key}'; .*n_jobs, n_resamples"
    ):
        fn(values, **{key: 1})


def test_a_config_of_another_type_is_refused(values: np.ndarray) -> None:
    with pytest.raises(ConfigError, match="config must be an adaptlab.stats.settings.BootstrapConfig, got dict"):
        bootstrap_ci(values, config={"seed": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"method": "exact"}, "method='exact' is not valid"),
        ({"n_jobs": 0}, "n_jobs=0 must be a positive integer"),
        ({"backend": "tpu"}, "backend"),
        ({"interval": "bca", "sample_size": 10}, "needs resamples of all 40 queries"),
        ({"sample_size": 41}, "sample_size=41 exceeds the 40 queries"),
        ({"confidence": 1.0}, "confidence must be a number strictly between 0 and 1"),
    ],
)
def test_settings_are_checked_once_with_one_line(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resampling("f", 40, None, options, PairedOptions)


def test_the_checked_settings_resolve_the_sample_size() -> None:
    plan = resampling("f", 40, BootstrapConfig(n_resamples=7, seed=2, test="bootstrap"), {"n_jobs": 3}, PairedOptions)
    assert (plan.m, plan.l, plan.seed, plan.test, plan.jobs) == (7, 40, 2, "bootstrap", 3)
    assert resampling("f", 40, None, {"sample_size": 12}, CIOptions).l == 12
