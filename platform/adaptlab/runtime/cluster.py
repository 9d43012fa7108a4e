"""Starting or joining Ray: one call, safe to repeat.

``init_ray()`` with no address (and no ``RAY_ADDRESS`` in the environment) starts Ray inside
this process -- the embedded local runtime -- with

- ``max(4, 2 x cores)`` logical CPUs (:func:`local_num_cpus`): Ray Data with 2 logical CPUs
  and an actor pool of 2 stalls with no output (the actors hold every CPU slot and the read
  and output tasks never schedule); logical CPUs are scheduling slots, not threads, and the
  embedding actors set their own thread counts;
- the dashboard off (or, with ``dashboard=True``, bound to 127.0.0.1 only), and with it a small
  start: no worker processes prestarted for the driver and no metrics export
  (:data:`LOCAL_SYSTEM_CONFIG`; Ray's default prestarts one Python worker per logical CPU, which
  on 2 cores competes for seconds with the driver's own start-up work; a worker now starts when
  the first task or actor needs it);
- every server of the session on 127.0.0.1 (node address ``127.0.0.1``: GCS, raylet, workers,
  agents and the autoscaler's and dashboard's metrics servers; measured with ``ss -ltnp``), and
  a watchdog process (:mod:`adaptlab.runtime.watchdog`) that stops every process of the session
  when this process dies, SIGKILL included; :func:`shutdown_ray` stops it;
- a bounded retry of a start that misses one of Ray's start windows (:data:`START_TIMEOUTS`):
  on a busy machine (load 12-26 on 2 cores) the raylet sometimes does not register within
  Ray's hard-coded 30 s. Where Ray has a setting for the window, adaptlab uses a longer value
  (``$RAY_gcs_server_port_wait_time_s``, the GCS's windows: :data:`GCS_WAIT_S`); for the
  node's, it tears the half-started Ray down (``ray.shutdown()`` and the watchdog's sweep of the
  session's processes) and starts again, :data:`START_ATTEMPTS` attempts in all with one
  ``[adaptlab]`` line on stderr per retry, then fails with one line (a ``TimeoutError``) that
  says what to do. A connection to an address is never retried here;
- quiet logs (``WARNING``) and, by default, no Ray Data progress bars; uncoloured prefixes when the
  output is not a terminal and Ray's own reports of a lost node kept in its log files
  (:mod:`adaptlab.runtime.ray_output`, also for a connection to a cluster);
- token authentication as Ray 2.60 sets it up for local clusters: on, with a token in
  ``~/.ray/auth_token`` (generated on first use). We never disable it; ``RAY_AUTH_MODE``
  set by the user is respected.

With an address (``"auto"``, ``"host:port"``, ``"ray://host:10001"``, or ``RAY_ADDRESS``) it
connects instead. A token-protected cluster refuses a client whose ``RAY_AUTH_MODE`` is
unset even when the token is on disk, so when a token is available (``RAY_AUTH_TOKEN``,
``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``) and the mode is unset, we set
``RAY_AUTH_MODE=token`` for this process before connecting.

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
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.runtime.ray_output import configure_ray_output
from adaptlab.runtime.signals import raise_if_terminated, reclaim_sigterm, sigterm_kept, sigterm_received
from adaptlab.runtime.watchdog import Watchdog, start_watchdog, stop_watchdog

__all__ = [
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
]

LOCAL_SYSTEM_CONFIG: dict[str, Any] = {
    "prestart_worker_first_driver": False,
    "enable_metrics_collection": False,
    "get_check_signal_interval_milliseconds": 100,
}
"""Ray system settings of the embedded local start without dashboard (``_system_config``;
a ``_system_config`` passed to :func:`init_ray` replaces it). Measured on 2 shared cores, the
quickstart on Ray went from 1.32x to 1.24x its in-process time with it (medians of 2 pairs).
``ray.get`` looks for a signal every 100 ms instead of Ray's 1,000: a SIGTERM or Ctrl-C to a
driver waiting in it took up to 1.0 s to reach Python, now 0.1-0.17 s (load 5)."""


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
LOCAL_HOST = "127.0.0.1"
"""The address every server of the embedded Ray listens on."""
START_ATTEMPTS = 3
"""Attempts of the embedded local start when Ray reports a start time-out (:func:`start_timed_out`)."""
GCS_WAIT_ENV = "RAY_gcs_server_port_wait_time_s"
GCS_WAIT_S = 120
"""Seconds of Ray's GCS start windows under adaptlab (``$RAY_gcs_server_port_wait_time_s``, set by
the user: theirs). Ray's defaults are 30 s for the port file and about 20 s to connect; 120 s is
what Ray itself allows a GCS with an on-disk backend."""
START_TIMEOUTS: tuple[tuple[str, str, bool], ...] = (
    ("timed out during startup", "its node did not register within Ray's fixed 30 s", False),
    ("timed out waiting for file", "its GCS did not publish its port in time", True),
    ("failed to start gcs", "its GCS did not answer in time", True),
)
"""How Ray 2.60 reports a start window missed (lower-case text of the error, what it means, whether
``$RAY_gcs_server_port_wait_time_s`` sets that window):
``ray._private.node.Node`` raises ``Exception("The current node timed out during startup...")``
after its hard-coded 30 s wait for the raylet to register, ``RuntimeError("Timed out waiting for
file .../gcs_server_port_...")`` (``ray._raylet.wait_for_persisted_port``) and ``RuntimeError(
"Failed to start GCS...")`` for the GCS windows. tests/runtime/test_ray_start_retry.py checks
these texts against the installed Ray."""


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


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


def local_num_cpus(cores: int | None = None) -> int:
    """Logical CPUs for the embedded runtime: ``max(4, 2 * cores)``."""
    n = cores if cores is not None else available_cores()
    return max(4, 2 * int(n))


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


def _auth_mode() -> str:
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode  # type: ignore[attr-defined]  # private

        return "token" if get_authentication_mode() == AuthenticationMode.TOKEN else "disabled"
    except Exception:  # noqa: BLE001 - private API; absence must not break init
        return os.environ.get("RAY_AUTH_MODE", "unknown").lower()


def _token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path and Path(path).expanduser().is_file():
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


def _set_token_mode_for_client() -> None:
    if "RAY_AUTH_MODE" in os.environ or not _token_available():
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    try:  # refresh Ray's cached config so this process sees the mode (what ray.init does itself)
        from ray._raylet import Config  # type: ignore[attr-defined]  # private, not in Ray's stub

        Config.initialize("")
    except Exception:  # noqa: BLE001 - private API
        pass


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
        auth_mode=_auth_mode(),
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
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    object_store_memory: int | None = None,
    dashboard: bool = False,
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
        num_cpus, num_gpus, object_store_memory: resources of a *local* start (``num_gpus``
            can fake GPUs for tests: actors then get distinct ``CUDA_VISIBLE_DEVICES``).
            ``num_cpus`` defaults to :func:`local_num_cpus`. Not allowed with an address.
        dashboard: start the dashboard, bound to 127.0.0.1 (local start only).
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
    _check_init_args(
        address, num_cpus=num_cpus, num_gpus=num_gpus, object_store_memory=object_store_memory, dashboard=dashboard
    )
    if ray.is_initialized():
        reclaim_sigterm()  # Ray, started in another thread, took SIGTERM over
        return ray_info()
    common: dict[str, Any] = {
        "namespace": namespace,
        "runtime_env": runtime_env,
        "logging_level": logging.WARNING if quiet else logging.INFO,
        **ray_kwargs,
    }
    auth_logger = logging.getLogger(_AUTH_LOGGER)
    old_level = auth_logger.level
    if quiet:
        auth_logger.setLevel(logging.ERROR)
    with sigterm_kept():  # ray.init takes SIGTERM over, in any thread (adaptlab.runtime.signals)
        try:
            if address:
                ctx = _connect(address, common)
                _STATE.started_here = False
            else:
                ctx = _start_local(
                    common,
                    num_cpus=num_cpus,
                    num_gpus=num_gpus,
                    object_store_memory=object_store_memory,
                    dashboard=dashboard,
                )
                _STATE.started_here = True
        finally:
            auth_logger.setLevel(old_level)
    _STATE.dashboard_url = getattr(ctx, "dashboard_url", None) or None
    _configure_data(progress_bars)
    if _STATE.started_here:
        atexit.unregister(_at_exit)  # once per process, however many starts
        atexit.register(_at_exit)  # after Ray's own (registered when ray was imported): runs before it
    return ray_info()


def _start_local(
    common: dict[str, Any],
    *,
    num_cpus: int | None,
    num_gpus: int | None,
    object_store_memory: int | None,
    dashboard: bool,
) -> Any:
    """``ray.init`` of the embedded runtime on 127.0.0.1, watched by a watchdog process that
    tears the session down if this process dies (:mod:`adaptlab.runtime.watchdog`); a start that
    misses one of Ray's start windows is torn down and tried again, :data:`START_ATTEMPTS` times
    in all (see the module docstring)."""
    if not dashboard:
        common.setdefault("_system_config", dict(LOCAL_SYSTEM_CONFIG))
    common.setdefault("_node_ip_address", LOCAL_HOST)
    kwargs = {
        "num_cpus": num_cpus if num_cpus is not None else local_num_cpus(),
        "num_gpus": num_gpus,
        "object_store_memory": object_store_memory,
        "include_dashboard": bool(dashboard),
        "dashboard_host": LOCAL_HOST,
        **common,
    }
    with _gcs_start_window():
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return _start_local_once(kwargs)
            except Exception as e:  # noqa: BLE001 - only Ray's start time-outs are retried
                if not start_timed_out(e):
                    raise
                if attempt == START_ATTEMPTS:
                    raise TimeoutError(_start_failed_message(e)) from e
                print(
                    f"[adaptlab] Ray's local start timed out ({_why(e)}; attempt {attempt} of {START_ATTEMPTS}, "
                    f"{_load_note()}): stopped what it had started, starting it again",
                    file=sys.stderr,
                    flush=True,
                )
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _start_local_once(kwargs: dict[str, Any]) -> Any:
    """One ``ray.init`` of the embedded runtime. If it fails, whatever it started is stopped
    before the error propagates: ``ray.shutdown()`` (Ray's own state and the processes of a node
    it had registered), then the watchdog's sweep of the session's processes (a node that never
    registered is unknown to ``ray.shutdown()``; its GCS and raylet would live until this process
    exits)."""
    import ray  # deferred: ray is heavy and only needed here

    watchdog = start_watchdog(_ray_temp_root(kwargs))
    try:
        with _loopback_node_ip(kwargs["_node_ip_address"]):
            ctx = ray.init(address="local", **kwargs)  # always a new in-process Ray, never a cluster started here
        raise_if_terminated()  # a SIGTERM whose exception Python swallowed while Ray started
    except BaseException:
        try:
            _stop_monitor()  # e.g. SIGTERM during the start: Ray's monitor would hold the teardown 1 s
            ray.shutdown()
        except Exception:  # noqa: BLE001 - the start's own error is the one to report
            logging.getLogger(__name__).debug("ray.shutdown() after a failed start failed", exc_info=True)
        if watchdog is not None:
            stop_watchdog(watchdog, patient=False)  # what ray.shutdown() did not stop is not stopping by itself
        raise
    if watchdog is not None:
        session = getattr(ctx, "address_info", {}).get("session_dir")
        if session:
            watchdog.tell_session(str(session))
        _STATE.watchdog = watchdog
    return ctx


def start_timed_out(error: BaseException) -> bool:
    """Whether ``error`` is Ray's report that the embedded start missed one of its start windows
    (the texts of :data:`START_TIMEOUTS`, or a ``TimeoutError``), as opposed to a bad argument,
    a broken installation or a refused token (``Failed to start GCS`` whose last connection error
    is Ray's ``AuthenticationError``), which are not retried."""
    if isinstance(error, TimeoutError):
        return True
    text = str(error).lower()
    if "authentication" in text:  # "Failed to start GCS ... AuthenticationError": the token, not the time
        return False
    return any(marker in text for marker, _, _ in START_TIMEOUTS)


def _why(error: BaseException) -> str:
    """Which start window ``error`` reports, in words."""
    text = str(error).lower()
    return next((why for marker, why, _ in START_TIMEOUTS if marker in text), "it timed out")


def _load_note() -> str:
    """``load average 12.3 on 2 cores`` (the 1-minute average), or ``""`` where unknown."""
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {available_cores()} cores"
    except OSError:  # pragma: no cover - no load average on this platform
        return f"{available_cores()} cores"


def _start_failed_message(error: BaseException) -> str:
    """The one line of a start that timed out in every attempt: what happened and what to do."""
    text = str(error).lower()
    gcs = any(marker in text for marker, _, gcs_window in START_TIMEOUTS if gcs_window)
    knob = (
        f"; ${GCS_WAIT_ENV} (seconds, adaptlab's default {GCS_WAIT_S}) lengthens that window"
        if gcs
        else "; Ray waits a fixed 30 s for its node to register (Ray has no setting for that window)"
    )
    first = " ".join(str(error).split())[:200]
    return (
        f"Ray's local start timed out in all {START_ATTEMPTS} attempts ({_why(error)}; {_load_note()}){knob}. "
        "Run on a less loaded machine (or when this one is quieter), without Ray (adaptlab run --no-ray, "
        "or [embedding] use_ray = false), or on a running cluster (--address). Ray said: " + first
    )


@contextmanager
def _gcs_start_window() -> Iterator[None]:
    """``$RAY_gcs_server_port_wait_time_s`` = :data:`GCS_WAIT_S` while the embedded Ray starts,
    unless the user set it: Ray's own knob for its GCS start windows (the wait for the GCS port
    file, 30 s by default, and for the first connection, about 20 s). Restored afterwards."""
    if os.environ.get(GCS_WAIT_ENV, "").strip():
        yield
        return
    os.environ[GCS_WAIT_ENV] = str(GCS_WAIT_S)
    try:
        yield
    finally:
        os.environ.pop(GCS_WAIT_ENV, None)


def _ray_temp_root(common: dict[str, Any]) -> str:
    """Where Ray creates this start's session directory (Ray's own default rule)."""
    if common.get("_temp_dir"):
        return str(common["_temp_dir"])
    base = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None)
    return os.path.join(base or "/tmp", "ray")


