"""The scale study on Ray (slow): training stages as Ray tasks and a [tune] sweep whose trials
land in the store (measure ``tune_objective``, the trial's config in ``extra``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("sentence_transformers")

from adaptlab.study import TUNE_MEASURE, run_scale_study  # noqa: E402


@pytest.mark.slow
def test_ray_jobs_and_tune_rows_in_the_store(tiny_model, study_factory, tmp_path, shared_ray):
    from adaptlab import results

    adapt = {
        "corpus": "synthetic:n_documents=16,seed=3",
        "base_model": str(tiny_model),
        "name": "tiny",
        "scales": [12],
        "fraction": 0.5,
        "test_fraction": 0.25,
        "validation_fraction": 0.25,
        "max_tokens": 48,
        "questions_per_chunk": 2,
        "n_negatives": 1,
        "margin": False,
        "duplicate_threshold": False,
        "variants": ["base", "ft", "merged"],
        "ft": {"batch_size": 8, "max_steps": 2, "num_negatives": 1},
        "use_ray": True,
        "gpus_per_job": 0,
    }
    tune = {
        "scale": 12,
        "num_samples": 1,
        "n_resamples": 100,
        "apply_best": True,
        "param_space": {"learning_rate": {"grid": [1e-4, 1e-3]}, "epochs": 1, "batch_size": 8},
    }
    study = study_factory(adapt, tune=tune, models=[{"name": "tiny", "ref": str(tiny_model)}])
    out = run_scale_study(study, store=tmp_path)
    # one scale: the Ray path is the same for each (tests/study/scale/test_scale_study_run.py nests three
    # in-process); a second one cost another worker that imports torch, its training and 2 systems' evaluation
    assert list(out.systems) == ["tiny-base", "tiny-ft-s12", "tiny-merged-s12"]
    # the sweep: one row per trial, config in extra; the best learning rate trained the variants
    assert out.sweep is not None and len(out.sweep.rows) == 2
    store = results.open(tmp_path)
    rows = store.metrics(measure=TUNE_MEASURE, dataset="validation-s12").to_pylist()
    assert len(rows) == 2 and {r["system"] for r in rows} == {"tiny-ft-s12-tune"}
    assert {json.loads(r["extra"])["selection"] for r in rows} == {"optimistic"}
    # the chosen trial re-scored on the confirmation questions (the honest value), one row
    confirmed = store.metrics(measure=TUNE_MEASURE, dataset="confirm-s12").to_pylist()
    assert len(confirmed) == 1 and json.loads(confirmed[0]["extra"])["selection"] == "confirmed"
    assert confirmed[0]["value"] == out.sweep.best["confirmed_objective"]
    configs = [json.loads(r["extra"])["config"] for r in rows]
    assert sorted(c["learning_rate"] for c in configs) == [1e-4, 1e-3]
    for r in rows:  # value = the trial's best objective (a lower CI bound) over its epochs
        assert r["value"] >= r["ci_low"] - 1e-12 and r["ci_low"] <= r["ci_high"]
    best_lr = out.sweep.best["config/learning_rate"]
    manifest = json.loads((Path(out.systems["tiny-ft-s12"].artifact_path) / "manifest.json").read_text())
    assert manifest["hyperparameters"]["learning_rate"] == best_lr
    # and the evaluation rows are there for every system
    heldout = store.metrics(dataset="heldout", measure="acc@5").to_pandas()
    assert set(heldout[heldout["compared_to"].isna()]["system"]) == set(out.systems)
