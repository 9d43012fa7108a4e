"""Ray runtime helpers: start the embedded local Ray or join a cluster (``init_ray``), and the
progress lines of long work (:mod:`adaptlab.runtime.progress`), SIGTERM handled like SIGINT
(:mod:`adaptlab.runtime.signals`)."""

from __future__ import annotations

from adaptlab.runtime.cluster import (
    RayInfo,
    available_cores,
    cluster_has_gpus,
    embedded_node_alive,
    init_ray,
    is_embedded,
    largest_node_cpus,
    local_num_cpus,
    make_room,
    on_make_room,
    on_shutdown,
    ray_info,
    shutdown_ray,
    start_ray,
)
from adaptlab.runtime.progress import Heartbeat, Progress, progress_enabled, set_progress
from adaptlab.runtime.signals import TERMINATED_STATUS, Terminated, catch_sigterm, sigterm_received

__all__ = [
    "TERMINATED_STATUS",
    "Heartbeat",
    "Progress",
    "RayInfo",
    "Terminated",
    "available_cores",
    "catch_sigterm",
    "cluster_has_gpus",
    "embedded_node_alive",
    "init_ray",
    "is_embedded",
    "largest_node_cpus",
    "local_num_cpus",
    "make_room",
    "on_make_room",
    "on_shutdown",
    "progress_enabled",
    "ray_info",
    "set_progress",
    "shutdown_ray",
    "sigterm_received",
    "start_ray",
]
