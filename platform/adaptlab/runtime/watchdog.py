"""Nothing of an embedded Ray outlives its driver: a watchdog process per local Ray start.

Ray ties the GCS, raylet, log monitor and dashboard of ``ray.init()`` to the driver
(``PR_SET_PDEATHSIG``), but not what the raylet starts: measured with Ray 2.60, after a SIGKILL
of the driver ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent`` stay alive (and ignore
SIGTERM), and running tasks go on for seconds. :func:`start_watchdog` (called by
:func:`adaptlab.runtime.init_ray` before each local start attempt) runs this file (``python -I``,
standard library only) as a child in its own session (a Ctrl-C or a kill of the driver's
process group does not reach it). It

- polls its parent pid (bounded sleeps of :data:`POLL_S`); when the driver is gone it stops
  every process of that Ray session: SIGTERM, at most :data:`GRACE_S` seconds, SIGKILL, in at
  most :data:`KILL_ROUNDS` rounds (a dying raylet may still start a worker), then exits;
- exits when the session is over (its GCS and raylet are gone: ``ray.shutdown()`` without
  :func:`stop_watchdog`), and on ``stop`` (sent by :func:`adaptlab.runtime.shutdown_ray` after
  Ray stopped) or ``stop now`` (after a start attempt that failed: no grace before the sweep),
  in both cases after stopping what the session left behind. A watchdog that has not done so within :func:`stop_watchdog`'s bound is
  killed and the driver sweeps the session itself (:meth:`Watchdog.sweep`).

A process belongs to the session when an option of its command line points into the session
directory (``<temp>/session_<date>_<driver pid>``: GCS, raylet, log monitor) or it holds a file
in it open for writing (every Ray process, tasks and agents included, writes its logs there; a
worker's ``ray::name`` title hides its command line, and a child a task starts inherits its log
files). A reader of those logs (``tail -f``, an editor) is not of the session.
Processes are found through ``/proc`` (Linux); elsewhere the watchdog is not started. Nothing
is found by name, and ``ray stop`` (which stops every Ray of the user) is never used.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["POLL_S", "Watchdog", "kill_session", "session_pids", "start_watchdog", "stop_watchdog"]

POLL_S = 0.25
"""Seconds between two looks at the driver."""
GRACE_S = 1.5
"""Seconds a session process gets between SIGTERM and SIGKILL."""
KILL_ROUNDS = 3
SESSION_CHECK_S = 2.0
"""Seconds between two checks that the session still has processes."""
MAX_LIFETIME_S = 30 * 24 * 3600.0
"""The watchdog's own bound: a driver running for longer than 30 days is not watched after."""
_PROC = Path("/proc")


def _cmdline(pid: int) -> bytes:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped, does not)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] not in (["Z"], ["X"])


def _writes_into(pid: int, prefix: str) -> bool:
    """Whether ``pid`` holds a file under ``prefix`` open for writing (a reader such as
    ``tail -f`` of a Ray log is not of the session)."""
    proc = _PROC / str(pid)
    try:
        names = os.listdir(proc / "fd")
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(proc / "fd" / name).startswith(prefix) and _open_for_writing(proc / "fdinfo" / name):
                return True
        except OSError:
            continue
    return False


def _open_for_writing(fdinfo: Path) -> bool:
    for line in fdinfo.read_text().splitlines():
        if line.startswith("flags:"):
            return int(line.split()[1], 8) & (os.O_WRONLY | os.O_RDWR) != 0
    return False


def _names_session(pid: int, needle: str) -> bool:
    """Whether an option of ``pid``'s command line points into the session (``--session-dir=``,
    ``--log_dir=``, ``--raylet_socket_name=`` ... of Ray's GCS, raylet and monitors)."""
    return b"=" + needle.encode() in _cmdline(pid)


