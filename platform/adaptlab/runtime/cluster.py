"""Starting or joining Ray: one call, safe to repeat, and the session this process keeps.

``init_ray()`` with no address (and no ``RAY_ADDRESS`` in the environment) starts Ray inside
this process -- the embedded local runtime, :mod:`adaptlab.runtime.local_ray`: ``max(4, 2 x
cores)`` logical CPUs, the dashboard off (or bound to 127.0.0.1), every server of the session on
127.0.0.1, a watchdog process (:mod:`adaptlab.runtime.watchdog`) that stops the session when this
process dies, a bounded retry of a start that misses one of Ray's start windows, and token
authentication as Ray sets it up for local clusters (on; never disabled here). Logs are quiet
(``WARNING``) and, by default, without Ray Data progress bars; uncoloured prefixes when the
output is not a terminal and Ray's own reports of a lost node kept in its log files
(:mod:`adaptlab.runtime.ray_output`, also for a connection to a cluster).

With an address (``"auto"``, ``"host:port"``, ``"ray://host:10001"``, or ``RAY_ADDRESS``) it
connects instead, with the cluster's token (:mod:`adaptlab.runtime.ray_auth`).

If Ray is already initialised (by us, by a test fixture, by a Ray job driver) the call
returns a description of that instance and changes nothing.

Starting Ray takes seconds (more on a busy machine), so a driver can overlap it with other work:
``start_ray()`` runs ``init_ray`` in a background thread and returns a future; a later
``init_ray()`` waits for that start instead of starting a second Ray. Ray installs its SIGTERM
handler only from the main thread, so a background start logs no warning about it and the
process relies on Ray's exit hook instead. The starting thread stays alive (idle) until
:func:`shutdown_ray`: measured with Ray 2.60, once the thread that called ``ray.init`` has
exited, ``ray.cluster_resources()`` from another thread hangs and the process dies after 60 s
("Failed to connect to GCS"). Components that hold Ray resources for a long time
(the embedding actor pools) register a callback with :func:`on_shutdown`; :func:`shutdown_ray`
calls them before Ray stops. Those that hold resources while idle (warm pools) also register
with :func:`on_make_room`: work that needs the cluster's CPUs (training stages) calls
:func:`make_room` before it asks for them, because a task waiting for CPUs that idle actors hold
waits forever (a three-node study stalled with six idle embedding actors holding all six CPUs).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.runtime.local_ray import (
    GCS_WAIT_ENV,
    GCS_WAIT_S,
    LOCAL_HOST,
    LOCAL_SYSTEM_CONFIG,
    START_ATTEMPTS,
    START_TIMEOUTS,
    LocalStart,
    available_cores,
    local_num_cpus,
    start_local,
    start_timed_out,
    stop_monitor,
)
from adaptlab.runtime.ray_auth import auth_mode, connect
from adaptlab.runtime.ray_output import configure_ray_output
from adaptlab.runtime.signals import reclaim_sigterm, sigterm_kept, sigterm_received
from adaptlab.runtime.watchdog import Watchdog, stop_watchdog

__all__ = [
    "GCS_WAIT_ENV",
    "GCS_WAIT_S",
    "LOCAL_HOST",
    "LOCAL_SYSTEM_CONFIG",
    "START_ATTEMPTS",
    "START_TIMEOUTS",
    "LocalStart",
    "RayInfo",
    "available_cores",
    "cluster_has_gpus",
    "embedded_node_alive",
    "init_ray",
    "is_embedded",
    "largest_node_cpus",
    "local_num_cpus",
    "make_room",
    "on_make_room",
    "on_shutdown",
    "ray_info",
    "shutdown_ray",
    "start_ray",
    "start_timed_out",
]


@dataclass
class _Session:
    """What this process knows of the Ray it is connected to, in one place: whether it started it
    (the embedded runtime), its dashboard, a background start under way (:func:`start_ray`) and
    the thread running it, and the watchdog of a local start."""

    started_here: bool = False
    dashboard_url: str | None = None
    pending: Future[RayInfo] | None = None
    starter: threading.Thread | None = None
    watchdog: Watchdog | None = None


_STATE = _Session()
_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
_WORKER_LOGGER = "ray._private.worker"  # logs "SIGTERM handler is not set" for a background start
_pending_lock = threading.Lock()
_shutdown_hooks: list[Callable[[], None]] = []
_room_hooks: list[Callable[[], int]] = []
_starter_release = threading.Event()


def largest_node_cpus(default: float) -> float:
    """The CPUs of the largest live node of the running Ray (``default`` when the GCS cannot be
    asked, or no node reports CPUs): what a task or actor may declare at most and still be placed
    (one embedding actor on a cluster of two 2-CPU nodes asked for all 4 CPUs and waited out its
    time-out)."""
    import ray  # deferred: ray is heavy and only needed here

    try:
        sizes = [float(n.get("Resources", {}).get("CPU", 0.0)) for n in ray.nodes() if n.get("Alive")]
    except Exception:  # noqa: BLE001 - the GCS may be unreachable for a moment: keep the default
        return default
    return max([s for s in sizes if s > 0], default=default)


@dataclass(frozen=True)
class RayInfo:
    """What :func:`init_ray` started or joined."""

    address: str
    started_here: bool
    num_cpus: float
    num_gpus: float
    dashboard_url: str | None
    auth_mode: str
    """``"token"`` or ``"disabled"`` (``"unknown"`` if Ray does not say)."""


def ray_info(*, started_here: bool | None = None) -> RayInfo:
    """Describe the Ray instance this process is connected to."""
    import ray  # deferred: ray is heavy and only needed here

    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised; call adaptlab.runtime.init_ray() first")
    res = ray.cluster_resources()
    ctx = ray.get_runtime_context()
    try:
        address = ctx.gcs_address
    except Exception:  # noqa: BLE001
        address = ""
    return RayInfo(
        address=str(address),
        started_here=_STATE.started_here if started_here is None else started_here,
        num_cpus=float(res.get("CPU", 0.0)),
        num_gpus=float(res.get("GPU", 0.0)),
        dashboard_url=_STATE.dashboard_url,
        auth_mode=auth_mode(),
    )


def _keep_repeated_lines() -> None:
    """``RAY_DEDUP_LOGS=0`` unless the user set it: Ray would otherwise fold the progress lines of
    two concurrent stages into ``[repeated 5x across cluster]``. Ray reads the variable when
    ``ray`` is first imported, so an already imported Ray gets the same value on its log module."""
    if "RAY_DEDUP_LOGS" in os.environ:
        return
    os.environ["RAY_DEDUP_LOGS"] = "0"
    ray_logging = sys.modules.get("ray._private.ray_logging")
    if ray_logging is not None and hasattr(ray_logging, "RAY_DEDUP_LOGS"):
        ray_logging.RAY_DEDUP_LOGS = False  # type: ignore[attr-defined]  # private, read on every batch: absent in another Ray, no harm


def init_ray(
    address: str | None = None,
    *,
    local: LocalStart | None = None,
    namespace: str | None = None,
    runtime_env: dict[str, Any] | None = None,
    quiet: bool = True,
    progress_bars: bool = False,
    **ray_kwargs: Any,
) -> RayInfo:
    """Start the embedded local Ray, or connect to a cluster; idempotent (see module doc).

    Args:
        address: ``None`` (use ``RAY_ADDRESS`` if set, else start locally), ``"auto"``,
            ``"host:port"`` or ``"ray://host:port"``.
        local: the resources and dashboard of a *local* start
            (:class:`~adaptlab.runtime.local_ray.LocalStart`), or its fields as keywords:
            ``num_cpus`` (default :func:`local_num_cpus`), ``num_gpus`` (can fake GPUs for tests:
            actors then get distinct ``CUDA_VISIBLE_DEVICES``), ``object_store_memory``,
            ``dashboard`` (bound to 127.0.0.1). Not allowed with an address.
        namespace, runtime_env: passed to :func:`ray.init`.
        quiet: Ray logs at WARNING and the token-authentication notice is not printed.
        progress_bars: Ray Data progress bars (``DataContext.enable_progress_bars``).
        ray_kwargs: anything else :func:`ray.init` accepts.

    Raises:
        ConfigError: local-only resources given with an address, or the cluster at the
            address cannot be reached / refuses our token.
    """
    pending = _STATE.pending
    if pending is not None and threading.current_thread() is not _starter_thread():
        pending.result()  # a background start is under way (start_ray): wait, never start twice
    _keep_repeated_lines()
    configure_ray_output()  # plain prefixes into a pipe; Ray's node-death dumps stay in its log files
    import ray  # deferred: importing adaptlab.runtime must not import ray

    address = address or os.environ.get("RAY_ADDRESS") or None
    local = _local_start(local, ray_kwargs)
    _check_init_args(address, local)
    if ray.is_initialized():
        reclaim_sigterm()  # Ray, started in another thread, took SIGTERM over
        return ray_info()
    common: dict[str, Any] = {
        "namespace": namespace,
        "runtime_env": runtime_env,
        "logging_level": logging.WARNING if quiet else logging.INFO,
        **ray_kwargs,
    }
    ctx = _start_or_connect(address, common, local, quiet)
    _STATE.dashboard_url = getattr(ctx, "dashboard_url", None) or None
    _configure_data(progress_bars)
    if _STATE.started_here:
        atexit.unregister(_at_exit)  # once per process, however many starts
        atexit.register(_at_exit)  # after Ray's own (registered when ray was imported): runs before it
    return ray_info()


_LOCAL_KEYS = ("num_cpus", "num_gpus", "object_store_memory", "dashboard")


def _local_start(local: LocalStart | None, ray_kwargs: dict[str, Any]) -> LocalStart:
    """``local`` with the keywords of :class:`~adaptlab.runtime.local_ray.LocalStart` taken out of
    ``ray_kwargs`` (in place) and set on it."""
    given = {k: ray_kwargs.pop(k) for k in _LOCAL_KEYS if k in ray_kwargs}
    return replace(local or LocalStart(), **given)


def _start_or_connect(address: str | None, common: dict[str, Any], local: LocalStart, quiet: bool) -> Any:
    """Connect to ``address``, or start the embedded Ray when there is none; Ray's context. SIGTERM
    stays ours, and with ``quiet`` Ray's token notice is not printed."""
    auth_logger = logging.getLogger(_AUTH_LOGGER)
    old_level = auth_logger.level
    if quiet:
        auth_logger.setLevel(logging.ERROR)
    with sigterm_kept():  # ray.init takes SIGTERM over, in any thread (adaptlab.runtime.signals)
        try:
            if address:
                ctx = connect(address, common)
                _STATE.started_here = False
            else:
                ctx = _start_local(common, local)
                _STATE.started_here = True
        finally:
            auth_logger.setLevel(old_level)
    return ctx


