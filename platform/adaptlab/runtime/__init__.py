"""Ray runtime helpers: start the embedded local Ray or join a cluster (``init_ray``)."""

from __future__ import annotations

from adaptlab.runtime.cluster import (
    RayInfo,
    available_cores,
    cluster_has_gpus,
    init_ray,
    local_num_cpus,
    on_shutdown,
    ray_info,
    shutdown_ray,
    start_ray,
)

__all__ = [
    "RayInfo",
    "available_cores",
    "cluster_has_gpus",
    "init_ray",
    "local_num_cpus",
    "on_shutdown",
    "ray_info",
    "shutdown_ray",
    "start_ray",
]
