"""Nothing of an embedded Ray outlives its driver, and it listens on loopback only (issue 22).

The watchdog is first tested on stand-in processes (fast: no Ray); then a real local driver
(``init_ray`` + long tasks in a subprocess) is SIGKILLed and every process of its session must
be gone within 10 s; its listening sockets, recorded while it ran, must all be on loopback.
Processes are found by the session directory, as the watchdog finds them; only processes
started by these tests are ever signalled.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adaptlab.runtime.watchdog import alive, find_session_dir, kill_session, session_pids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study"))
from testkit.ray_cluster import is_loopback  # noqa: E402

KILL_BOUND_S = 10.0

# A stand-in for a Ray process: names nothing, keeps a log file of the session open (as agents and
# workers do) and ignores SIGTERM (as ray::DashboardAgent does once its raylet is gone).
_STUBBORN = textwrap.dedent(
    """
    import os, signal, time
    log = open(os.environ["STUB_LOG"], "a")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    for _ in range(600):
        time.sleep(0.1)
    """
)

# A stand-in driver: starts its watchdog, creates a session directory the way Ray names it, and
# two "Ray processes" in sessions of their own (so only the watchdog can stop them): a "GCS"
# whose command line names the session, and a stubborn "agent" that only writes into it.
_FAKE_DRIVER = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    from adaptlab.runtime.watchdog import start_watchdog, stop_watchdog
    temp_root, tell, finish = sys.argv[1], sys.argv[2] == "tell", sys.argv[3]
    watchdog = start_watchdog(temp_root)
    session = os.path.join(temp_root, f"session_2026-01-01_00-00-00_000000_{os.getpid()}")
    os.makedirs(os.path.join(session, "logs"))
    core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", f"--session-dir={session}"],
                            start_new_session=True)
    env = dict(os.environ, STUB_LOG=os.path.join(session, "logs", "agent.out"))
    agent = subprocess.Popen([sys.executable, "-c", sys.argv[4]], env=env,
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    agent.stdout.readline()
    if tell:
        watchdog.tell_session(session)
    print(json.dumps({"session": session, "children": [core.pid, agent.pid], "watchdog": watchdog.pid}), flush=True)
    if finish == "stop":
        status = stop_watchdog(watchdog)
        print(json.dumps({"status": status, "alive": [p.poll() is None for p in (core, agent)]}), flush=True)
    else:
        time.sleep(120)
    """
)


