"""Ray runtime helpers: start the embedded local Ray or join a cluster (``init_ray``), and the
progress lines of long work (:mod:`adaptlab.runtime.progress`)."""

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
from adaptlab.runtime.progress import Heartbeat, Progress, progress_enabled, set_progress

__all__ = [
    "Heartbeat",
    "Progress",
    "RayInfo",
    "available_cores",
    "cluster_has_gpus",
    "init_ray",
    "local_num_cpus",
    "on_shutdown",
    "progress_enabled",
    "ray_info",
    "set_progress",
    "shutdown_ray",
    "start_ray",
]
