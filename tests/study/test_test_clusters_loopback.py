"""The test clusters of testkit/ray_cluster.py listen on loopback only (slow: real nodes).

House rule: the servers the tests start run on 127.0.0.1. ``ray start --node-ip-address=127.0.0.1``
alone did not keep it: Ray replaced the address by the machine's external one, and the GCS
server, raylets and agents listened on all interfaces (``::``, ``0.0.0.0``) or on that address
(measured on Ray 2.60, 2026-11-29). The harness starts nodes through ray_start_loopback.py. Here a
head with its dashboard and one worker node start that way, a driver given :func:`loopback_env`
joins by the GCS address and lists both nodes at 127.0.0.1, and every listening socket of both
nodes' processes is checked.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from testkit.ray_cluster import (  # noqa: E402
    HeadPorts,
    cluster_pids,
    is_loopback,
    loopback_env,
    start_head,
    start_worker,
    stop_cluster,
)

pytestmark = pytest.mark.slow

_DRIVER = """
import json, sys, ray
ray.init(address=sys.argv[1])
print(json.dumps(sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])))
"""


def _listening(pids: list[int]) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening TCP socket and bound UDP socket of ``pids``."""
    import psutil

    found = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for c in proc.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN or (c.type == socket.SOCK_DGRAM and c.laddr):
                    found.append((proc.name(), c.laddr.ip, c.laddr.port))
        except psutil.Error:
            continue
    return found


def test_a_head_and_a_worker_node_listen_on_loopback_only_and_a_driver_joins():
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)})
    base, ports = Path(tempfile.mkdtemp(prefix="raylb", dir="/tmp")), HeadPorts()  # short: Ray puts sockets there
    try:
        head = start_head(ports, base / "head", env, num_cpus=1)
        assert head.returncode == 0, head.stderr[-2000:]
        worker = start_worker(ports, base / "node2", env, num_cpus=1, lean=True)
        assert worker.returncode == 0, worker.stderr[-2000:]
        driver = subprocess.run(
            [sys.executable, "-c", _DRIVER, ports.gcs_address],
            env=loopback_env(env),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert driver.returncode == 0, driver.stderr[-2000:]
        assert driver.stdout.strip().splitlines()[-1] == '["127.0.0.1", "127.0.0.1"]', driver.stdout
        sockets = _listening(cluster_pids(base / "head", ports) + cluster_pids(base / "node2"))
        assert {"gcs_server", "raylet"} <= {name for name, _, _ in sockets}, sockets  # the nodes' sockets were seen
        assert ("gcs_server", "127.0.0.1", ports.gcs) in sockets or (
            "gcs_server",
            "::ffff:127.0.0.1",
            ports.gcs,
        ) in sockets
        exposed = [s for s in sockets if not is_loopback(s[1])]
        assert not exposed, f"listening beyond loopback: {exposed}"
    finally:
        stop_cluster(base / "node2")
        left = stop_cluster(base / "head", ports)
        shutil.rmtree(base, ignore_errors=True)
    assert not left, f"cluster processes left: {left}"
