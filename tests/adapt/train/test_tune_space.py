"""The sweep's settings and space language without Ray, and the sweep result's own store rows."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from adaptlab.adapt.train.space import build_param_space, default_param_space, largest_value
from adaptlab.adapt.train.sweep_config import SweepConfig
from adaptlab.adapt.train.tune import TUNE_MEASURE, SweepResult
from adaptlab.stats import BootstrapConfig


def test_settings_and_space_load_without_ray_or_the_driver():
    """The study checks [tune] through these two modules: neither Ray nor the Tune driver loads."""
    code = (
        "import sys, adaptlab.adapt.train.sweep_config, adaptlab.adapt.train.space\n"
        "print(sorted(m for m in ('ray', 'torch', 'adaptlab.adapt.train.tune') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_largest_value_of_every_kind():
    space = {
        "batch_size": [8, 32, 16],
        "epochs": {"randint": [1, 4]},
        "num_negatives": {"choice": [1, 7]},
        "learning_rate": {"loguniform": [1e-5, 1e-4]},
        "merge_weight": 0.5,
    }
    assert largest_value(space, "batch_size", 1) == 32
    assert largest_value(space, "epochs", 1) == 4  # Ray's randint upper bound (exclusive), as before
    assert largest_value(space, "num_negatives", 1) == 7
    assert largest_value(space, "warmup_ratio", 3) == 3  # not in the space: the default


def test_default_space_builds_the_former_ray_space():
    """The plain default space builds into the Ray Tune space the driver used to spell itself."""
    pytest.importorskip("ray")
    built = build_param_space(default_param_space())
    assert list(built) == ["learning_rate", "epochs", "num_negatives", "batch_size", "scale"]
    assert (built["learning_rate"].lower, built["learning_rate"].upper) == (1e-5, 1e-4)
    assert [list(built[k].categories) for k in ("epochs", "num_negatives", "batch_size", "scale")] == [
        [1, 2, 3],
        [1, 3, 7],
        [16, 32],
        [20.0, 50.0],
    ]
    assert SweepConfig().param_space == default_param_space()


def _result() -> SweepResult:
    """Two trials (one errored, no report) and the chosen one's confirmation, by hand."""
    rows = [
        {
            "trial_id": "a",
            "status": "complete",
            "iterations": 2,
            "measure": "acc@5",
            "config/epochs": 2,
            "config/learning_rate": 1e-4,
            "objective": 0.5,
            "ci_low": 0.5,
            "ci_high": 0.9,
            "mean": 0.7,
            "n_queries": 4,
            "best_objective": 0.5,
            "error": None,
        },
        {
            "trial_id": "b",
            "status": "error",
            "iterations": None,
            "measure": "acc@5",
            "config/epochs": 1,
            "config/learning_rate": 1e-3,
            "objective": None,
            "ci_low": None,
            "ci_high": None,
            "mean": None,
            "n_queries": None,
            "best_objective": None,
            "error": "boom",
        },
    ]
    best = {
        **rows[0],
        "confirmed_objective": 0.25,
        "confirmed_ci_low": 0.25,
        "confirmed_ci_high": 0.75,
        "confirmed_mean": 0.5,
        "confirmed_n_queries": 4,
    }
    return SweepResult(rows, best, "/x/tune/s", measure="acc@5", bootstrap=BootstrapConfig(n_resamples=100, seed=7))


def test_sweep_rows_for_the_store():
    rows = _result().to_metric_rows("tiny-ft-s12-tune", "validation-s12", "confirm-s12")
    assert [(r["dataset"], r["measure"], r["extra"]["selection"]) for r in rows] == [
        ("validation-s12", TUNE_MEASURE, "optimistic"),
        ("validation-s12", TUNE_MEASURE, "optimistic"),
        ("confirm-s12", TUNE_MEASURE, "confirmed"),
    ]
    ok, failed, confirmed = rows
    assert (ok["value"], ok["ci_low"], ok["ci_high"], ok["boot_mean"]) == (0.5, 0.5, 0.9, 0.7)
    # sample_size None: each resample drew the part's queries (4 of the 8), not the whole validation set
    assert (ok["n_resamples"], ok["sample_size"], ok["seed"]) == (100, 4, 7)
    assert ok["extra"]["config"] == {"epochs": 2, "learning_rate": 1e-4} and ok["extra"]["trial_id"] == "a"
    assert math.isnan(failed["value"]) and failed["extra"]["error"] == "boom"
    assert (confirmed["value"], confirmed["ci_high"], confirmed["n_queries"], confirmed["sample_size"]) == (
        0.25,
        0.75,
        4,
        4,
    )
    assert failed["sample_size"] is None  # no report, nothing resampled
    assert "run_id" not in ok  # the caller's, when it commits
    json.dumps(rows)


def test_a_given_sample_size_is_stored_as_given():
    result = _result()
    result.bootstrap = BootstrapConfig(n_resamples=100, sample_size=3, seed=7)
    assert {r["sample_size"] for r in result.to_metric_rows("s", "v", "c")} == {3}


def test_no_confirmed_row_without_a_chosen_trial():
    result = _result()
    result.best = None
    assert [r["dataset"] for r in result.to_metric_rows("s", "v", "c")] == ["v", "v"]
    assert result.best_config() == {}