def _wait_until(condition, seconds: float) -> float | None:
    """Seconds until ``condition()`` held, or ``None`` if it did not within ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if condition():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def _stop(*procs: subprocess.Popen) -> None:
    """Clean up processes these tests started (already gone, normally)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def _kill_pids(pids: list[int]) -> None:
    """SIGKILL leftovers of a failed test (pids of processes that test's own driver started)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_kill_session_stops_what_names_or_writes_into_the_session_and_nothing_else(tmp_path):
    session = tmp_path / "session_x_1"
    (session / "logs").mkdir(parents=True)
    naming = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--session-dir={session}"])
    (session / "logs" / "r.out").write_text("x")
    reader = subprocess.Popen(  # like tail -f: reads the session's logs, is not of the session
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1]); print('ready', flush=True); time.sleep(60)",
            str(session / "logs" / "r.out"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    writing = subprocess.Popen(
        [sys.executable, "-c", _STUBBORN],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, STUB_LOG=str(session / "logs" / "w.out")),
    )
    other = subprocess.Popen(
        [sys.executable, "-c", _STUBBORN],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, STUB_LOG=str(tmp_path / "elsewhere.out")),
    )
    try:
        assert all(p.stdout.readline().strip() == "ready" for p in (writing, other, reader))
        assert session_pids(str(session)) == sorted([naming.pid, writing.pid])
        assert session_pids(str(session), files=False) == [naming.pid]  # command lines only
        assert kill_session(str(session), grace_s=0.5) == []
        assert naming.wait(timeout=5) == -signal.SIGTERM
        assert writing.wait(timeout=5) == -signal.SIGKILL  # ignored SIGTERM: killed after the grace
        assert other.poll() is None and reader.poll() is None  # not of the session: untouched
    finally:
        _stop(naming, writing, other, reader)


def test_find_session_dir_picks_this_drivers_newest_session(tmp_path):
    old = tmp_path / "session_2020-01-01_00-00-00_000000_4242"
    new = tmp_path / "session_2026-01-01_00-00-00_000000_4242"
    foreign = tmp_path / "session_2026-01-01_00-00-00_000000_42420"
    for path in (old, new, foreign):
        path.mkdir()
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    assert find_session_dir(str(tmp_path), 4242, since=time.time() - 60) == str(new)
    assert find_session_dir(str(tmp_path), 4243, since=0) is None


def test_watchdog_rejects_a_bad_poll_interval_in_one_line(capsys):
    from adaptlab.runtime.watchdog import main

    with pytest.raises(SystemExit) as e:
        main(["--driver-pid=1", "--temp-root=/nonexistent", "--poll=0"])
    assert e.value.code == 2
    assert "--poll must be a number of seconds > 0, got 0.0" in capsys.readouterr().err


class _Keep(logging.Handler):
    """Keeps every record it is given (on the logger itself: nothing another test did to the
    ``adaptlab`` logger, the root logger or propagation can hide one)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_no_watchdog_process_means_a_warning_not_a_failed_start(monkeypatch):
    """Any OSError from the process start (EAGAIN, ENOMEM, EMFILE) leaves Ray unwatched with one
    warning. No timing: the start is refused by the stub, and the record is read on the logger."""
    from adaptlab.runtime import watchdog

    def refuse(*args, **kwargs):
        raise OSError(errno.EAGAIN, "no process to spare")

    monkeypatch.setattr(watchdog.subprocess, "Popen", refuse)
    logger, keep = logging.getLogger(watchdog.__name__), _Keep()
    monkeypatch.setattr(logger, "disabled", False)
    before = logger.level
    logger.setLevel(logging.WARNING)
    logger.addHandler(keep)
    try:
        assert watchdog.start_watchdog("/tmp/ray") is None
    finally:
        logger.removeHandler(keep)
        logger.setLevel(before)
    lines = [r.getMessage() for r in keep.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and lines[0].startswith("could not start the Ray watchdog ("), lines
    assert "no process to spare" in lines[0] and "may outlive it" in lines[0]


def _run_fake_driver(tmp_path: Path, *, tell: bool, finish: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAKE_DRIVER, str(tmp_path), "tell" if tell else "quiet", finish, _STUBBORN],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, f"the fake driver exited early with {proc.wait(timeout=10)}"
    return proc, json.loads(line)


@pytest.mark.parametrize("tell", [True, False], ids=["session-told", "session-found"])
def test_watchdog_tears_down_the_session_of_a_killed_driver(tmp_path, tell):
    driver, info = _run_fake_driver(tmp_path, tell=tell, finish="sleep")
    try:
        pids = [*info["children"], info["watchdog"]]
        time.sleep(0.5)  # the watchdog is watching (it does not stop a live driver's session)
        assert all(alive(p) for p in pids)
        driver.kill()
        driver.wait(timeout=10)
        took = _wait_until(lambda: not any(alive(p) for p in pids), KILL_BOUND_S)
        assert took is not None, f"still running {KILL_BOUND_S} s after the driver's SIGKILL: {info}"
    finally:
        _stop(driver)
        _kill_pids([*info["children"], info["watchdog"]])


def test_stop_sweeps_leftovers_and_ends_the_watchdog(tmp_path):
    driver, info = _run_fake_driver(tmp_path, tell=True, finish="stop")
    try:
        result = json.loads(driver.stdout.readline())
        assert result == {"status": 0, "alive": [False, False]}
        assert not alive(info["watchdog"])
        assert driver.wait(timeout=10) == 0
    finally:
        _stop(driver)
        _kill_pids([*info["children"], info["watchdog"]])


def test_watchdog_exits_when_its_session_is_gone(tmp_path):
    """Ray stopped without shutdown_ray (``ray.shutdown()``): the watchdog leaves by itself."""
    session = tmp_path / f"session_2026-01-01_00-00-00_000000_{os.getpid()}"
    session.mkdir()
    core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)", str(session)])
    from adaptlab.runtime.watchdog import start_watchdog, stop_watchdog

    watchdog = start_watchdog(str(tmp_path))
    assert watchdog is not None
    try:
        watchdog.tell_session(str(session))
        core.wait(timeout=10)
        assert watchdog.process.wait(timeout=KILL_BOUND_S) == 0
    finally:
        stop_watchdog(watchdog, timeout_s=2)
        _stop(core)