@contextmanager
def _loopback_node_ip(node_ip: str) -> Iterator[None]:
    """Let ``ray.init(_node_ip_address="127.0.0.1")`` keep the loopback address.

    Ray 2.60's ``ray.init`` replaces a loopback ``_node_ip_address`` by the machine's external
    address unless its constant ``ENABLE_RAY_CLUSTER`` is false (the Windows/macOS rule); with
    the external address every gRPC server, the agents and the metrics servers listen on all
    interfaces or on that address. With a loopback node address they all listen on 127.0.0.1
    (measured; tests/runtime/test_driver_lifetime.py)."""
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - private module moved: Ray picks the address itself
        yield
        return
    if node_ip not in ("127.0.0.1", "localhost") or not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    old = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old


def _check_init_args(
    address: str | None, *, num_cpus: int | None, num_gpus: int | None, object_store_memory: int | None, dashboard: bool
) -> None:
    given = {
        k: v
        for k, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus), ("object_store_memory", object_store_memory))
        if v is not None
    }
    if address and (given or dashboard):
        raise ConfigError(
            f"init_ray(address={address!r}): {', '.join(given) or 'dashboard'} can only be set when "
            "starting a local Ray; a cluster brings its own resources and dashboard"
        )
    for key, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"init_ray: {key} must be a non-negative integer, got {value!r}")


