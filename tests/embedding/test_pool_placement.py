"""The CPU slots an embedding actor asks for fit on one node (issue 22): the quickstart's single
actor on a cluster of two 2-CPU nodes asked for all 4 CPUs and waited out its placement time-out."""

from __future__ import annotations

import pytest

import adaptlab.embedding.pipeline as pipeline
from adaptlab.runtime.cluster import RayInfo


def _cluster(monkeypatch, nodes: list[float], *, started_here: bool, cores: int = 2) -> None:
    import ray

    total = sum(nodes)
    info = RayInfo(
        address="127.0.0.1:1",
        started_here=started_here,
        num_cpus=total,
        num_gpus=0.0,
        dashboard_url=None,
        auth_mode="token",
    )
    monkeypatch.setattr(pipeline, "ray_info", lambda: info)
    monkeypatch.setattr(pipeline, "cluster_has_gpus", lambda: False)
    monkeypatch.setattr(pipeline, "available_cores", lambda: cores)
    listed = [{"Alive": True, "Resources": {"CPU": c}} for c in nodes] + [{"Alive": False, "Resources": {"CPU": 64.0}}]
    monkeypatch.setattr(ray, "nodes", lambda: listed)


@pytest.mark.parametrize(
    "nodes, num_actors, expected",
    [
        ([0.0, 2.0, 2.0], 1, (1, 2.0, 2)),  # the quickstart on a head without CPUs and two 2-CPU workers
        ([2.0, 2.0], 1, (1, 2.0, 2)),  # two 2-CPU nodes: was 4 CPUs, more than any node has
        ([8.0, 2.0], 1, (1, 8.0, 8)),  # the largest node holds it
        ([2.0, 2.0], 4, (4, 1.0, 1)),  # unchanged when the share is already small
        ([2.0, 2.0], None, (4, 1.0, 1)),  # the default pool: one slot per CPU, unchanged
    ],
)
def test_a_cpu_actor_asks_for_no_more_than_the_largest_live_node_has(monkeypatch, nodes, num_actors, expected):
    _cluster(monkeypatch, nodes, started_here=False)
    placement, _ = pipeline.pool_placement(
        100, batch_size=16, num_actors=num_actors, block_size=None, torch_threads=None, device=None
    )
    assert (placement.num_actors, placement.num_cpus, placement.torch_threads) == expected


def test_the_embedded_single_node_placement_is_unchanged(monkeypatch):
    _cluster(monkeypatch, [4.0], started_here=True, cores=2)  # 4 logical CPUs on 2 cores
    placement, _ = pipeline.pool_placement(
        100, batch_size=16, num_actors=1, block_size=None, torch_threads=None, device=None
    )
    assert (placement.num_actors, placement.num_cpus, placement.torch_threads) == (1, 2.0, 2)