def _start_local(common: dict[str, Any], local: LocalStart) -> Any:
    """The embedded start (:func:`~adaptlab.runtime.local_ray.start_local`), its watchdog kept in
    the session; Ray's context."""
    ctx, watchdog = start_local(common, local)
    _STATE.watchdog = watchdog
    return ctx


def _check_init_args(address: str | None, local: LocalStart) -> None:
    """Local-only settings with an address, or resources that are not non-negative integers:
    one :class:`ConfigError` naming them."""
    given = local.given()
    if address and given:
        raise ConfigError(
            f"init_ray(address={address!r}): {', '.join(k for k in given if k != 'dashboard') or 'dashboard'} "
            "can only be set when starting a local Ray; a cluster brings its own resources and dashboard"
        )
    for key, value in (("num_cpus", local.num_cpus), ("num_gpus", local.num_gpus)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"init_ray: {key} must be a non-negative integer, got {value!r}")


def _configure_data(progress_bars: bool) -> None:
    """Ray Data's progress bars and start-up prints; importing ray.data costs seconds, so when
    it is not imported yet only its environment default is set (read when it is imported)."""
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if "ray.data" not in sys.modules:
        if not progress_bars:
            os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
        return
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = bool(progress_bars)
    ctx.print_on_execution_start = False
    if not progress_bars:
        try:  # Ray Data logs "Progress bars disabled" once per process; we chose that
            from ray.util.debug import log_once

            log_once("ray_data_progress_manager_disabled")
        except ImportError:  # pragma: no cover
            pass


