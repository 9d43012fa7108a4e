"""Real Ray nodes for the tests that need a cluster (submit, multinode, node loss) and bench_scale.

``ray start`` on 127.0.0.1 only (every listener on loopback: testkit/ray_start_loopback.py;
drivers need :func:`loopback_env`), every port free (other Ray instances on this machine hold the
defaults), in a temp dir of the test's own; stopped by pid: the processes whose command line
names that temp dir or the head's GCS address (``ray stop`` would stop every Ray on the machine,
other users' runs included). Every wait is bounded in rounds and in seconds.
"""

from __future__ import annotations

import ipaddress
import os
import queue
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from adaptlab.runtime.watchdog import session_pids
from testkit.ray_start_loopback import LOOPBACK_ENV

HOST = "127.0.0.1"
_LOOPBACK_START = Path(__file__).resolve().with_name("ray_start_loopback.py")


def is_loopback(ip: str) -> bool:
    """Whether a listening address is loopback (``127.0.0.1``, ``::1``, ``::ffff:127.0.0.1``)."""
    address = ipaddress.ip_address(ip)
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def node_ports() -> list[str]:
    """Every per-node port of ``ray start`` on a free port: other Ray instances on this machine
    (and the second node of a test) hold the defaults, and a head whose dashboard agent lost its
    port answers every job submission "No available agent"."""
    return [
        f"--{name}={free_port()}"
        for name in (
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "metrics-export-port",
            "runtime-env-agent-port",
            "node-manager-port",
            "object-manager-port",
        )
    ]


@dataclass(frozen=True)
class HeadPorts:
    """The head node's GCS and dashboard ports, chosen free before it starts (so that its
    processes can be found by the GCS address even when ``ray start`` fails half-way)."""

    gcs: int = field(default_factory=free_port)
    dashboard: int = field(default_factory=free_port)

    @property
    def dashboard_address(self) -> str:
        return f"http://{HOST}:{self.dashboard}"

    @property
    def gcs_address(self) -> str:
        return f"{HOST}:{self.gcs}"


