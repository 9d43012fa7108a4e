"""What Ray prints on the driver (adaptlab.runtime.ray_output), in-process with a stand-in for the
driver's error channel: node-loss reports go to the log at DEBUG, every other error message is
printed as Ray prints it, and no colour codes reach a stream that is not a terminal. The whole path
on a real three-node cluster is tests/runtime/test_study_node_loss.py (slow)."""

from __future__ import annotations

import logging
import threading

import pytest

from adaptlab.runtime import ray_output
from adaptlab.runtime.ray_output import COLOR_ENV, configure_ray_output, listen_error_messages

ray = pytest.importorskip("ray")

# The two texts as Ray 2.60 publishes them when a worker node's raylet is SIGKILLed (measured on a
# local cluster; the dump's 20 lines shortened to two).
RAYLET_DUMP = (
    "Raylet is terminated. Termination is unexpected. Possible reasons include: (1) SIGKILL by the user "
    "or system OOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or SIGBUS, (3) Other "
    "termination signals. Last 20 lines of the Raylet logs:\n    [state-dump] DebugString() time ms: 0\n"
    "    [state-dump] \n"
)
NODE_DEAD = (
    "The node with node id: 3848a2484a58facc6dd696a81d27a1351ecf917bbbe972e4a7a86a51 and address: 192.0.2.2 "
    "and node name: 192.0.2.2 has been marked dead because the detector has missed too many heartbeats from "
    "it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, etc.) \n\t(2) raylet has lagging "
    "heartbeats due to slow network or busy workload."
)
USER_ERROR = "A worker died or was killed while executing a task by an unexpected system error."


class _Subscriber:
    """The driver's error channel: hands out ``messages`` one per poll, then stops the listener."""

    def __init__(self, messages: list[dict], stop: threading.Event) -> None:
        self.messages, self.stop, self.subscribed = list(messages), stop, False

    def subscribe(self) -> None:
        self.subscribed = True

    def poll(self) -> tuple[bytes | None, dict | None]:
        if not self.messages:
            self.stop.set()
            return None, None
        return b"key", self.messages.pop(0)


class _Worker:
    def __init__(self, subscriber: _Subscriber) -> None:
        self.gcs_error_subscriber = subscriber
        self.current_job_id = ray.JobID.from_int(7)


def _listen(messages: list[dict]) -> _Subscriber:
    stop = threading.Event()
    subscriber = _Subscriber(messages, stop)
    listen_error_messages(_Worker(subscriber), stop)
    return subscriber


def _error(kind: str, text: str, job: int | None = None) -> dict:
    job_id = ray.JobID.nil().binary() if job is None else ray.JobID.from_int(job).binary()
    return {"job_id": job_id, "type": kind, "error_message": text, "timestamp": 0.0}


def test_node_loss_reports_go_to_the_log_and_other_errors_print_plain(monkeypatch, capsys, caplog):
    monkeypatch.setenv(COLOR_ENV, "0")
    caplog.set_level(logging.DEBUG, logger=ray_output.__name__)
    subscriber = _listen(
        [
            _error("raylet_died", RAYLET_DUMP),
            _error("raylet_died", RAYLET_DUMP),
            _error("node_removed", NODE_DEAD),
            _error("worker_died", USER_ERROR, job=7),
            _error("worker_died", "another job's worker", job=8),
        ]
    )
    printed = capsys.readouterr()
    assert subscriber.subscribed
    assert printed.out == f"(raylet) {USER_ERROR}\n" and printed.err == ""  # as Ray prints it, for this job only
    debug = [r.getMessage() for r in caplog.records if r.name == ray_output.__name__]
    assert debug == ["Ray reported (raylet_died, kept in its log files): " + RAYLET_DUMP.splitlines()[0]] * 2 + [
        "Ray reported (node_removed, kept in its log files): " + NODE_DEAD.splitlines()[0]
    ]
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == ray_output.__name__)


def test_with_colour_on_ray_colours_the_prefix_as_before(monkeypatch, capsys):
    """The same listener on a terminal: Ray's colour stays (the check above can fail)."""
    monkeypatch.setenv(COLOR_ENV, "1")
    _listen([_error("worker_died", "a second text (Ray folds a repeated one into its next summary)")])
    assert "\x1b[" in capsys.readouterr().out


def test_configure_sets_plain_prefixes_off_a_terminal_and_installs_the_listener(monkeypatch):
    from ray._private import worker

    monkeypatch.setattr(worker, "listen_error_messages", worker.listen_error_messages)  # restored afterwards
    driver = logging.getLogger(ray_output.RAY_DRIVER_LOGGER)
    monkeypatch.setattr(driver, "filters", list(driver.filters))
    monkeypatch.delenv(COLOR_ENV, raising=False)
    monkeypatch.setattr(ray_output, "plain_output", lambda: True)
    configure_ray_output()
    assert worker.listen_error_messages is listen_error_messages
    assert ray_output.os.environ[COLOR_ENV] == "0"
    monkeypatch.setenv(COLOR_ENV, "1")  # the user's choice is kept
    configure_ray_output()
    assert ray_output.os.environ[COLOR_ENV] == "1"
    monkeypatch.delenv(COLOR_ENV)
    monkeypatch.setattr(ray_output, "plain_output", lambda: False)  # a terminal: Ray's colours
    configure_ray_output()
    assert COLOR_ENV not in ray_output.os.environ


def test_ray_driver_lines_lose_their_colour_codes_off_a_terminal(monkeypatch, caplog):
    """ray.init's INFO line with the dashboard address, as Ray 2.60 logs it (bold green)."""
    driver = logging.getLogger(ray_output.RAY_DRIVER_LOGGER)
    monkeypatch.setattr(driver, "filters", [])  # restored afterwards
    monkeypatch.setattr(ray_output, "plain_output", lambda: True)
    monkeypatch.setenv(COLOR_ENV, "0")
    caplog.set_level(logging.INFO, logger=ray_output.RAY_DRIVER_LOGGER)
    monkeypatch.setattr(driver, "handlers", [caplog.handler])  # Ray's "ray" logger does not propagate
    configure_ray_output()
    configure_ray_output()  # one filter, however often
    assert sum(isinstance(f, ray_output.PlainRecords) for f in driver.filters) == 1
    driver.info(
        "Started a local Ray instance. View the dashboard at %s%s%s %s%s",
        "\x1b[1m",
        "\x1b[32m",
        "http://127.0.0.1:8265",
        "\x1b[39m",
        "\x1b[22m",
    )
    assert (
        caplog.records[-1].getMessage() == "Started a local Ray instance. View the dashboard at http://127.0.0.1:8265 "
    )


def test_plain_output_is_true_unless_both_streams_are_terminals(monkeypatch):
    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(ray_output.sys, "stdout", Tty())
    monkeypatch.setattr(ray_output.sys, "stderr", Tty())
    assert ray_output.plain_output() is False
    monkeypatch.setattr(ray_output.sys, "stderr", None)
    assert ray_output.plain_output() is True
