"""The sweep objective (per-query measure -> bootstrap lower bound) and a tiny Ray Tune sweep
that is interrupted and resumed."""

from __future__ import annotations

import json
import math
import os
import signal

import numpy as np
import pytest

from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.adapt.train.tune import (
    choose_best,
    epoch_report,
    per_query_values,
    split_queries,
    summarise_trial,
    trial_config,
    trial_objective,
    tune_adaptation,
)
from adaptlab.data.dataset import Dataset, Document
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, bootstrap_ci


class _StubModel:
    """encode() looks texts up in a table: hand-made 2-d unit vectors."""

    def __init__(self, table):
        self.table = table

    def encode(self, texts, **_):
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def _unit(s):
    return [s, math.sqrt(1.0 - s * s)]


# both queries score d1..d4 as 0.9, 0.5, 0.5, 0.1; d2 and d3 tie exactly and d3 ranks first (higher
# id): ranks d1=1, d3=2, d2=3, d4=4. Query A: d2 relevant (rank 3); query B: d1 (gain 2, rank 1), d4 (rank 4).
_HAND = Dataset.build(
    "hand",
    [Document(f"d{i}", f"doc{i}") for i in range(1, 5)],
    {"A": "qa", "B": "qb"},
    {"A": {"d2": 1}, "B": {"d1": 2, "d4": 1}},
)
_HAND_TABLE = {
    "doc1": _unit(0.9),
    "doc2": _unit(0.5),
    "doc3": _unit(0.5),
    "doc4": _unit(0.1),
    "qa": [1.0, 0.0],
    "qb": [1.0, 0.0],
}


@pytest.mark.parametrize(
    ("measure", "expected"),
    [
        ("acc@2", [0.0, 1.0]),
        ("acc@3", [1.0, 1.0]),
        ("mrr", [1 / 3, 1.0]),
        ("mrr@2", [0.0, 1.0]),
        ("recall@3", [1.0, 0.5]),
        ("precision@3", [1 / 3, 1 / 3]),
        ("map", [1 / 3, (1 / 1 + 2 / 4) / 2]),
        ("ndcg@3", [1 / math.log2(4), 2 / (2 + 1 / math.log2(3))]),
        ("ndcg", [1 / math.log2(4), (2 + 1 / math.log2(5)) / (2 + 1 / math.log2(3))]),
    ],
)
def test_per_query_values_by_hand(measure, expected):
    values = per_query_values(_StubModel(_HAND_TABLE), _HAND, measure)
    np.testing.assert_allclose(values, expected, rtol=1e-6)


def test_per_query_values_encodes_ranks_and_skips_unjudged_queries():
    docs = [Document("d1", "one"), Document("d2", "two"), Document("d3", "three"), Document("d4", "four")]
    val = Dataset.build("v", docs, {"a": "qa", "b": "qb", "c": "qc"}, {"a": {"d2": 1}, "b": {"d4": 1}, "c": {"d1": 0}})
    table = {"one": [1, 0], "two": [0.6, 0.8], "three": [0.6, 0.8], "four": [0, 1], "Q: qa": [1, 0], "Q: qb": [0, 1]}
    values = per_query_values(_StubModel(table), val, "acc@2", query_prefix="Q: ")
    np.testing.assert_array_equal(values, [0.0, 1.0])  # a: d2 ranks 3rd behind d3; b: d4 first


def test_trial_objective_is_the_lower_bound_of_bootstrap_ci():
    values = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    cfg = BootstrapConfig(n_resamples=300, seed=4)
    out = trial_objective(values, cfg)
    ref = bootstrap_ci(values, n_resamples=300, seed=4)
    assert out["objective"] == out["ci_low"] == ref.ci_low
    assert out["ci_high"] == ref.ci_high
    assert out["mean"] == out["point"] == values.mean() and out["n_queries"] == 8


def test_split_queries_is_seeded_and_keeps_both_parts():
    mask = split_queries(10, 0.3, seed=7)
    assert mask.dtype == bool and mask.sum() == 7 and (~mask).sum() == 3
    assert np.array_equal(mask, split_queries(10, 0.3, seed=7))
    assert any(not np.array_equal(mask, split_queries(10, 0.3, seed=s)) for s in (8, 9, 10))
    assert split_queries(2, 0.9, seed=0).sum() == 1  # at least one query on each side
    with pytest.raises(ConfigError, match="at least 2"):
        split_queries(1)
    with pytest.raises(ConfigError, match="confirm_fraction = 1.0"):
        split_queries(10, 1.0)