def loopback_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with :data:`LOOPBACK_ENV`: give it to every node and every driver of a test cluster
    (a driver without it resolves ``127.0.0.1:PORT`` to the external address, where the loopback-only
    GCS does not listen)."""
    return {**env, **LOOPBACK_ENV}


def _ray_start(args: list[str], temp_dir: Path, env: Mapping[str, str], num_cpus: int) -> subprocess.CompletedProcess:
    """``ray start ARGS`` on 127.0.0.1 with free node ports, every listener on loopback
    (testkit/ray_start_loopback.py); at most 180 s."""
    return subprocess.run(
        [
            sys.executable,
            str(_LOOPBACK_START),
            "start",
            *args,
            f"--node-ip-address={HOST}",
            f"--num-cpus={num_cpus}",
            *node_ports(),
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ],
        env=loopback_env(env),
        capture_output=True,
        text=True,
        timeout=180,
    )


# Two Python processes a test cluster does without: the log monitor of each node (it forwards the
# workers' stdout/stderr to the drivers; the tests read the drivers' own lines) and the head's
# autoscaler monitor (a fixed cluster never scales). Without them a head and two workers run 12
# processes instead of 16 and take ~25 % less CPU to start (13.4 vs 17.3 and 15.6 vs 21.0 CPU-s, at load 8-10).
LEAN_HEAD = ("--include-log-monitor=false", "--no-monitor")
LEAN_WORKER = ("--include-log-monitor=false",)


def start_head(
    ports: HeadPorts,
    temp_dir: Path,
    env: Mapping[str, str],
    *,
    num_cpus: int,
    dashboard: bool = True,
    lean: bool = False,
) -> subprocess.CompletedProcess:
    """A head node with its dashboard (Jobs API) on 127.0.0.1; the caller checks the return code.
    ``dashboard=False``: without (for drivers that join by the GCS address, not the Jobs API): Ray
    then runs its dashboard process with the usage-stats module only and no web frontend, a
    lighter start; it still gets the free port. ``lean``: without the monitors (:data:`LEAN_HEAD`)."""
    return _ray_start(
        [
            "--head",
            f"--port={ports.gcs}",
            f"--dashboard-host={HOST}",
            f"--dashboard-port={ports.dashboard}",
            f"--include-dashboard={str(dashboard).lower()}",
            f"--ray-client-server-port={free_port()}",
            *(LEAN_HEAD if lean else ()),
        ],
        temp_dir,
        env,
        num_cpus,
    )


def start_worker(
    ports: HeadPorts, temp_dir: Path, env: Mapping[str, str], *, num_cpus: int, lean: bool = False
) -> subprocess.CompletedProcess:
    """A second node joining the head of ``ports``; give it its own ``temp_dir`` (two nodes on one
    machine sharing one unpack a job's working directory into the same folder). ``lean``: without
    its log monitor (:data:`LEAN_WORKER`)."""
    return _ray_start([f"--address={ports.gcs_address}", *(LEAN_WORKER if lean else ())], temp_dir, env, num_cpus)


def _pids_naming(needle: str) -> list[int]:
    """Processes (not this one) whose command line contains ``needle``."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if needle.encode() in (proc / "cmdline").read_bytes():
                    out.append(int(proc.name))
            except OSError:
                continue
    return out


def cluster_pids(temp_dir: Path, ports: HeadPorts | None = None) -> list[int]:
    """This test's Ray processes: those naming its temp dir (or its GCS address), and those
    writing into it (the agents and the client server hide the temp dir behind a ``ray::`` title)."""
    found = set(_pids_naming(str(temp_dir))) | set(session_pids(str(temp_dir), exclude=(os.getpid(),)))
    if ports is not None:
        found |= set(_pids_naming(ports.gcs_address))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    """Running (a zombie's command line is empty)."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a raylet's workers, its actors among them)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def stop_pids(
    pids: list[int], wait_s: float = 5.0, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL)
) -> None:
    """SIGTERM, then SIGKILL (``signals``), each followed by a wait of at most ``wait_s`` seconds."""
    for sig in signals:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.2)


def _is_gcs(pid: int) -> bool:
    """Whether ``pid`` is a Ray GCS server (a head's control store)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/gcs_server")
    except OSError:
        return False


def stop_cluster(temp_dir: Path, ports: HeadPorts | None = None, *, rounds: int = 3) -> list[int]:
    """Stop every process of this test's cluster in at most ``rounds`` rounds (a raylet may
    spawn a worker while it is being stopped); returns the pids still there (none, normally).
    The GCS server goes last and by SIGKILL: it outwaits a SIGTERM (still up 8 s after one, so
    every stop took the whole 5 s wait), and its state is in memory only."""
    for _ in range(rounds):
        pids = cluster_pids(temp_dir, ports)
        if not pids:
            break
        gcs = [p for p in pids if _is_gcs(p)]
        stop_pids([p for p in pids if p not in gcs])
        stop_pids(gcs, signals=(signal.SIGKILL,))
    return cluster_pids(temp_dir, ports)


def read_lines(stream: Iterable[str], lines: queue.Queue, sink: list[str]) -> None:
    """Copy a driver's output lines into ``sink`` and ``lines`` (a reader thread's target);
    ``None`` on ``lines`` marks the end of the stream."""
    for line in stream:
        sink.append(line)
        lines.put(line)
    lines.put(None)


def await_line(
    lines: queue.Queue, predicate: Callable[[str], bool], timeout: float, what: str = "expected line"
) -> str:
    """The first line on ``lines`` for which ``predicate`` holds, within ``timeout`` seconds
    (AssertionError naming ``what`` otherwise, also when the stream ends first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        if predicate(line):
            return line
    raise AssertionError(f"no {what} within {timeout:.0f} s")
