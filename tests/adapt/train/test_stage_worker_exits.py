"""A training stage's Ray worker exits when the stage ends, so its memory is the OS's again.

Ray places a stage by the memory it declares (adapt/train/memory.py) and counts a finished task's
memory as free; a reused worker keeps what it allocated (a PDF study's idle worker held 2.4 GB
after its PT stage, and Ray's memory monitor killed it while the next FT stage ran). A stage that
declares ``OWN_WORKER_BYTES`` or more therefore runs in a worker of its own (``max_calls=1``): this
test declares that much for two tiny stages, records the worker's pid from the checkpoint hook and checks that the process is gone soon after the stage ends, and that two
stages of one chain ran in two processes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from adaptlab.adapt.train.ft import FTConfig
from adaptlab.adapt.train.jobs import OWN_WORKER_BYTES, AdaptJob, JobSettings, run_adaptation_jobs
from adaptlab.adapt.train.pt import PTConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "study"))
from testkit.ray_cluster import pid_alive  # noqa: E402 (a zombie, an exited worker not yet reaped, is not alive)

FT = FTConfig(learning_rate=1e-3, epochs=1, batch_size=4, num_negatives=1, warmup_ratio=0.0)
PT = PTConfig(learning_rate=1e-3, epochs=1, batch_size=4, warmup_ratio=0.0)


def test_each_stage_runs_in_its_own_worker_which_exits(ray_local, tiny_model, triplets, chunks, tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()

    def record_pid(step):  # nested: Ray pickles it by value; runs in the stage's worker
        import os as _os

        (pids / str(_os.getpid())).touch()

    job = AdaptJob(
        "pt-ft", str(tiny_model), scale=8, triplets=triplets, chunks=chunks, pt_config=PT, ft_config=FT, seed=3
    )
    (art,) = run_adaptation_jobs(
        [job],
        tmp_path / "store",
        JobSettings(checkpoint_every=1, memory_per_job=OWN_WORKER_BYTES),
        on_checkpoint=record_pid,
    )
    assert art.variant == "pt-ft"
    seen = sorted(int(p.name) for p in pids.iterdir())
    assert len(seen) == 2, f"the PT and FT stages ran in {len(seen)} worker process(es): {seen}"
    deadline = time.monotonic() + 60.0  # a loaded machine tears torch down slowly
    while any(pid_alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in seen if pid_alive(pid)], "a finished stage's worker is still alive"
