"""Issue 22: the embedding pool on a three-node Ray cluster that loses its worker nodes.

A head (no CPU: it only coordinates) and two worker nodes with two CPUs each, all ``ray start``
on 127.0.0.1 with token auth, their own ports and temp dirs (tests/study/ray_cluster.py). One
driver process (``_DRIVER``) embeds 2,000 texts three times on the warm pool of four actors:

a. a clean run;
b. the same texts while this test SIGKILLs worker 1's raylet (once the first blocks are done):
   the run must finish on worker 2's actors with the clean run's vectors, and no node is added;
c. again, while this test SIGKILLs worker 2's raylet: no node has room left, so the run must
   fail with one ClusterCapacityError line, within the placement time-out (20 s here) plus
   Ray's node-death detection, naming the lost node, and return nothing.

The encoder is the hashing encoder slowed to 0.15 s per batch (embedding_fakes, shipped to the
workers by value), so that the kills land mid-run whatever the machine's load; the pool logic
under test does not depend on the model. Every process is started here and stopped by pid.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "study"))
sys.path.insert(0, str(TESTS / "embedding"))
from embedding_fakes import make_texts  # noqa: E402
from ray_cluster import HeadPorts, cluster_pids, start_head, start_worker, stop_cluster, stop_pids  # noqa: E402

from adaptlab.models import HashingEncoder  # noqa: E402

pytestmark = pytest.mark.slow
N_TEXTS = 2000
PLACEMENT_S = 20
DETECT_S = 90  # Ray's own node-death detection (health checks) on a loaded machine, generous

_DRIVER = r"""
import json, logging, sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
import embedding_fakes
from ray import cloudpickle
cloudpickle.register_pickle_by_value(embedding_fakes)
import ray
from adaptlab.embedding import embed_texts_detailed, release_pools
from adaptlab.runtime import init_ray

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
init_ray(address=sys.argv[1])
def nodes():
    return {n["NodeID"]: [n["RayletSocketName"], n["NodeManagerAddress"]] for n in ray.nodes() if n["Alive"]}