def test_epoch_report_scores_the_two_parts_apart():
    values = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    selection = np.array([True] * 4 + [False] * 4)
    boot = BootstrapConfig(n_resamples=200, seed=1)
    out = epoch_report(values, selection, boot)
    chosen, fresh = trial_objective(values[:4], boot), trial_objective(values[4:], boot)
    assert out["objective"] == out["ci_low"] == chosen["ci_low"] and out["mean"] == 1.0 and out["n_queries"] == 4
    assert out["confirm_ci_low"] == fresh["ci_low"] and out["confirm_ci_high"] == fresh["ci_high"]
    assert out["confirm_mean"] == 0.0 and out["confirm_n_queries"] == 4 and out["ci_low"] > out["confirm_ci_high"]


def test_row_value_and_ci_come_from_one_epoch_and_apply_best_trains_the_winning_epochs():
    def epoch(e, low, high, confirm_low):
        return {
            "epoch": e,
            "objective": low,
            "ci_low": low,
            "ci_high": high,
            "mean": (low + high) / 2,
            "point": (low + high) / 2,
            "n_queries": 50,
            "confirm_ci_low": confirm_low,
            "confirm_ci_high": confirm_low + 0.2,
            "confirm_mean": confirm_low + 0.1,
            "confirm_n_queries": 50,
        }

    late_peak = summarise_trial([epoch(1, 0.40, 0.60, 0.35), epoch(2, 0.55, 0.75, 0.45), epoch(3, 0.50, 0.90, 0.5)])
    assert late_peak["best_objective"] == late_peak["ci_low"] == 0.55 and late_peak["ci_high"] == 0.75
    assert late_peak["epoch"] == 2 and late_peak["confirm_ci_low"] == 0.45
    other = summarise_trial([epoch(1, 0.30, 0.50, 0.9)])  # a better confirmation plays no part
    rows = [
        {"config/epochs": 3, "config/learning_rate": 1e-4, **late_peak},
        {"config/epochs": 1, "config/learning_rate": 1e-3, **other},
    ]
    best = choose_best(rows)
    assert best["config/learning_rate"] == 1e-4 and best["best_objective"] == 0.55
    assert best["config/epochs"] == 2 and best["trial_epochs"] == 3
    assert best["confirmed_objective"] == best["confirmed_ci_low"] == 0.45
    assert best["confirmed_ci_high"] == pytest.approx(0.65) and best["confirmed_n_queries"] == 50
    assert "optimistic" in best["selection_value"]
    applied = trial_config(
        FTConfig(epochs=9), {k.split("/", 1)[1]: v for k, v in best.items() if k.startswith("config/")}
    )
    assert applied.epochs == 2 and applied.learning_rate == 1e-4
    assert choose_best([{"config/epochs": 1, **summarise_trial([])}]) is None


def test_confirmed_lower_bound_is_honest_where_selection_is_optimistic():
    """Equal true quality p in every trial: the chosen trial's confirmation lower bound exceeds p
    about as often as a 95% bound's lower end should (2.5%), while the largest selection-style
    bound on all questions (the old objective) exceeds it several times as often."""
    p, n_questions, n_trials, n_sweeps = 0.6, 200, 5, 200
    boot = BootstrapConfig(n_resamples=300, seed=3)
    rng = np.random.default_rng(11)
    selection = split_queries(n_questions, 0.5, seed=0)
    honest = optimistic = 0
    for _ in range(n_sweeps):
        values = [(rng.random(n_questions) < p).astype(np.float64) for _ in range(n_trials)]
        rows = [summarise_trial([{**epoch_report(v, selection, boot, "acc@1"), "epoch": 1}]) for v in values]
        honest += choose_best(rows)["confirmed_ci_low"] > p
        optimistic += max(trial_objective(v, boot, "acc@1")["ci_low"] for v in values) > p
    assert honest / n_sweeps <= 0.05
    assert optimistic / n_sweeps >= 0.08 and optimistic >= 2 * max(honest, 1)


def test_trial_config_applies_tunable_values():
    cfg = trial_config(FTConfig(), {"learning_rate": "1e-4", "epochs": 2.0, "temperature": 0.05, "merge_weight": 0.5})
    assert cfg.learning_rate == 1e-4 and cfg.epochs == 2 and cfg.scale == pytest.approx(20.0)


