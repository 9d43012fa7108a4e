"""SIGTERM like SIGINT (issue 28): the signal ``docker stop`` and schedulers send ends a command
with one "terminated" line and status 143, runs the same clean-up as Ctrl-C, and, with an
embedded Ray, no native stack dump (Ray's failure-signal handler printed one and aborted with
134) and nothing of the Ray session left soon after."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from adaptlab.runtime import TERMINATED_STATUS, Terminated, catch_sigterm
from adaptlab.runtime.watchdog import session_pids
from robustness.hostile import cli


def _load_per_core() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


TEARDOWN_BOUND_S = 5.0 if _load_per_core() <= 4.0 else 10.0
"""Issue 28's 5 s, asserted up to a load of 4 per core. Measured on 2 cores at load 4.8-6.4 (2.4-3.2
per core): Ray gone 0.6-2.2 s after SIGTERM in all six drivers (waiting in ray.get, just after it
was called, foreground start, background start starting and up). Before (7e901f3): 2.0-3.4 s at load
1.5-2, 4.0-4.4 s at load 11-14, 5.2-9.1 s with other suites beside it, and 3.6-4.0 s for a SIGTERM
inside a foreground ray.init at load 5: Ray's exit hook slept 0.5 s, its autoscaler monitor waited
1.0 s for the GCS Ray had already stopped, ray.get looked for signals once a second, and a failed
start's watchdog gave the session 1.5 s before sweeping it. Above 4 per core (a CI machine with
other suites beside it) the bound is 10 s."""

START_TEARDOWN_BOUND_S = 2 * TEARDOWN_BOUND_S
"""A SIGTERM that arrives while ray.init is still starting the GCS and raylet: the session's processes
are swept once the start has failed, which took more than 5 s in 3 of 16 runs of the foreground-1.5s
case at load ~1 per core on 2 cores (2026-11-29, beside a suite run; 6.9 s in the one whose figure was
kept, 1.9-2.0 s in the runs after), so the start cases are held to twice issue 28's bound; a study
that is running keeps the 5 s above."""

# The CLI with one command replaced: it starts the embedded Ray, runs a long task, says where its
# session is, and waits; the test then sends SIGTERM.
_DRIVER = textwrap.dedent(
    """
    import json, time
    import adaptlab.cli.results_cmd as command

    def run(args):
        import ray
        from adaptlab.runtime import init_ray
        init_ray(num_cpus=2)
        slow = ray.remote(lambda: time.sleep(120))
        ref = slow.remote()
        session = ray._private.worker._global_node.get_session_dir_path()
        print(json.dumps({"session": session}), flush=True)
        ray.get(ref)
        return 0

    command.run = run
    from adaptlab.cli import main
    raise SystemExit(main(["results", "--store", "unused"]))
    """
)


# The CLI with one command replaced: it starts the embedded Ray in the foreground ("fg", as an
# embedding pool does) or in a background thread ("bg", as start_ray does alongside a study's
# loading; "bg-up": waiting until it is up), says so, and goes on with Python work; the test sends
# SIGTERM while Ray starts or once it is up. RAY_TMPDIR is the test's own folder, so every process
# of the session is found even when the signal came before Ray named its session.
_STARTING_DRIVER = textwrap.dedent(
    """
    import sys, time
    import adaptlab.cli.results_cmd as command

    def run(args):
        from adaptlab.runtime import init_ray, start_ray
        print("starting", flush=True)
        if sys.argv[1] == "fg":
            init_ray(num_cpus=1)
        else:
            started = start_ray(num_cpus=1)
            if sys.argv[1] == "bg-up":
                started.result()
                print("up", flush=True)
        for _ in range(1200):
            sum(range(100_000))  # loading, in Python
            time.sleep(0.05)
        return 0

    command.run = run
    from adaptlab.cli import main
    raise SystemExit(main(["results", "--store", "unused"]))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "wait_s"),
    [("fg", 0.5), ("fg", 1.5), ("bg", 1.5), ("bg-up", 1.0)],
    ids=["foreground-0.5s", "foreground-1.5s", "background-1.5s", "background-up"],
)
def test_sigterm_while_ray_starts_is_one_line_143_and_leaves_no_ray(mode, wait_s):
    """Before: SIGTERM inside a foreground ray.init met Ray's own handler (exit status 15, no line);
    once a background start was up, Abseil's handler printed a native dump before 'terminated'."""
    root = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    env = {**os.environ, "ADAPTLAB_PROGRESS": "0", "RAY_TMPDIR": root}
    err_path = Path(root) / "driver.err"  # a file, not a pipe: a process left holding it cannot hide the exit
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", _STARTING_DRIVER, mode], stdout=subprocess.PIPE, stderr=err_file, text=True, env=env
        )
    left: dict[int, str] = {}
    try:
        for _ in range(2 if mode == "bg-up" else 1):
            assert proc.stdout.readline().strip(), err_path.read_text() if proc.poll() is not None else "no line"
        time.sleep(wait_s)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        while session_pids(root) and time.monotonic() < sent + START_TEARDOWN_BOUND_S + 10:
            time.sleep(0.1)
        gone = time.monotonic() - sent
        left = {pid: _command_line(pid) for pid in session_pids(root)}
        err = err_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        for pid in session_pids(root):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
    assert proc.returncode == 143, err
    assert "SIGTERM received" not in err and "PC: @" not in err and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["terminated"], err
    assert not left, f"Ray processes outlived the driver: {left}"
    print(f"{mode}: Ray session gone {gone:.1f} s after SIGTERM")
    assert gone <= START_TEARDOWN_BOUND_S, f"Ray torn down {gone:.1f} s after SIGTERM"


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def test_sigterm_raises_terminated_a_keyboard_interrupt():
    restore = catch_sigterm()
    try:
        with pytest.raises(Terminated) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode boundary
        assert isinstance(caught.value, KeyboardInterrupt)  # every Ctrl-C clean-up runs for it too
    finally:
        restore()


