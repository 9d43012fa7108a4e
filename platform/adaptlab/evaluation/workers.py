"""Bootstrap workers: one (dataset x measure) group of systems per task, in-process or on Ray.

A group is the ``[n_systems, n_queries]`` matrix of one measure on one dataset; its task computes
the CI of every system (:func:`~adaptlab.stats.bootstrap_ci`) and the paired differences
(:func:`~adaptlab.stats.paired_bootstrap`) with the study's :class:`~adaptlab.stats.BootstrapConfig`.
The task is a pure function of (values, names, baseline or pairs, config), so a Ray task returns exactly
the numbers of the in-process call: same seed, same resamples, same arithmetic (NumPy on both
sides; on a GPU cluster the tasks get a quarter GPU each and the ``"auto"`` backend picks CuPy
there, as it would in a driver that has the GPU).

``workers``: ``"local"`` runs the groups in this process, ``"ray"`` as Ray tasks (starting or
joining Ray through :func:`adaptlab.runtime.init_ray`), ``"auto"`` on Ray only when Ray is already
running in this process and the study has at least :data:`RAY_MIN_CELLS` (group x system) cells:
below that, scheduling and transfers cost more than the bootstrap (a multinomial-count bootstrap
of one group takes milliseconds) and Ray is never started just for the measuring stage.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.runtime import cluster_has_gpus, init_ray
from adaptlab.stats import BootstrapConfig, PairedDifference, bootstrap_ci, paired_bootstrap

__all__ = ["RAY_MIN_CELLS", "WORKERS", "BootstrapGroup", "GroupResult", "bootstrap_group", "run_groups", "use_ray"]

WORKERS = ("auto", "local", "ray")
"""Accepted values of ``workers``."""

RAY_MIN_CELLS = 512
"""``workers="auto"`` uses Ray from this many (dataset x measure x system) cells on."""

_GPU_PER_TASK = 0.25


@dataclass(frozen=True)
class BootstrapGroup:
    """One measure on one dataset: ``values[i]`` are system ``names[i]``'s per-query values."""

    key: tuple[str, str]  # (dataset, measure)
    values: np.ndarray
    names: tuple[str, ...]
    baseline: str | None
    pairs: tuple[tuple[str, str], ...] | None = None  # explicit (system, compared_to); else baseline


@dataclass(frozen=True)
class GroupResult:
    """The CIs of each system (arrays in ``names`` order) and the paired differences."""

    point: np.ndarray
    boot_mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    pairs: tuple[PairedDifference, ...]
    interval: str = "percentile"


def bootstrap_group(group: BootstrapGroup, boot: BootstrapConfig) -> GroupResult:
    """CIs and paired differences of one group (the task body, identical on every worker)."""
    kw = boot.kwargs()
    ci = bootstrap_ci(group.values, **kw)
    pairs: tuple[PairedDifference, ...] = ()
    if len(group.names) > 1:
        pairs = tuple(paired_bootstrap(group.values, names=list(group.names), baseline=group.baseline,
                                       pairs=group.pairs, **kw))
    return GroupResult(np.asarray(ci.point), np.asarray(ci.boot_mean), np.asarray(ci.ci_low),
                       np.asarray(ci.ci_high), pairs, ci.interval)


def check_workers(workers: str) -> str:
    if workers not in WORKERS:
        raise ConfigError(f"workers={workers!r} is not valid; expected one of {', '.join(WORKERS)}")
    return workers


def use_ray(workers: str, cells: int) -> bool:
    """Whether ``workers`` with ``cells`` (group x system) cells runs on Ray (see the module doc)."""
    if check_workers(workers) != "auto":
        return workers == "ray"
    ray = sys.modules.get("ray")  # never import (or start) Ray just to ask
    return cells >= RAY_MIN_CELLS and ray is not None and ray.is_initialized()


def run_groups(groups: Sequence[BootstrapGroup], boot: BootstrapConfig, *, workers: str = "auto") -> list[GroupResult]:
    """:func:`bootstrap_group` for every group, in order, in-process or as Ray tasks."""
    cells = sum(len(g.names) for g in groups)
    if not use_ray(workers, cells):
        return [bootstrap_group(g, boot) for g in groups]
    import ray  # deferred: only the Ray path needs it

    init_ray()
    options = {"num_cpus": 1}
    if cluster_has_gpus():
        options["num_gpus"] = _GPU_PER_TASK
    task = ray.remote(bootstrap_group).options(**options)
    boot_ref = ray.put(boot)
    return list(ray.get([task.remote(g, boot_ref) for g in groups]))