def session_pids(session_dir: str, *, exclude: Iterable[int] = (), files: bool = True) -> list[int]:
    """Running processes of the Ray session in ``session_dir`` (see the module docstring);
    ``files=False`` looks at command lines only (cheap: the GCS and the raylet)."""
    needle = session_dir.rstrip("/")
    skip = {os.getpid(), *exclude}
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        pid = int(entry.name)
        if _names_session(pid, needle) or (files and _writes_into(pid, needle + "/")):
            if alive(pid):
                found.append(pid)
    return sorted(found)


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pids = [p for p in pids if alive(p)]
        if not pids:
            break
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def kill_session(
    session_dir: str, *, exclude: Iterable[int] = (), grace_s: float = GRACE_S, rounds: int = KILL_ROUNDS
) -> list[int]:
    """Stop every process of the session: SIGTERM, ``grace_s`` seconds, SIGKILL, in at most
    ``rounds`` rounds; returns the pids still running (none, normally)."""
    excluded = list(exclude)
    for _ in range(rounds):
        pids = session_pids(session_dir, exclude=excluded)
        if not pids:
            return []
        _signal_all(pids, signal.SIGTERM)
        left = _wait_gone(pids, grace_s)
        _signal_all(left, signal.SIGKILL)
        _wait_gone(left, grace_s)
    return session_pids(session_dir, exclude=excluded)


def find_session_dir(temp_root: str, driver_pid: int, since: float) -> str | None:
    """The session directory a driver created in ``temp_root`` (Ray names it
    ``session_<date>_<pid>``) no earlier than ``since`` (epoch seconds), if any."""
    best: tuple[float, str] | None = None
    for path in glob.glob(os.path.join(temp_root, f"session_*_{driver_pid}")):
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if mtime >= since - 5 and (best is None or mtime > best[0]):
            best = (mtime, path)
    return best[1] if best else None


@dataclass
class _State:
    """What the watchdog loop knows."""

    driver_pid: int
    temp_root: str
    started: float
    session_dir: str | None = None
    stdin_fd: int = 0
    stdin_open: bool = True
    pending: bytes = b""
    core_pids: list[int] = field(default_factory=list)
    next_check: float = 0.0