def test_the_cli_ends_a_terminated_command_with_one_line_and_143(monkeypatch):
    import adaptlab.cli.results_cmd as command

    def run(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return 0

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(command, "run", run)
    rc, out, err = cli(["results", "--store", "unused"])
    assert (rc, err) == (TERMINATED_STATUS, "terminated\n") and rc == 143 and out == ""
    assert signal.getsignal(signal.SIGTERM) == before  # the CLI leaves the handler as it found it


@pytest.mark.slow
@pytest.mark.parametrize("wait_s", [0.0, 2.0], ids=["at-once", "inside-ray.get"])
def test_sigterm_to_a_driver_with_embedded_ray_is_one_line_143_and_no_native_dump(tmp_path, wait_s):
    env = {**os.environ, "ADAPTLAB_PROGRESS": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _DRIVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    session = ""
    try:
        line = proc.stdout.readline()  # blocks until Ray is up and the task is submitted
        session = json.loads(line)["session"] if line.strip() else ""
        assert session, proc.stderr.read() if proc.poll() is not None else "no session line"
        time.sleep(wait_s)  # 2 s: the driver waits inside ray.get, which turns the signal into a KeyboardInterrupt
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
        exited = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    deadline = sent + TEARDOWN_BOUND_S
    while session_pids(session) and time.monotonic() < deadline + 10:
        time.sleep(0.1)
    gone = time.monotonic() - sent
    assert proc.returncode == 143, err
    assert "SIGTERM received" not in err and "Traceback" not in err and "PC: @" not in err, err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["terminated"], err
    assert not session_pids(session), "Ray processes outlived the driver"
    print(f"driver exited {exited:.1f} s, Ray session gone {gone:.1f} s after SIGTERM")
    assert gone <= TEARDOWN_BOUND_S, f"Ray torn down {gone:.1f} s after SIGTERM (driver exited after {exited:.1f} s)"


# The CLI with one command replaced: a SIGTERM whose handler runs inside an at-fork callback (as
# when it reaches ray.init while Ray forks its GCS or raylet), where Python can only print the
# handler's exception as "Exception ignored"; then ordinary work for 10 s. "ray" installs a handler
# like Ray's (sys.exit(15)) inside sigterm_kept, as ray.init does in the main thread.
_SWALLOWING_DRIVER = textwrap.dedent(
    """
    import contextlib, os, signal, sys, time
    import adaptlab.cli.results_cmd as command
    from adaptlab.runtime.signals import sigterm_kept

    def kill_me():
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10))  # a call: the handler runs here, inside the callback

    def run(args):
        os.register_at_fork(after_in_parent=kill_me)
        with sigterm_kept() if sys.argv[1] == "ray" else contextlib.nullcontext():
            if sys.argv[1] == "ray":
                signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        for _ in range(200):
            sum(range(10_000))
            time.sleep(0.05)
        print("ran on", file=sys.stderr, flush=True)
        return 0

    command.run = run
    from adaptlab.cli import main
    raise SystemExit(main(["results", "--store", "unused"]))
    """
)


@pytest.mark.parametrize("handler", ["ours", "ray"])
def test_a_sigterm_whose_exception_python_swallows_still_ends_the_command(handler):
    """CI once saw a SIGTERM sent during ray.init lost: Ray's handler raised SystemExit(15) inside
    logging's at-fork callback, Python printed "Exception ignored" and the command ran on for 60 s
    with status 0. Now the signal is delivered again and ends the command at once."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _SWALLOWING_DRIVER, handler],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ADAPTLAB_PROGRESS": "0"},
    )
    took = time.monotonic() - start
    assert (done.returncode, done.stderr) == (143, "terminated\n"), done.stderr
    assert took < 8, f"{took:.1f} s: the command ran on after the SIGTERM"
