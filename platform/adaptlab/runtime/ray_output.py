"""What Ray prints on the driver: no colour codes into a pipe or file, no node-death dumps.

Ray's driver prints two streams besides the driver's own lines (Ray 2.60, ``ray._private.worker``):

- the workers' stdout/stderr, forwarded by each node's log monitor (``ray.init(log_to_driver=...)``),
  each line behind a ``(pid=..., ip=...)`` prefix in ANSI colour;
- the error messages every component publishes to the drivers through the control store (the
  thread ``listen_error_messages``), printed on stdout behind a yellow ``(raylet)`` prefix.

When a node is lost, the second stream carries Ray's own reports of it: each agent of the node
(the dashboard agent and the runtime-env agent, ``ray._private.process_watcher``) publishes
``Raylet is terminated ... Last 20 lines of the Raylet logs`` (type ``raylet_died``: the same
20-line state dump twice), and the control store publishes ``The node with node id ... has been
marked dead`` (type ``node_removed``). Both are also written to Ray's log files (the agents' own
logs, ``dashboard_agent.log`` and ``runtime_env_agent.log`` of that node; the GCS's
``gcs_server.out``), and adaptlab says what the loss meant for its work in one line (the embedding
pool, :mod:`adaptlab.embedding.pool`; a training stage's retry, :mod:`adaptlab.adapt.train.jobs`).

:func:`configure_ray_output` (called by :func:`~adaptlab.runtime.init_ray` before Ray connects, and
again on every call) therefore

- sets ``RAY_COLOR_PREFIX=0`` (Ray's documented switch for uncoloured prefixes) when stdout or
  stderr is not a terminal, unless the user set it, and strips the colour codes Ray's driver logger
  puts into its own lines (the dashboard address of ``ray.init`` at INFO: :class:`PlainRecords`);
- replaces the driver's error-message listener by :func:`listen_error_messages`, which logs the
  message types of :data:`NODE_LOSS_ERRORS` on this module's logger at DEBUG (one line each) and
  prints every other message as Ray does (a real error of the user's job still shows).

Ray has no setting for the error stream (``log_to_driver`` covers the workers' output only), so
the listener is replaced on the private module; when that module does not look like Ray 2.60's,
nothing is replaced and Ray prints as it would.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from typing import Any

__all__ = [
    "COLOR_ENV",
    "NODE_LOSS_ERRORS",
    "PlainRecords",
    "configure_ray_output",
    "listen_error_messages",
    "plain_output",
]

log = logging.getLogger(__name__)

COLOR_ENV = "RAY_COLOR_PREFIX"
"""Ray's switch of the coloured ``(pid=...)`` / ``(raylet)`` prefixes on the driver: ``0`` plain."""

NODE_LOSS_ERRORS = frozenset({"raylet_died", "node_removed"})
"""Error-message types (``ray._private.ray_constants.RAYLET_DIED_ERROR`` and ``REMOVED_NODE_ERROR``)
that report a node's death: kept off the driver's output (they stay in Ray's log files)."""


RAY_DRIVER_LOGGER = "ray._private.worker"
"""The logger of Ray's driver code (``ray.init``'s lines), whose records :class:`PlainRecords` cleans."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")


class PlainRecords(logging.Filter):
    """A logging filter that removes ANSI colour codes (SGR sequences, ``ESC [ ... m``) from a record's
    message: Ray's driver logs the dashboard address in bold green (``colorama``) whatever the stream."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "\x1b[" in message:
            record.msg, record.args = _SGR.sub("", message), ()
        return True


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def plain_output() -> bool:
    """Whether this process writes to something other than a terminal (stdout or stderr is a pipe
    or a file): then nothing should carry ANSI colour codes."""
    return not (_is_terminal(sys.stdout) and _is_terminal(sys.stderr))


def configure_ray_output() -> None:
    """Plain prefixes when the output is not a terminal, and the driver's error messages through
    :func:`listen_error_messages` (see the module docstring). Safe to repeat; call it before
    ``ray.init`` so the listener Ray starts is ours."""
    if plain_output():
        if COLOR_ENV not in os.environ:
            os.environ[COLOR_ENV] = "0"
        driver_log = logging.getLogger(RAY_DRIVER_LOGGER)
        if not any(isinstance(f, PlainRecords) for f in driver_log.filters):
            driver_log.addFilter(PlainRecords())
    try:
        from ray._private import worker
    except ImportError:  # pragma: no cover - Ray's private module moved: it prints as it would
        return
    if getattr(worker, "listen_error_messages", None) is listen_error_messages:
        return
    if callable(getattr(worker, "listen_error_messages", None)) and callable(
        getattr(worker, "print_to_stdstream", None)
    ):
        worker.listen_error_messages = listen_error_messages  # looked up by name when ray.init connects


def listen_error_messages(worker: Any, threads_stopped: threading.Event) -> None:
    """The driver's error-message thread (Ray's ``listen_error_messages``, same arguments): poll the
    control store's error channel until ``threads_stopped``; messages for this job (or for every
    job) are printed as Ray prints them, except node-loss reports (:data:`NODE_LOSS_ERRORS`),
    which go to this module's logger at DEBUG as one line."""
    from ray import JobID
    from ray._private import ray_constants
    from ray._private import worker as ray_worker
    from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_initialized

    subscriber = worker.gcs_error_subscriber
    subscriber.subscribe()
    ours = frozenset([worker.current_job_id.binary(), JobID.nil().binary()])
    try:
        if _internal_kv_initialized():  # an autoscaler error from before the subscription, as Ray shows it
            early = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_ERROR)
            if early is not None:
                logging.getLogger(ray_worker.__name__).warning(early.decode())
        while not threads_stopped.is_set():
            _, error = subscriber.poll()
            if error is None or (error.get("job_id") is not None and error["job_id"] not in ours):
                continue
            message = str(error.get("error_message", ""))
            if error.get("type") in NODE_LOSS_ERRORS:
                log.debug(
                    "Ray reported (%s, kept in its log files): %s",
                    error.get("type"),
                    message.splitlines()[0] if message else "",
                )
                continue
            ray_worker.print_to_stdstream({"lines": [message], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    except (OSError, ConnectionError) as e:  # the control store went away: the session ends
        log.debug("Ray's error-message channel closed: %s", e)