def _connect(address: str, common: dict[str, Any]) -> Any:
    """``ray.init(address=...)`` with our token mode; unreachable or refusing clusters -> ConfigError."""
    import ray  # deferred: ray is heavy and only needed here

    _set_token_mode_for_client()
    try:
        return ray.init(address=address, **common)
    except (ConnectionError, RuntimeError, TimeoutError) as e:
        raise ConfigError(
            f"cannot connect to the Ray cluster at {address!r}: {e}. Check the address (the head "
            "node's GCS port, 6379 by default, or ray://host:10001), and for token authentication "
            "make the cluster's token available here: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
            "~/.ray/auth_token (on the head node: `ray get-auth-token`)"
        ) from e


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
            _stop_monitor()
        ray.shutdown()
    _stop_watchdog()
    _starter_release.set()
    _STATE.started_here = False
    _STATE.dashboard_url = None


def _stop_monitor() -> None:
    """SIGKILL the autoscaler monitor of the embedded Ray (:func:`is_embedded`, or a local start
    that failed) before ``ray.shutdown()`` stops the rest. Measured with Ray 2.60:
    ``ray.shutdown()`` stops the GCS before the monitor, whose SIGTERM handler then tries to
    report its end to that GCS until Ray kills it one second later (1.0 of the 2.1 s of a
    teardown at load 2); a single node has nothing for an autoscaler to do, and SIGKILL makes it
    report nothing. A no-op when this process started no node or Ray's internals differ (the
    monitor then ends as before)."""
    try:
        import ray

        node = ray._private.worker._global_node
        monitors = node.all_processes.get(ray._private.ray_constants.PROCESS_TYPE_MONITOR, [])
        for info in monitors:
            if info.process.poll() is None:
                info.process.kill()
    except Exception:  # noqa: BLE001 - a private interface: Ray stops the monitor itself
        logging.getLogger(__name__).debug("could not stop Ray's monitor first", exc_info=True)


def _at_exit() -> None:
    """The interpreter's exit with the embedded Ray still up (registered by :func:`init_ray`, so it
    runs before Ray's own exit hook): after SIGTERM, :func:`shutdown_ray` at once (Ray's hook first
    sleeps 0.5 s so that the workers' last log lines print; a terminated command has none to wait
    for); otherwise only the monitor goes first (:func:`_stop_monitor`) and Ray's hook stops the rest."""
    if not _STATE.started_here:
        return
    if sigterm_received():
        shutdown_ray()
    else:
        _stop_monitor()


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