# A real local driver: embedded Ray through init_ray, two long tasks running, then it reports its
# session, the pids of that session and every socket they listen on, and waits to be killed.
_RAY_DRIVER = textwrap.dedent(
    """
    import json, socket, time
    import psutil, ray
    from adaptlab.runtime import init_ray
    from adaptlab.runtime.watchdog import session_pids

    init_ray()

    @ray.remote(num_cpus=1)
    def long_task(seconds):
        time.sleep(seconds)

    refs = [long_task.remote(300) for _ in range(2)]
    session = ray._private.worker._global_node.get_session_dir_path()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len([p for p in session_pids(session)
                                               if "long_task" in " ".join(psutil.Process(p).cmdline())]) < 2:
        time.sleep(0.5)
    pids = session_pids(session, exclude=[])
    sockets = []
    for pid in pids:
        try:
            for c in psutil.Process(pid).net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN or (c.type == socket.SOCK_DGRAM and c.laddr):
                    sockets.append([pid, psutil.Process(pid).name(), c.laddr.ip, c.laddr.port])
        except psutil.Error:
            pass
    print(json.dumps({"session": session, "pids": pids, "sockets": sockets,
                      "tasks": [p for p in pids if "long_task" in " ".join(psutil.Process(p).cmdline())]}), flush=True)
    time.sleep(600)
    """
)


@pytest.fixture(scope="module")
def ray_driver():
    """A running local driver (see ``_RAY_DRIVER``) and what it reported; killed at the end."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _RAY_DRIVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    info: dict = {}
    try:
        line = _readline(proc, 240.0)
        assert line, f"the Ray driver exited with {proc.poll()} before reporting"
        info = json.loads(line)
        yield proc, info
    finally:
        _stop(proc)
        if info:
            _wait_until(lambda: not session_pids(info["session"]), KILL_BOUND_S)
            _kill_pids(session_pids(info["session"]))


def _readline(proc: subprocess.Popen, seconds: float) -> str:
    """One line of ``proc``'s stdout, waiting at most ``seconds``."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=seconds):
            return ""
    return proc.stdout.readline()


@pytest.mark.slow
def test_embedded_ray_listens_on_loopback_only(ray_driver):
    _, info = ray_driver
    sockets = info["sockets"]
    names = {name for _, name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names, sockets  # the sockets of the session were seen
    exposed = [s for s in sockets if not is_loopback(s[2])]
    assert not exposed, f"listening beyond loopback: {exposed}"


@pytest.mark.slow
def test_sigkill_of_a_local_driver_leaves_no_process_of_its_session(ray_driver):
    proc, info = ray_driver
    assert len(info["tasks"]) == 2 and len(info["pids"]) >= 6, info  # GCS, raylet, agents, tasks ...
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    took = _wait_until(lambda: not session_pids(info["session"]), KILL_BOUND_S)
    assert took is not None, f"left {KILL_BOUND_S} s after SIGKILL: {session_pids(info['session'])}"
    print(f"session gone {took:.1f} s after the driver's SIGKILL")
