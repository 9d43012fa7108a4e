"""The embedded local Ray: one ``ray.init`` on 127.0.0.1 in this process, watched by a watchdog,
retried when it misses one of Ray's start windows (:func:`start_local`; :mod:`.cluster` decides
when to start and keeps the session).

The start uses

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
  when this process dies, SIGKILL included; :func:`adaptlab.runtime.shutdown_ray` stops it;
- a bounded retry of a start that misses one of Ray's start windows (:data:`START_TIMEOUTS`):
  on a busy machine (load 12-26 on 2 cores) the raylet sometimes does not register within
  Ray's hard-coded 30 s. Where Ray has a setting for the window, adaptlab uses a longer value
  (``$RAY_gcs_server_port_wait_time_s``, the GCS's windows: :data:`GCS_WAIT_S`); for the
  node's, it tears the half-started Ray down (``ray.shutdown()`` and the watchdog's sweep of the
  session's processes) and starts again, :data:`START_ATTEMPTS` attempts in all with one
  ``[adaptlab]`` line on stderr per retry, then fails with one line (a ``TimeoutError``) that
  says what to do. A connection to an address is never retried here;
- token authentication as Ray 2.60 sets it up for local clusters: on, with a token in
  ``~/.ray/auth_token`` (generated on first use). We never disable it; ``RAY_AUTH_MODE``
  set by the user is respected.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from adaptlab.runtime.signals import raise_if_terminated
from adaptlab.runtime.watchdog import Watchdog, start_watchdog, stop_watchdog

__all__ = [
    "GCS_WAIT_ENV",
    "GCS_WAIT_S",
    "LOCAL_HOST",
    "LOCAL_SYSTEM_CONFIG",
    "START_ATTEMPTS",
    "START_TIMEOUTS",
    "LocalStart",
    "available_cores",
    "local_num_cpus",
    "start_local",
    "start_timed_out",
    "stop_monitor",
]

LOCAL_SYSTEM_CONFIG: dict[str, Any] = {
    "prestart_worker_first_driver": False,
    "enable_metrics_collection": False,
    "get_check_signal_interval_milliseconds": 100,
}
"""Ray system settings of the embedded local start without dashboard (``_system_config``;
a ``_system_config`` passed to :func:`adaptlab.runtime.init_ray` replaces it). Measured on 2 shared cores, the
quickstart on Ray went from 1.32x to 1.24x its in-process time with it (medians of 2 pairs).
``ray.get`` looks for a signal every 100 ms instead of Ray's 1,000: a SIGTERM or Ctrl-C to a
driver waiting in it took up to 1.0 s to reach Python, now 0.1-0.17 s (load 5)."""


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


def local_num_cpus(cores: int | None = None) -> int:
    """Logical CPUs for the embedded runtime: ``max(4, 2 * cores)``."""
    n = cores if cores is not None else available_cores()
    return max(4, 2 * int(n))


@dataclass(frozen=True)
class LocalStart:
    """The resources and dashboard of the embedded local start, which a connection to a cluster
    cannot set: ``num_cpus`` (None: :func:`local_num_cpus`), ``num_gpus`` (may fake GPUs for
    tests: actors then get distinct ``CUDA_VISIBLE_DEVICES``), ``object_store_memory`` (bytes) and
    ``dashboard`` (bound to 127.0.0.1)."""

    num_cpus: int | None = None
    num_gpus: int | None = None
    object_store_memory: int | None = None
    dashboard: bool = False

    def given(self) -> list[str]:
        """The names of the settings given (a dashboard included)."""
        names = [k for k in ("num_cpus", "num_gpus", "object_store_memory") if getattr(self, k) is not None]
        return names + (["dashboard"] if self.dashboard else [])


def start_local(common: dict[str, Any], local: LocalStart) -> tuple[Any, Watchdog | None]:
    """``ray.init`` of the embedded runtime on 127.0.0.1, watched by a watchdog process that
    tears the session down if this process dies (:mod:`adaptlab.runtime.watchdog`); a start that
    misses one of Ray's start windows is torn down and tried again, :data:`START_ATTEMPTS` times
    in all (see the module docstring). Ray's context and the running start's watchdog."""
    if not local.dashboard:
        common.setdefault("_system_config", dict(LOCAL_SYSTEM_CONFIG))
    common.setdefault("_node_ip_address", LOCAL_HOST)
    kwargs = {
        "num_cpus": local.num_cpus if local.num_cpus is not None else local_num_cpus(),
        "num_gpus": local.num_gpus,
        "object_store_memory": local.object_store_memory,
        "include_dashboard": bool(local.dashboard),
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


def _start_local_once(kwargs: dict[str, Any]) -> tuple[Any, Watchdog | None]:
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
            stop_monitor()  # e.g. SIGTERM during the start: Ray's monitor would hold the teardown 1 s
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
    return ctx, watchdog


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


def stop_monitor() -> None:
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
