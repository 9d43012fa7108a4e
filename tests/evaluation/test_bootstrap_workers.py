"""The measuring stage's bootstrap workers: Ray tasks give exactly the in-process numbers.

The Ray tests run on the session's shared Ray (tests/conftest.py): they need only its CPUs; the
worker that dies is one Ray restarts, and the unplaceable task is cancelled."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.embedding.pool import ClusterCapacityError
from adaptlab.errors import ConfigError
from adaptlab.evaluation import RAY_MIN_CELLS, summarise, summarise_datasets
from adaptlab.evaluation.workers import use_ray
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig


def _study(n_datasets: int = 3, n_systems: int = 3, seed: int = 0) -> dict[str, dict[str, PerQueryMetrics]]:
    """Per-query values of several systems on several datasets: binary measures (the
    multinomial path) and a continuous one (the index path), a different query count each: 20-34,
    below 30 on the first datasets, so the exact paired tests run beside the bootstrap too."""
    rng = np.random.default_rng(seed)
    out = {}
    for d in range(n_datasets):
        q = 20 + 7 * d
        ids = [f"q{i}" for i in range(q)]
        out[f"ds{d}"] = {
            f"sys{s}": PerQueryMetrics(
                ids,
                {
                    "acc@1": (rng.random(q) < 0.3 + 0.1 * s).astype(np.float64),
                    "acc@5": (rng.random(q) < 0.6 + 0.1 * s).astype(np.float64),
                    "ndcg@10": rng.random(q),
                },
            )
            for s in range(n_systems)
        }
    return out


def _as_plain(summary) -> dict:
    return {"json": summary.to_json(), "measures": summary.measures}


def test_ray_tasks_give_the_in_process_numbers_bit_for_bit(shared_ray):
    study = _study()
    boot = BootstrapConfig(n_resamples=300, seed=11)
    local = summarise_datasets(study, boot=boot, baseline="sys0", workers="local")
    remote = summarise_datasets(study, boot=boot, baseline="sys0", workers="ray")
    assert list(local) == list(remote) == ["ds0", "ds1", "ds2"]
    for ds in study:
        assert _as_plain(local[ds]) == _as_plain(remote[ds])  # floats compared with ==
        assert len(remote[ds].pairs) == 3 * 2  # 3 measures x 2 systems against the baseline


def test_several_datasets_at_once_equal_one_call_per_dataset():
    study = _study(n_datasets=2, n_systems=2, seed=3)
    boot = BootstrapConfig(n_resamples=200, sample_size=10, seed=5, confidence=0.9)
    together = summarise_datasets(study, boot=boot, workers="local")
    for ds, per_query in study.items():
        alone = summarise(per_query, boot=boot, workers="local")
        assert _as_plain(alone) == _as_plain(together[ds])
        # the summary keeps the interval setting; each row records what "auto" gave: percentile, as l = 10 < Q
        assert alone.sample_size == 10 and alone.boot == boot
        assert {r.interval for per in alone.systems.values() for r in per.values()} == {"percentile"}


def test_default_settings_and_bad_keywords():
    # config vs keywords and mixing: tests/analysis/test_bootstrap_one_way.py, for every function
    per_query = {"sys0": _study(n_datasets=1)["ds0"]["sys0"]}  # one system: no paired tests
    default = summarise(per_query, workers="local")
    assert default.n_resamples == 1000 and default.seed == 0
    with pytest.raises(ConfigError, match="workers"):
        summarise(per_query, workers="threads")
    with pytest.raises(ConfigError, match="n_resamples"):
        summarise(per_query, n_resamples=0)


def test_auto_stays_in_process_for_small_studies_and_without_ray(monkeypatch):
    assert not use_ray("auto", 10)
    assert use_ray("ray", 1) and not use_ray("local", 10**6)

    class FakeRay:
        @staticmethod
        def is_initialized():
            return True

    monkeypatch.setitem(__import__("sys").modules, "ray", FakeRay)
    assert not use_ray("auto", RAY_MIN_CELLS - 1)
    assert use_ray("auto", RAY_MIN_CELLS)


@pytest.mark.gpu
def test_gpu_tasks_match_a_gpu_driver(shared_ray):
    from adaptlab.stats.backend import cupy_available

    if not cupy_available():
        pytest.skip("needs CuPy and a CUDA GPU")
    study = _study()
    boot = BootstrapConfig(n_resamples=300, seed=11)
    local = summarise_datasets(study, boot=boot, workers="local")
    remote = summarise_datasets(study, boot=boot, workers="ray")
    for ds in study:
        assert _as_plain(local[ds]) == _as_plain(remote[ds])


def test_a_task_whose_worker_dies_is_retried_and_gives_its_result(shared_ray, tmp_path):
    import ray

    from adaptlab.evaluation.workers import gather

    def crash_once(marker: str, value: int) -> int:
        import os

        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return 2 * value
        os.close(fd)
        os._exit(3)  # the worker process dies on the first try

    task = ray.remote(crash_once).options(num_cpus=1, max_retries=1)
    assert gather([task.remote(str(tmp_path / "m"), 21), task.remote(str(tmp_path / "m"), 5)], ["a", "b"]) == [42, 10]
    assert (tmp_path / "m").exists()  # one try did die
    no_retry = ray.remote(crash_once).options(num_cpus=1, max_retries=0)
    with pytest.raises(
        ClusterCapacityError,
        match=r"^the bootstrap task of ds1/ndcg@10 failed: its Ray worker or node"
        r" was lost and Ray's retries ran out \(",
    ) as info:
        gather([no_retry.remote(str(tmp_path / "n"), 1)], ["ds1/ndcg@10"])
    assert "\n" not in str(info.value) and "workers='local'" in str(info.value)


def test_a_cluster_without_cpus_fails_with_one_line_within_the_timeout(shared_ray, monkeypatch):
    import time

    import ray

    from adaptlab.evaluation import workers
    from adaptlab.evaluation.workers import gather

    ref = ray.remote(lambda: 1).options(resources={"gone-node": 1}).remote()  # can never be placed
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"memory": 1.0})  # every CPU node is gone
    monkeypatch.setattr(workers, "POLL_SECONDS", 0.25)  # rounds of 0.25 s, not 2: the 1 s is noticed in ~1.5 s, not 4
    t0 = time.monotonic()
    try:
        with pytest.raises(
            ClusterCapacityError,
            match=r"^bootstrap stopped: the Ray cluster has had no CPU for 1 s "
            r"\(lost node\(s\): none listed\); 0/1 bootstrap tasks",
        ):
            gather([ref], ["ds/acc@1"], timeout=1)
    finally:
        ray.cancel(ref, force=True)
    assert time.monotonic() - t0 < 15
