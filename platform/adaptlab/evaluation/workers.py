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

On Ray, every wait is bounded (:func:`gather`): a task whose worker or node dies is retried by Ray
(:data:`TASK_RETRIES` times, same numbers: the task is pure), then the stage fails with one
:class:`~adaptlab.embedding.pool.ClusterCapacityError` line; so it does when the cluster has had no
CPU left for the placement time-out (``ADAPTLAB_POOL_PLACEMENT_TIMEOUT``, default 180 s). While CPUs
exist the tasks wait for them (a long bootstrap group is not mistaken for a lost one).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.embedding.placement import (
    FETCH_TIMEOUT,
    PLACEMENT_TIMEOUT_ENV,
    POLL_SECONDS,
    ClusterCapacityError,
    cluster_nodes,
    placement_timeout,
)
from adaptlab.errors import ConfigError
from adaptlab.runtime import cluster_has_gpus, init_ray
from adaptlab.stats import BootstrapConfig, PairedDifference, bootstrap_ci, paired_bootstrap

__all__ = [
    "RAY_MIN_CELLS",
    "TASK_RETRIES",
    "WORKERS",
    "BootstrapGroup",
    "GroupResult",
    "bootstrap_group",
    "gather",
    "run_groups",
    "use_ray",
]

WORKERS = ("auto", "local", "ray")
"""Accepted values of ``workers``."""

RAY_MIN_CELLS = 512
"""``workers="auto"`` uses Ray from this many (dataset x measure x system) cells on."""

_GPU_PER_TASK = 0.25

TASK_RETRIES = 3
"""Ray retries of a bootstrap task whose worker or node died (the task is pure: a retry gives the
same numbers); after that the measuring stage fails with one line."""


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
    measure = group.key[1]  # the measure's definition decides the interval, never the values
    ci = bootstrap_ci(group.values, config=boot, measure=measure)
    pairs: tuple[PairedDifference, ...] = ()
    if len(group.names) > 1:
        pairs = tuple(
            paired_bootstrap(
                group.values,
                names=list(group.names),
                baseline=group.baseline,
                pairs=group.pairs,
                config=boot,
                measure=measure,
            )
        )
    return GroupResult(
        np.asarray(ci.point),
        np.asarray(ci.boot_mean),
        np.asarray(ci.ci_low),
        np.asarray(ci.ci_high),
        pairs,
        ci.interval,
    )


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
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": TASK_RETRIES}
    if cluster_has_gpus():
        options["num_gpus"] = _GPU_PER_TASK
    task = ray.remote(bootstrap_group).options(**options)
    boot_ref = ray.put(boot)
    refs = [task.remote(g, boot_ref) for g in groups]
    return gather(refs, ["/".join(g.key) for g in groups])


def gather(refs: Sequence[Any], labels: Sequence[str], *, timeout: float | None = None) -> list[Any]:
    """The results of ``refs`` in order, every wait bounded (rounds of
    :data:`~adaptlab.embedding.pool.POLL_SECONDS`). A task that lost its worker or node more than
    :data:`TASK_RETRIES` times, or a cluster with no CPU left for ``timeout`` seconds (default:
    :func:`~adaptlab.embedding.pool.placement_timeout`), raises one
    :class:`~adaptlab.embedding.pool.ClusterCapacityError` line naming the task (``labels``)."""
    import ray  # deferred: only the Ray path needs it

    limit = placement_timeout(timeout)
    pending, results = {ref: i for i, ref in enumerate(refs)}, [None] * len(refs)
    no_cpu_since: float | None = None
    while pending:
        done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_SECONDS)
        for ref in done:
            i = pending.pop(ref)
            results[i] = _fetch(ref, labels[i])
        no_cpu_since = _check_cpus(no_cpu_since, limit, len(refs) - len(pending), len(refs))
    return results


def _fetch(ref: Any, label: str) -> Any:
    """One finished task's result; a task that Ray gave up on (worker or node lost on every try)
    raises one line, an error of the task itself propagates unchanged."""
    import ray  # deferred: only the Ray path needs it

    try:
        return ray.get(ref, timeout=FETCH_TIMEOUT)
    except ray.exceptions.RayTaskError:
        raise
    except ray.exceptions.RayError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ClusterCapacityError(
            f"the bootstrap task of {label} failed: its Ray worker or node was lost and Ray's retries ran out "
            f"({type(e).__name__}: {first[:200]}); re-run the same study (stored results are kept), or measure in-process with "
            "workers='local'"
        ) from e


def _check_cpus(since: float | None, limit: float, done: int, total: int) -> float | None:
    """Track since when the cluster has had no CPU; raise once that lasted ``limit`` seconds."""
    import ray  # deferred: only the Ray path needs it

    if done == total or float(ray.cluster_resources().get("CPU", 0.0)) >= 1.0:
        return None
    now = time.monotonic()
    if since is not None and now - since > limit:
        lost = ", ".join(f"{n[:12]} ({ip})" for n, (alive, ip) in cluster_nodes().items() if not alive) or "none listed"
        raise ClusterCapacityError(
            f"bootstrap stopped: the Ray cluster has had no CPU for {limit:g} s (lost node(s): {lost}); {done}/{total} "
            f"bootstrap tasks were done and are not kept; re-run the same study once the cluster has room, or "
            f"measure in-process with workers='local' ({PLACEMENT_TIMEOUT_ENV}=SECONDS waits longer)"
        )
    return now if since is None else since