def _read_command(state: _State, timeout: float) -> str | None:
    """One line from the driver (``session PATH`` or ``stop``), waiting at most ``timeout``."""
    if b"\n" not in state.pending:
        if not state.stdin_open:
            time.sleep(timeout)
            return None
        ready, _, _ = select.select([state.stdin_fd], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(state.stdin_fd, 4096)
        state.pending += chunk
        state.stdin_open = bool(chunk)  # end of file: the driver closed its end or died
        if b"\n" not in state.pending:
            return None
    line, state.pending = state.pending.split(b"\n", 1)
    return line.decode(errors="replace").strip()


def _session_gone(state: _State) -> bool:
    """Whether a known session has no process left (checked every :data:`SESSION_CHECK_S`)."""
    now = time.monotonic()
    if state.session_dir is None or now < state.next_check:
        return False
    state.next_check = now + SESSION_CHECK_S
    state.core_pids = [p for p in state.core_pids if alive(p)]
    if state.core_pids:
        return False
    state.core_pids = session_pids(state.session_dir, exclude=[state.driver_pid], files=False)
    return not state.core_pids


def _end(state: _State, *, driver_gone: bool, patient: bool = True) -> int:
    session = state.session_dir or find_session_dir(state.temp_root, state.driver_pid, state.started)
    if session is None:
        return 0
    if patient and not driver_gone:  # Ray was stopped normally: give its processes a moment to exit by themselves
        _wait_gone(session_pids(session, exclude=[state.driver_pid]), GRACE_S)
    left = kill_session(session, exclude=[state.driver_pid])
    return 1 if left else 0


def watch(
    driver_pid: int,
    temp_root: str,
    *,
    poll_s: float = POLL_S,
    max_s: float = MAX_LIFETIME_S,
    since: float | None = None,
) -> int:
    """The watchdog loop (run in the child); returns its exit status. ``since``: when the driver
    started the watchdog (epoch seconds; default now), the earliest a session of this start can
    have been created (a session the driver never named is looked for from then on)."""
    state = _State(driver_pid=driver_pid, temp_root=temp_root, started=time.time() if since is None else since)
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        if os.getppid() != driver_pid:
            return _end(state, driver_gone=True)
        command = _read_command(state, poll_s)
        if command in ("stop", "stop now"):
            return _end(state, driver_gone=False, patient=command == "stop")
        if command and command.startswith("session "):
            state.session_dir = command.split(" ", 1)[1]
        if _session_gone(state):  # Ray stopped without a word to us: sweep what it left
            return _end(state, driver_gone=False)
    return 0


@dataclass
class Watchdog:
    """The driver's handle on its watchdog process (and what the watchdog was told: the temp root,
    when it was started, the session once named), so the driver can sweep in its place."""

    process: subprocess.Popen
    temp_root: str = ""
    since: float = 0.0
    session_dir: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def tell_session(self, session_dir: str) -> None:
        """Name the session directory once Ray has started."""
        self.session_dir = session_dir
        self._send(f"session {session_dir}")

    def sweep(self) -> list[int]:
        """In the driver: stop what is left of this start's session (what the watchdog does on
        ``stop``); returns the pids still running (none, normally)."""
        session = self.session_dir or (
            find_session_dir(self.temp_root, os.getpid(), self.since) if self.temp_root else None
        )
        return kill_session(session, exclude=[os.getpid()]) if session else []

    def _send(self, line: str) -> None:
        if self.process.stdin is None:
            return
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the watchdog has exited already


def start_watchdog(temp_root: str) -> Watchdog | None:
    """Start the watchdog of this driver (``None`` where there is no ``/proc``)."""
    if not _PROC.is_dir() or not (_PROC / str(os.getpid())).is_dir():
        return None
    since = time.time()
    try:
        process = subprocess.Popen(
            [*_command(), f"--driver-pid={os.getpid()}", f"--temp-root={temp_root}", f"--since={since:.3f}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
            close_fds=True,
        )
    except OSError as e:  # no process to spare must not stop the study: Ray runs unwatched
        logging.getLogger(__name__).warning(
            "could not start the Ray watchdog (%s): if this process is killed, its Ray processes may outlive it", e
        )
        return None
    return Watchdog(process, temp_root, since)


def _command() -> list[str]:
    """How the watchdog runs: this file as a script in isolated mode (``python -I``: the standard
    library only, which is all it imports, so it is watching within the interpreter's start-up, not
    after adaptlab's imports: on 2 cores at load 40 that is 1.5 s instead of 3), else the module."""
    here = Path(__file__)
    if here.suffix == ".py" and here.is_file():
        return [sys.executable, "-I", str(here)]
    return [sys.executable, "-m", "adaptlab.runtime.watchdog"]  # pragma: no cover - installed without sources


def stop_watchdog(watchdog: Watchdog, *, timeout_s: float = 10.0, patient: bool = True) -> int | None:
    """Tell the watchdog that Ray stopped; wait at most ``timeout_s`` for it to sweep and exit;
    returns its exit status. A watchdog that has not finished by then (on a busy machine it may not
    even have started) is killed and this process sweeps the session itself, so nothing of the
    session is left either way. ``patient=False`` (``stop now``: a start that failed, whose
    processes ``ray.shutdown()`` did not stop) sweeps at once, without first giving the session's
    processes :data:`GRACE_S` to exit by themselves (1.5 of the 3.2 s between a SIGTERM inside
    ``ray.init`` and the driver's exit at load 5)."""
    watchdog._send("stop" if patient else "stop now")
    try:
        if watchdog.process.stdin is not None:
            watchdog.process.stdin.close()
    except OSError:
        pass
    try:
        return watchdog.process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        watchdog.process.kill()
        status = watchdog.process.wait(timeout=5)
    watchdog.sweep()
    return status


def main(argv: list[str] | None = None) -> int:
    """``python -m adaptlab.runtime.watchdog --driver-pid PID --temp-root DIR``."""
    parser = argparse.ArgumentParser(prog="python -m adaptlab.runtime.watchdog", description=__doc__.split("\n")[0])
    parser.add_argument("--driver-pid", type=int, required=True, help="the driver whose Ray to tear down")
    parser.add_argument("--temp-root", required=True, help="Ray's temp dir, where the session dir appears")
    parser.add_argument("--poll", type=float, default=POLL_S, help="seconds between looks at the driver")
    parser.add_argument(
        "--since", type=float, default=None, help="epoch seconds the driver started this watchdog (default: now)"
    )
    args = parser.parse_args(argv)
    if not args.poll > 0:
        parser.error(f"--poll must be a number of seconds > 0, got {args.poll}")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the driver is not ours
    return watch(args.driver_pid, args.temp_root, poll_s=args.poll, since=args.since)


if __name__ == "__main__":
    sys.exit(main())
