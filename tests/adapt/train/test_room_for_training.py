"""Training gets the CPUs that idle warm embedding pools hold (issue 32, the three-node stall).

A three-node study at 100 documents embedded its mining pool with six ``EmbedBatch`` actors, one
CPU each on three 2-CPU nodes; the pool stayed warm, and the training stage it then submitted
waited for a CPU that never came free (325 s, stopped). Here the shared Ray's 4 CPUs are all held
by a warm pool's actor before a one-stage graph is submitted: the stage must be scheduled
(the pool released first), not wait forever. The stage runs alone, so it declares all 4 CPUs
(``lone_stage_all_cpus``, on by default) and trains on the threads they give."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from adaptlab.adapt.train.ft import FTConfig

STALL_S = 60.0
"""How long the graph may take before the test calls it stalled (a one-step FT of the tiny model
takes seconds; the stall is forever)."""


def _hold_every_cpu(ray) -> None:  # noqa: ANN001
    """A warm pool of one hashing-encoder actor on 4 threads: it declares all of the shared Ray's 4
    CPUs (one actor starts faster than four of one CPU each; the stall is the same)."""
    from adaptlab.embedding import active_pools, embed_texts

    embed_texts(
        [f"text {i}" for i in range(16)], "hash:16", use_ray=True, num_actors=1, torch_threads=4, progress=False
    )
    assert active_pools() == 1
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("CPU", 0) == 0, ray.available_resources()


@pytest.mark.slow  # 13 s on 2 loaded cores: a warm actor, then one FT step of the tiny model
def test_a_stage_is_scheduled_when_idle_embedding_actors_hold_every_cpu(
    ray_local, tiny_model: Path, triplets, tmp_path: Path
):
    from adaptlab.adapt.train.jobs import AdaptJob, JobSettings, run_adaptation_jobs, stage_threads
    from adaptlab.embedding import active_pools, release_pools
    from adaptlab.runtime import available_cores

    _hold_every_cpu(ray_local)
    cfg = FTConfig(learning_rate=1e-3, epochs=1, batch_size=4, num_negatives=1, max_steps=1, min_steps=0)
    threads = stage_threads(4, 4, available_cores())  # a whole node of the shared Ray: 4 CPUs
    job = AdaptJob("ft", str(tiny_model), scale=4, triplets=triplets, ft_config=cfg, seed=21)
    out: dict[str, object] = {}

    def train() -> None:
        try:
            out["artifacts"] = run_adaptation_jobs([job], tmp_path / "store", JobSettings(checkpoint_every=None))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            out["error"] = e

    worker = threading.Thread(target=train, daemon=True)
    worker.start()
    worker.join(STALL_S)
    stalled = worker.is_alive()
    if stalled:  # free the CPUs ourselves so the graph ends and no task is left behind
        release_pools()
        worker.join(120)
    assert not stalled, f"the training stage was not scheduled in {STALL_S:g} s: idle embedding actors held the CPUs"
    assert "error" not in out, out.get("error")
    (art,) = out["artifacts"]
    assert active_pools() == 0
    assert art.manifest["training"]["torch_threads"] == threads
