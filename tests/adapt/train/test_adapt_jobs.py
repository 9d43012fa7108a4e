"""Adaptation jobs: validation, in-process variants, and Ray tasks that survive a killed worker."""

from __future__ import annotations

import json

import pytest

from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, run_adaptation_jobs, train_variant
from adaptlab.adapt.train.pt import PTConfig
from adaptlab.errors import ConfigError

FT = FTConfig(learning_rate=1e-3, epochs=2, batch_size=4, num_negatives=1, warmup_ratio=0.0)
PT = PTConfig(learning_rate=1e-3, epochs=1, batch_size=4, warmup_ratio=0.0)


def test_job_validation_names_what_is_missing():
    with pytest.raises(ConfigError, match="variant 'pf'"):
        AdaptJob("pf", "minilm", triplets=[])
    with pytest.raises(ConfigError, match="chunks"):
        AdaptJob("pt-ft", "minilm", triplets=[("q", "p", ())])
    with pytest.raises(ConfigError, match="triplets"):
        AdaptJob("ft", "minilm")
    with pytest.raises(ConfigError, match="merge_source"):
        AdaptJob("merged", "minilm", triplets=[], merge_source="pt")
    job = AdaptJob("merged", "minilm", triplets=[], chunks=[], merge_source="pt-ft")
    assert job.stages() == ("pt", "ft", "merge")
    assert AdaptJob("ft", "minilm", triplets=[]).stages() == ("ft",)


def test_train_variant_runs_the_chain_in_process(tiny_model, triplets, chunks, tmp_path):
    job = AdaptJob(
        "merged",
        str(tiny_model),
        scale=8,
        triplets=triplets,
        chunks=chunks,
        pt_config=PT,
        ft_config=FT,
        merge_weight=0.5,
        merge_source="pt-ft",
    )
    art = train_variant(job, tmp_path)
    assert art.variant == "merged"
    assert art.manifest["hyperparameters"] == {"merge_weight": 0.5, "source_variant": "pt-ft"}
    variants = sorted(json.loads(p.read_text())["variant"] for p in tmp_path.rglob("manifest.json"))
    assert variants == ["merged", "pt", "pt-ft"]


@pytest.mark.slow
def test_ray_jobs_share_stages_and_resume_after_a_killed_worker(
    ray_local, tiny_model, triplets, chunks, tmp_path, read_weights
):
    import torch

    marker = tmp_path / "killed-once"

    def kill_worker_at_step_2(step):  # nested: Ray pickles it by value
        import os
        import signal

        if step != 2:
            return
        try:  # atomic: only the first stage to get here dies
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    root = tmp_path / "store"
    jobs = [
        AdaptJob("ft", str(tiny_model), scale=8, triplets=triplets, ft_config=FT, seed=5),
        AdaptJob("merged", str(tiny_model), scale=8, triplets=triplets, ft_config=FT, seed=5, merge_weight=0.5),
        AdaptJob("pt", str(tiny_model), scale=8, chunks=chunks, pt_config=PT, seed=5),
    ]
    ft, merged, pt = run_adaptation_jobs(
        jobs, root, JobSettings(max_retries=2, checkpoint_every=1), on_checkpoint=kill_worker_at_step_2
    )
    assert marker.exists(), "the hook never killed a worker"
    assert (ft.variant, merged.variant, pt.variant) == ("ft", "merged", "pt")
    assert merged.manifest["base_model"]["hash"] == ft.manifest["base_model"]["hash"]
    # the FT stage is shared by the ft and merged jobs: exactly one FT artifact exists
    assert len(list(root.rglob("ft-8-*/manifest.json"))) == 1
    resumed = [a for a in (ft, pt) if a.manifest["training"]["resumed_from_step"] == 2]
    assert len(resumed) == 1, "exactly the killed stage resumes from its step-2 checkpoint"
    # the resumed run ends where an uninterrupted in-process run ends (thread counts may differ)
    victim = resumed[0]
    job = jobs[0] if victim.variant == "ft" else jobs[2]
    reference = train_variant(job, tmp_path / "reference", checkpoint_every=None)
    a, b = read_weights(victim.model_path), read_weights(reference.model_path)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)
    # a second submission finds everything stored
    again = run_adaptation_jobs(jobs, root)
    assert all(x.reused for x in again)
