"""The settings objects that replaced long parameter lists: their keyword forms bind the same
fields, and an unknown keyword is a TypeError naming it and the valid ones."""

from __future__ import annotations

import pytest

from adaptlab.adapt.train.run_options import TrainRun, train_run
from adaptlab.adapt.train.tune import SweepRun, _sweep_run
from adaptlab.runtime.local_ray import LocalStart
from adaptlab.study.runner import EvalOutputs, _outputs


def test_train_run_keywords_set_fields_on_the_defaults_or_on_a_given_run():
    assert train_run("train_ft", None, {}) == TrainRun()
    assert TrainRun().checkpoint_every == 50 and TrainRun().seed == 0
    got = train_run("train_ft", TrainRun(seed=3, scale=8), {"checkpoint_every": None})
    assert got == TrainRun(seed=3, scale=8, checkpoint_every=None)


def test_train_run_refuses_an_unknown_keyword_by_name():
    with pytest.raises(
        TypeError, match=r"train_pt\(\) got an unexpected keyword argument 'seeds'; expected one of .*device, .*seed$"
    ):
        train_run("train_pt", None, {"seeds": 1})
    with pytest.raises(TypeError, match=r"'checkpoint_every'; expected one of device, scale, seed$"):
        train_run("train_colbert", None, {"checkpoint_every": 1}, ("seed", "scale", "device"))


def test_the_trainers_refuse_an_unknown_keyword_before_any_work():
    from adaptlab.adapt.train.ft import train_ft
    from adaptlab.adapt.train.pt import train_pt

    with pytest.raises(TypeError, match="'sed'"):
        train_ft("unused", [("q", "p", ["n"])], artifact_root="unused", sed=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'checkpoints'"):
        train_pt("unused", ["text"], artifact_root="unused", checkpoints=2)  # type: ignore[call-arg]


def test_sweep_run_needs_a_storage_path_and_names_unknown_keywords():
    assert _sweep_run(None, {"storage_path": "s", "seed": 2}) == SweepRun("s", seed=2)
    assert _sweep_run(SweepRun("s"), {"name": "n"}) == SweepRun("s", name="n")
    with pytest.raises(TypeError, match="storage_path"):
        _sweep_run(None, {"seed": 2})
    with pytest.raises(TypeError, match=r"argument 'ci_seed'; expected one of .*storage_path"):
        _sweep_run(None, {"storage_path": "s", "ci_seed": 2})


def test_eval_outputs_from_keywords():
    assert _outputs(None, {"store_root": None, "export_run": "r"}) == EvalOutputs(export_run="r")
    with pytest.raises(TypeError, match=r"'store'; expected one of export_run, on_dataset, store_root"):
        _outputs(None, {"store": "x"})


def test_local_start_names_what_was_given():
    assert LocalStart().given() == []
    assert LocalStart(num_gpus=0, dashboard=True).given() == ["num_gpus", "dashboard"]