print("NODES " + json.dumps(nodes()), flush=True)
texts = embedding_fakes.make_texts(int(sys.argv[3]), seed=22)
factory = embedding_fakes.HashFactory(16, delay=0.15)
out = {}
for phase in ("clean", "fault1", "fault2"):
    print("PHASE " + phase, file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        timeout = float(sys.argv[5]) if phase == "fault2" else None  # the default covers the actors' start
        run = embed_texts_detailed(texts, factory, batch_size=25, block_size=25, torch_threads=1,
                                   placement_timeout=timeout)
    except Exception as e:
        print("ERROR " + json.dumps({"type": type(e).__name__, "message": str(e), "s": time.monotonic() - t0}),
              flush=True)
        continue
    np.save(sys.argv[4] + f"/{phase}.npy", run.embeddings)
    print("DONE " + json.dumps({"phase": phase, "actors": run.num_actors, "s": time.monotonic() - t0,
                               "alive": nodes()}), flush=True)
release_pools()
print("END", flush=True)
"""


def _reader(stream, lines: queue.Queue, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)
        lines.put(line)
    lines.put(None)


def _await(lines: queue.Queue, predicate, timeout: float) -> str:
    """The first line for which ``predicate`` holds, within ``timeout`` seconds."""
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
    raise AssertionError(f"no expected line within {timeout:.0f} s")


def _raylet_pid(temp_dir: Path) -> int:
    pids = [p for p in cluster_pids(temp_dir)
            if b"raylet" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
    assert len(pids) == 1, f"raylets under {temp_dir}: {pids}"
    return pids[0]


def _kill_when_running(stderr: queue.Queue, phase: str, raylet: int) -> float:
    """Wait for ``phase`` to start and finish its first blocks, then SIGKILL ``raylet``."""
    _await(stderr, lambda ln: ln.strip() == f"PHASE {phase}", 600)
    _await(stderr, lambda ln: ln.startswith("[adaptlab] embedding") and not re.search(r": 0/\d", ln), 300)
    stop_pids([raylet], wait_s=5)
    return time.monotonic()


def _start_cluster(base: Path, env: dict) -> HeadPorts:
    """A head without CPUs and two 2-CPU workers; the head gets a second try (on a loaded machine
    ``ray start`` can time out waiting for its own GCS)."""
    for attempt in range(2):
        ports = HeadPorts()
        head = start_head(ports, base / "head", env, num_cpus=0)
        if head.returncode == 0:
            break
        stop_cluster(base, ports)
        assert attempt == 0, head.stderr[-2000:]
    with ThreadPoolExecutor(2) as pool:  # the two workers join at the same time
        workers = list(pool.map(lambda name: start_worker(ports, base / name, env, num_cpus=2), ("w1", "w2")))
    for worker in workers:
        assert worker.returncode == 0, worker.stderr[-2000:]
    return ports


@pytest.fixture(scope="module")
def scenario():
    """Run the three phases; returns the driver's output lines, the kill times, the arrays."""
    token = secrets.token_hex(16)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env = {**base_env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "HF_HUB_OFFLINE": "1"}
    base = Path(tempfile.mkdtemp(prefix="raynl", dir="/tmp"))  # short: Ray puts sockets there
    out_dir = base / "out"
    out_dir.mkdir()
    ports = None
    t0 = time.monotonic()
    try:
        ports = _start_cluster(base, env)
        started = time.monotonic() - t0
        driver_env = {**env, "ADAPTLAB_PROGRESS_INTERVAL": "0.3"}
        driver = subprocess.Popen(
            [sys.executable, "-c", _DRIVER, ports.gcs_address, str(TESTS / "embedding"), str(N_TEXTS), str(out_dir),
             str(PLACEMENT_S)],
            env=driver_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out_lines, err_lines, stdout, stderr = [], [], queue.Queue(), queue.Queue()
        for stream, q, sink in ((driver.stdout, stdout, out_lines), (driver.stderr, stderr, err_lines)):
            threading.Thread(target=_reader, args=(stream, q, sink), daemon=True).start()
        try:
            kill1 = _kill_when_running(stderr, "fault1", _raylet_pid(base / "w1"))
            kill2 = _kill_when_running(stderr, "fault2", _raylet_pid(base / "w2"))
            driver.wait(timeout=PLACEMENT_S + DETECT_S + 120)
        finally:
            if driver.poll() is None:
                stop_pids([driver.pid])
        done = time.monotonic()
        print(f"[node-loss] cluster up in {started:.1f} s, whole scenario {done - t0:.1f} s", flush=True)
        yield {"out": out_lines, "err": err_lines, "kill1": kill1, "kill2": kill2, "end": done, "dir": out_dir,
               "w1": str(base / "w1"), "w2": str(base / "w2")}
    finally:
        stop_cluster(base, ports)
        shutil.rmtree(base, ignore_errors=True)


def _records(lines: list[str], tag: str) -> list[dict]:
    return [json.loads(ln.split(" ", 1)[1]) for ln in lines if ln.startswith(tag + " ")]


def _node_of(nodes: dict[str, list[str]], temp_dir: str) -> str:
    """The id of the node started in ``temp_dir`` (its raylet's socket lives there)."""
    return next(n for n, (sock, _) in nodes.items() if sock.startswith(temp_dir + "/"))


def test_losing_one_worker_node_mid_run_gives_the_clean_vectors_with_no_node_added(scenario):
    done = {r["phase"]: r for r in _records(scenario["out"], "DONE")}
    assert {"clean", "fault1"} <= set(done), "".join(scenario["out"] + scenario["err"])
    clean, faulted = (np.load(scenario["dir"] / f"{p}.npy") for p in ("clean", "fault1"))
    np.testing.assert_array_equal(faulted, clean)
    np.testing.assert_array_equal(clean, HashingEncoder(16).encode(make_texts(N_TEXTS, seed=22), kind="document"))
    nodes = json.loads(next(ln for ln in scenario["out"] if ln.startswith("NODES ")).split(" ", 1)[1])
    w1 = _node_of(nodes, scenario["w1"])
    assert len(nodes) == 3 and set(done["fault1"]["alive"]) == set(nodes) - {w1}  # w1 gone, no node added
    assert done["clean"]["actors"] == done["fault1"]["actors"] == 4
    assert any(f"lost with node {w1[:12]}" in ln for ln in scenario["err"]), scenario["err"][-20:]


def test_losing_every_node_with_room_fails_with_one_line_in_bounded_time(scenario):
    errors = _records(scenario["out"], "ERROR")
    assert len(errors) == 1, scenario["out"] + scenario["err"][-20:]
    err = errors[0]
    assert err["type"] == "ClusterCapacityError" and "\n" not in err["message"]
    nodes = json.loads(next(ln for ln in scenario["out"] if ln.startswith("NODES ")).split(" ", 1)[1])
    w2 = _node_of(nodes, scenario["w2"])
    assert f"lost node(s) {w2[:12]} ({nodes[w2][1]})" in err["message"], err["message"]
    assert "texts of this call were embedded and are not kept" in err["message"]
    assert "re-run the same study" in err["message"]
    assert not (scenario["dir"] / "fault2.npy").exists()  # nothing partial returned
    assert scenario["end"] - scenario["kill2"] < PLACEMENT_S + DETECT_S