def test_sweep_arguments_are_validated_before_anything_runs(validation_set, triplets):
    """Settings fail when the SweepConfig is built; what needs the validation set (the two parts'
    sizes against sample_size, with the config's confirm_fraction) fails before Ray starts."""
    for bad, message in [
        ({"param_space": {"lr": [1e-3]}}, "unknown parameter 'lr'"),
        ({"param_space": {"scale": 20, "temperature": 0.05}}, "either scale or temperature"),
        ({"variant": "pt"}, r"SweepConfig.variant = 'pt': expected 'ft' or 'pt-ft'"),
        ({"search": "grid"}, "SweepConfig.search = 'grid'"),
        ({"measure": "acc@@5"}, "cannot parse measure"),
        ({"confirm_fraction": 0.0}, "SweepConfig.confirm_fraction = 0.0"),
        ({"bootstrap": {"seed": 1}}, "SweepConfig.bootstrap must be an adaptlab.stats.BootstrapConfig"),
    ]:
        with pytest.raises(ConfigError, match=message):
            SweepConfig(**bad)
    kw = {"storage_path": "unused"}
    with pytest.raises(ConfigError, match="sample_size = 5: .* the smaller part has 4"):  # 8 queries, half each
        tune_adaptation("minilm", triplets, validation_set, SweepConfig(bootstrap=BootstrapConfig(sample_size=5)), **kw)
    with pytest.raises(ConfigError, match="sample_size = 3: .* the smaller part has 2"):  # a quarter confirms
        config = SweepConfig(confirm_fraction=0.25, bootstrap=BootstrapConfig(sample_size=3))
        tune_adaptation("minilm", triplets, validation_set, config, **kw)
    with pytest.raises(ConfigError, match="config must be an adaptlab.adapt.train.sweep_config.SweepConfig, got dict"):
        tune_adaptation("minilm", triplets, validation_set, {"num_samples": 2}, **kw)  # type: ignore[arg-type]


def test_optuna_is_optional(validation_set, triplets):
    try:
        import optuna  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="pip install optuna"):
            tune_adaptation("minilm", triplets, validation_set, SweepConfig(search="optuna"), storage_path="unused")
    else:
        pytest.skip("optuna is installed; the missing-package message cannot be checked")


try:
    from ray.tune import Callback as _TuneCallback
except ImportError:  # pragma: no cover - ray is a dependency
    _TuneCallback = object


class InterruptOnFirstCheckpoint(_TuneCallback):
    """Sends the driver SIGINT (as Ctrl+C would) after the first trial checkpoint, once."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        if not os.path.exists(self.flag):
            open(self.flag, "w").close()
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.slow
def test_tiny_sweep_is_interrupted_and_resumes(ray_local, tiny_model, triplets, validation_set, tmp_path):
    config = SweepConfig(
        param_space={
            "learning_rate": [1e-3, 1e-4],
            "epochs": 3,
            "batch_size": 4,
            "num_negatives": 1,
            "merge_weight": [0.5, 1.0],
        },
        num_samples=2,
        measure="acc@3",
        bootstrap=BootstrapConfig(n_resamples=200),
        max_concurrent_trials=1,
    )
    kw = dict(storage_path=tmp_path / "tune", name="tiny", seed=0)
    first = tune_adaptation(
        tiny_model,
        triplets,
        validation_set,
        config,
        callbacks=[InterruptOnFirstCheckpoint(str(tmp_path / "flag"))],
        **kw,
    )
    assert not first.restored
    assert not all(r["status"] == "complete" for r in first.rows), "the interrupt came too late"

    second = tune_adaptation(tiny_model, triplets, validation_set, config, **kw)
    assert second.restored and second.experiment_path == first.experiment_path
    assert len(second.rows) == 2 and all(r["status"] == "complete" for r in second.rows)
    for row in second.rows:
        assert row["iterations"] == 3 and row["n_queries"] == 4 == row["confirm_n_queries"]  # 8 split in two
        assert row["measure"] == "acc@3" and 1 <= row["epoch"] <= 3
        assert 0.0 <= row["ci_low"] <= row["mean"] <= row["ci_high"] <= 1.0
        assert row["objective"] == row["ci_low"] == row["best_objective"]
        assert 0.0 <= row["confirm_ci_low"] <= row["confirm_ci_high"] <= 1.0
        assert row["config/merge_weight"] in (0.5, 1.0)
    assert second.best is not None and second.best["best_objective"] == max(r["best_objective"] for r in second.rows)
    assert second.best["config/epochs"] == second.best["epoch"] and second.best["confirmed_n_queries"] == 4
    json.dumps(second.best, allow_nan=True)  # stored in the run's config: plain numbers, no NumPy scalars
    # the interrupted trial continued from its checkpoint: every epoch reported exactly once
    for result_file in (tmp_path / "tune" / "tiny").glob("*/result.json"):
        epochs = [json.loads(line)["epoch"] for line in result_file.read_text().splitlines()]
        assert epochs == [1, 2, 3], (result_file, epochs)
    assert second.to_arrow().num_rows == 2