def _starter_thread() -> threading.Thread | None:
    return _STATE.starter


def start_ray(address: str | None = None, **kwargs: Any) -> Future[RayInfo]:
    """Start (or join) Ray in a background thread; returns a future of :func:`init_ray`'s result.

    Lets a driver load data while Ray starts. A second call while a start is under way returns
    the same future; :func:`init_ray` called meanwhile waits for it. Errors surface from
    ``future.result()`` (and from the next ``init_ray()``).
    """
    with _pending_lock:
        if _STATE.pending is not None and not _STATE.pending.done():
            return _STATE.pending
        future: Future[RayInfo] = Future()
        _STATE.pending = future

    def run() -> None:
        worker_logger = logging.getLogger(_WORKER_LOGGER)
        old = worker_logger.level
        worker_logger.setLevel(logging.ERROR)
        try:
            info = init_ray(address, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(e)
            return
        finally:
            worker_logger.setLevel(old)
        future.set_result(info)
        _starter_release.wait()  # keep Ray's per-thread state alive (see the module docstring)

    _starter_release.clear()
    thread = threading.Thread(target=run, name="adaptlab-ray-start", daemon=True)
    _STATE.starter = thread
    thread.start()
    return future


def is_embedded() -> bool:
    """Whether this process started the Ray it is connected to (the embedded local runtime: one
    node, which no autoscaler replaces; once its raylet is gone it cannot come back)."""
    return _STATE.started_here


def embedded_node_alive() -> bool | None:
    """Whether the raylet of the embedded Ray (:func:`is_embedded`) still runs: its process is a
    child of this one, so its death is known at once, where the GCS marks the node dead only after
    missing its heartbeats (12-30 s). ``None`` when unknown (not embedded, or Ray's internals
    differ from Ray 2.60's)."""
    if not _STATE.started_here:
        return None
    try:
        import ray

        node = ray._private.worker._global_node
        procs = node.all_processes[ray._private.ray_constants.PROCESS_TYPE_RAYLET]
        return any(p.process.poll() is None for p in procs)
    except Exception:  # noqa: BLE001 - a private interface: unknown rather than wrong
        return None


def on_shutdown(callback: Callable[[], None]) -> None:
    """Call ``callback()`` in :func:`shutdown_ray` before Ray stops (registered once per callable)."""
    if callback not in _shutdown_hooks:
        _shutdown_hooks.append(callback)


def on_make_room(callback: Callable[[], int]) -> None:
    """Call ``callback()`` in :func:`make_room`: it releases what it holds while idle and returns
    how many actors it stopped (registered once per callable)."""
    if callback not in _room_hooks:
        _room_hooks.append(callback)


def make_room() -> int:
    """Release every idle holder of Ray resources (:func:`on_make_room`); returns how many actors
    were stopped. Work in progress keeps its actors: a hook releases only what is idle."""
    stopped = 0
    for hook in list(_room_hooks):
        stopped += int(hook() or 0)
    return stopped


def shutdown_ray() -> None:
    """Disconnect from (and, for a local start, stop) Ray; no-op when not initialised.

    Waits for a background start (:func:`start_ray`) first, and calls the :func:`on_shutdown`
    callbacks (which release actor pools) before stopping.
    """
    if _STATE.pending is not None:
        try:
            _STATE.pending.result()
        except BaseException:  # noqa: BLE001 - a failed start leaves nothing to stop
            pass
        _STATE.pending = None
    import ray  # deferred: ray is heavy and only needed here

    for hook in list(_shutdown_hooks):
        try:
            hook()
        except Exception:  # noqa: BLE001 - releasing must never block the shutdown
            logging.getLogger(__name__).debug("shutdown hook %r failed", hook, exc_info=True)
    if ray.is_initialized():
        if _STATE.started_here:
            stop_monitor()
        ray.shutdown()
    _stop_watchdog()
    _starter_release.set()
    _STATE.started_here = False
    _STATE.dashboard_url = None


def _at_exit() -> None:
    """The interpreter's exit with the embedded Ray still up (registered by :func:`init_ray`, so it
    runs before Ray's own exit hook): after SIGTERM, :func:`shutdown_ray` at once (Ray's hook first
    sleeps 0.5 s so that the workers' last log lines print; a terminated command has none to wait
    for); otherwise only the monitor goes first (:func:`~adaptlab.runtime.local_ray.stop_monitor`) and Ray's hook stops the rest."""
    if not _STATE.started_here:
        return
    if sigterm_received():
        shutdown_ray()
    else:
        stop_monitor()


def _stop_watchdog() -> None:
    """Stop the watchdog of a local start (after Ray stopped: it sweeps what is left)."""
    watchdog, _STATE.watchdog = _STATE.watchdog, None
    if watchdog is not None:
        stop_watchdog(watchdog)


def cluster_has_gpus() -> bool:
    """Whether the Ray cluster this process is connected to has any GPU resource."""
    import ray  # deferred: ray is heavy and only needed here

    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised; call adaptlab.runtime.init_ray() first")
    return float(ray.cluster_resources().get("GPU", 0.0)) > 0
