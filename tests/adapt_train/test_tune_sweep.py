"""The sweep objective (per-query measure -> bootstrap lower bound) and a tiny Ray Tune sweep
that is interrupted and resumed."""

from __future__ import annotations

import json
import math
import os
import signal

import numpy as np
import pytest

from adaptlab.adapt.tune import _per_query_kernel, _summarise_ci, per_query_values, tune_adaptation
from adaptlab.data.dataset import Dataset, Document
from adaptlab.errors import ConfigError
from adaptlab.metrics.measures import Measure

# one row of scores for docs d1..d4; d2 and d3 tie and d3 ranks first (higher id):
# ranks d1=1, d3=2, d2=3, d4=4
SCORES = np.array([[0.9, 0.5, 0.5, 0.1]] * 2)
ID_RANK = np.arange(4)
REL = [{1: 1}, {0: 2, 3: 1}]  # query A: d2 (rank 3); query B: d1 (gain 2, rank 1), d4 (rank 4)


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
def test_per_query_kernel_by_hand(measure, expected):
    values = _per_query_kernel(SCORES, ID_RANK, REL, Measure.parse(measure))
    np.testing.assert_allclose(values, expected, rtol=1e-12)


class _StubModel:
    """encode() looks texts up in a table: hand-made 2-d unit vectors."""

    def __init__(self, table):
        self.table = table

    def encode(self, texts, **_):
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def test_per_query_values_encodes_ranks_and_skips_unjudged_queries():
    docs = [Document("d1", "one"), Document("d2", "two"), Document("d3", "three"), Document("d4", "four")]
    val = Dataset.build("v", docs, {"a": "qa", "b": "qb", "c": "qc"}, {"a": {"d2": 1}, "b": {"d4": 1}, "c": {"d1": 0}})
    table = {"one": [1, 0], "two": [0.6, 0.8], "three": [0.6, 0.8], "four": [0, 1],
             "Q: qa": [1, 0], "Q: qb": [0, 1]}
    values = per_query_values(_StubModel(table), val, "acc@2", query_prefix="Q: ")
    np.testing.assert_array_equal(values, [0.0, 1.0])  # a: d2 ranks 3rd behind d3; b: d4 first


def test_summarise_ci_accepts_objects_mappings_and_pairs():
    v = np.array([0.0, 1.0])

    class R:
        ci_low = np.array([0.1])
        ci_high = np.array([0.9])
        mean = np.array([0.5])

    assert _summarise_ci(R(), v) == (0.5, 0.1, 0.9)
    assert _summarise_ci({"ci_low": 0.2, "ci_high": 0.8}, v) == (0.5, 0.2, 0.8)
    assert _summarise_ci((0.3, 0.7), v) == (0.5, 0.3, 0.7)
    with pytest.raises(ConfigError, match="ci_low"):
        _summarise_ci({"low": 1}, v)


def test_sweep_arguments_are_validated_before_anything_runs(validation_set, triplets):
    kw = {"storage_path": "unused"}
    with pytest.raises(ConfigError, match="not tunable"):
        tune_adaptation("minilm", triplets, validation_set, param_space={"lr": 1e-3}, **kw)
    with pytest.raises(ConfigError, match="either scale or temperature"):
        tune_adaptation("minilm", triplets, validation_set, param_space={"scale": 20, "temperature": 0.05}, **kw)
    with pytest.raises(ConfigError, match="sweep variant"):
        tune_adaptation("minilm", triplets, validation_set, param_space={}, variant="pt", **kw)
    with pytest.raises(ConfigError, match="search"):
        tune_adaptation("minilm", triplets, validation_set, param_space={}, search="grid", **kw)
    with pytest.raises(ConfigError, match="cannot parse measure"):
        tune_adaptation("minilm", triplets, validation_set, param_space={}, measure="acc@@5", **kw)


def test_optuna_is_optional(validation_set, triplets):
    try:
        import optuna  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="pip install optuna"):
            tune_adaptation("minilm", triplets, validation_set, param_space={}, search="optuna",
                            storage_path="unused")
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
def test_tiny_sweep_is_interrupted_and_resumes(ray_local, tiny_model, triplets, validation_set, ci_fallback, tmp_path):
    from ray import tune

    kw = dict(
        storage_path=tmp_path / "tune", name="tiny",
        param_space={"learning_rate": tune.choice([1e-3, 1e-4]), "epochs": 3, "batch_size": 4,
                     "num_negatives": 1, "merge_weight": tune.choice([0.5, 1.0])},
        num_samples=2, measure="acc@3", n_resamples=200, ci_fn=ci_fallback, max_concurrent_trials=1, seed=0,
    )
    first = tune_adaptation(
        tiny_model, triplets, validation_set, callbacks=[InterruptOnFirstCheckpoint(str(tmp_path / "flag"))], **kw
    )
    assert not first.restored
    assert not all(r["status"] == "complete" for r in first.rows), "the interrupt came too late"

    second = tune_adaptation(tiny_model, triplets, validation_set, **kw)
    assert second.restored and second.experiment_path == first.experiment_path
    assert len(second.rows) == 2 and all(r["status"] == "complete" for r in second.rows)
    for row in second.rows:
        assert row["iterations"] == 3 and row["n_queries"] == 8 and row["measure"] == "acc@3"
        assert 0.0 <= row["ci_low"] <= row["mean"] <= row["ci_high"] <= 1.0
        assert row["objective"] == row["ci_low"]
        assert row["config/merge_weight"] in (0.5, 1.0)
    assert second.best is not None and second.best["best_objective"] == max(r["best_objective"] for r in second.rows)
    # the interrupted trial continued from its checkpoint: every epoch reported exactly once
    for result_file in (tmp_path / "tune" / "tiny").glob("*/result.json"):
        epochs = [json.loads(line)["epoch"] for line in result_file.read_text().splitlines()]
        assert epochs == [1, 2, 3], (result_file, epochs)
    assert second.to_arrow().num_rows == 2
