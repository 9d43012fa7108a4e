"""Issue 22: a scale study on a three-node Ray cluster that loses a node while training.

A head (no CPU: it only coordinates) and two worker nodes with one CPU each, all ``ray start``
on 127.0.0.1 with token auth, their own ports, temp dirs and local caches (``ADAPTLAB_CACHE``, so
a stage's staging folder and checkpoints are the node's own: testkit/ray_cluster.py). The
artifacts live on a ``file://`` URI every node reaches (the object-store path of
:mod:`adaptlab.adapt.train.artifacts`). One driver process (``_DRIVER``) runs the same small scale
study (tiny model, base + ft at two scales: one FT stage on each worker node) twice, into two
stores and two artifact roots:

a. a clean run;
b. the same study (after the test empties the nodes' artifact caches, where the clean run's
   artifacts were committed and would be published again without training) while this test
   SIGKILLs the raylet of a worker node that is training, once that stage has published a
   checkpoint (the test watches the published checkpoint folder). The stage is retried on the
   surviving node, fetches the published checkpoint and resumes there.

The faulted run must end with the clean run's metric and per-query rows (==, run ids aside) and
the killed stage's model files hash-equal to the clean one's. Every process is started here and
stopped by pid; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "study"))
sys.path.insert(0, str(TESTS))
from testkit.ray_cluster import (  # noqa: E402
    HeadPorts,
    await_line,
    child_pids,
    cluster_pids,
    loopback_env,
    read_lines,
    start_head,
    start_worker,
    stop_cluster,
    stop_pids,
)

pytestmark = pytest.mark.slow
WORKERS = ("w1", "w2")
CHECKPOINTS = "_checkpoints"  # adaptlab.adapt.train.checkpoints.CHECKPOINTS, checked below

_DRIVER = r"""
import json, sys, time
from pathlib import Path
from adaptlab.runtime import init_ray
from adaptlab.study import parse_study, run_scale_study

gcs, model, base = sys.argv[1], sys.argv[2], Path(sys.argv[3])
init_ray(address=gcs)
for phase in ("clean", "fault"):
    if phase == "fault":  # the test empties the nodes' artifact caches, then says go
        print("READY " + phase, flush=True)
        deadline = time.monotonic() + 300
        while not (base / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    print("PHASE " + phase, flush=True)
    adapt = {"corpus": "synthetic:n_documents=40,seed=3", "base_model": model, "name": "tiny",
             "scales": [8, 24], "fraction": 0.5, "test_fraction": 0.25, "validation_fraction": 0.25,
             "max_tokens": 48, "questions_per_chunk": 3, "n_negatives": 1, "margin": False,
             "duplicate_threshold": False, "variants": ["base", "ft"],
             "ft": {"batch_size": 4, "max_steps": 100, "epochs": 100, "num_negatives": 1},
             "use_ray": True, "gpus_per_job": 0, "checkpoint_every": 10, "max_retries": 2,
             "artifact_root": f"file://{base}/{phase}/artifacts"}
    data = {"study": {"name": "node-loss", "store": ""},
            "datasets": [{"name": "bench", "spec": "synthetic:n_documents=4,seed=1"}],
            "models": [{"name": "tiny", "ref": model}],
            "evaluation": {"metrics": ["acc@1", "mrr@10"], "k": 20},
            "bootstrap": {"n_resamples": 100, "seed": 0}, "embedding": {"use_ray": False}, "adapt": adapt}
    t0 = time.monotonic()
    try:
        out = run_scale_study(parse_study(data, source=f"{phase}.toml", base_dir=base),
                              store=base / phase / "store", address=gcs)
    except Exception as e:
        print("ERROR " + json.dumps({"phase": phase, "type": type(e).__name__, "message": str(e)}), flush=True)
        sys.exit(1)
    print("DONE " + json.dumps({"phase": phase, "s": time.monotonic() - t0, "systems": sorted(out.systems)}),
          flush=True)
print("END", flush=True)
"""


def _training_stage(base: Path, driver: subprocess.Popen, timeout: float) -> tuple[str, str, int]:
    """Wait until a stage of the faulted run has published a checkpoint while a worker node
    trains it; ``(worker, artifact name, published step)``."""
    published = base / "fault" / "artifacts" / CHECKPOINTS
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and driver.poll() is None:
        for pointer in sorted(published.glob("*/*/latest.json")):
            name = pointer.parent.name
            for worker in WORKERS:  # the node whose own staging folder holds the stage's checkpoints
                local = base / worker / "cache" / "artifacts" / pointer.parent.parent.name / f".{name}.partial"
                if (local / "checkpoints" / "latest.json").is_file():
                    try:
                        return worker, name, int(json.loads(pointer.read_text())["step"])
                    except (OSError, ValueError, KeyError):
                        continue  # being replaced
        time.sleep(0.2)
    raise AssertionError(
        f"no published checkpoint of a training stage within {timeout:.0f} s (driver exit code {driver.poll()})"
    )


def _raylet_pid(temp_dir: Path) -> int:
    pids = [p for p in cluster_pids(temp_dir) if b"raylet" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
    assert len(pids) == 1, f"raylets under {temp_dir}: {pids}"
    return pids[0]


def _lose_node(temp_dir: Path) -> dict:
    """SIGKILL the node's raylet; its workers should exit by themselves (bounded wait), the
    stragglers are killed too (a lost machine takes all its processes)."""
    raylet = _raylet_pid(temp_dir)
    workers = child_pids(raylet)
    stop_pids([raylet], wait_s=5)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}/cmdline").exists() for p in workers):
        time.sleep(0.2)
    left = [p for p in workers if Path(f"/proc/{p}/cmdline").exists()]
    if left:
        stop_pids(left, wait_s=5)
    return {"raylet": raylet, "workers": len(workers), "outlived_raylet": len(left)}


def _start_cluster(base: Path, env: dict) -> HeadPorts:
    """A head without CPUs and two 1-CPU workers (one FT stage each), each node with its own
    ``ADAPTLAB_CACHE``; every node gets more than one try (``ray start`` can time out on a loaded machine)."""
    for attempt in range(2):
        ports = HeadPorts()
        head = start_head(
            ports,
            base / "head",
            {**env, "ADAPTLAB_CACHE": str(base / "head" / "cache")},
            num_cpus=0,
            dashboard=False,
            lean=True,
        )  # the driver joins by the GCS address
        if head.returncode == 0:
            break
        stop_cluster(base, ports)
        assert attempt == 0, head.stderr[-2000:]

    for name in WORKERS:  # one after the other, with three tries each: on a loaded machine a raylet
        for _ in range(3):  # can miss Ray's fixed 30 s start window (the GCS answers too late)
            done = start_worker(
                ports, base / name, {**env, "ADAPTLAB_CACHE": str(base / name / "cache")}, num_cpus=1, lean=True
            )
            if done.returncode == 0:
                break
            stop_cluster(base / name)
        assert done.returncode == 0, done.stderr[-2000:]
    return ports


@pytest.fixture(scope="module")
def scenario():
    """Run both phases; returns the driver's lines, the kill and the folders."""
    from tiny_models import build_tiny_model

    token = secrets.token_hex(16)
    base_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ADAPTLAB_CACHE", "ADAPTLAB_EMBEDDING"))
    }
    env = loopback_env(
        {
            **base_env,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token,
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    base = Path(tempfile.mkdtemp(prefix="raytl", dir="/tmp"))  # short: Ray puts sockets there
    ports = None
    t0 = time.monotonic()
    try:
        model = build_tiny_model(base / "tiny-bert")
        ports = _start_cluster(base, env)
        started = time.monotonic() - t0
        driver = subprocess.Popen(
            [sys.executable, "-c", _DRIVER, ports.gcs_address, str(model), str(base)],
            env={
                **env,
                "ADAPTLAB_CACHE": str(base / "driver-cache"),
                "ADAPTLAB_PROGRESS_INTERVAL": "2",
                "ADAPTLAB_EMBEDDING_CACHE": str(base / "embedding-cache"),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out_lines, err_lines, stdout = [], [], queue.Queue()
        for stream, q, sink in ((driver.stdout, stdout, out_lines), (driver.stderr, queue.Queue(), err_lines)):
            threading.Thread(target=read_lines, args=(stream, q, sink), daemon=True).start()
        try:
            await_line(stdout, lambda ln: ln.strip() == "READY fault", 900, "line 'READY fault'")
            for worker in WORKERS:  # else the clean run's artifacts, committed there, are published again
                shutil.rmtree(base / worker / "cache" / "artifacts", ignore_errors=True)
            (base / "go").touch()
            worker, name, step = _training_stage(base, driver, 600)
            kill = {"worker": worker, "name": name, "step": step, **_lose_node(base / worker)}
            driver.wait(timeout=900)
        except AssertionError as e:
            time.sleep(1)  # the readers catch up
            raise AssertionError(f"{e}; the driver said:\n{''.join(out_lines + err_lines[-80:])}") from None
        finally:
            if driver.poll() is None:
                stop_pids([driver.pid])
        took = time.monotonic() - t0
        print(
            f"[training-node-loss] cluster up in {started:.1f} s, whole scenario {took:.1f} s; killed {kill}",
            flush=True,
        )
        yield {"out": out_lines, "err": err_lines, "kill": kill, "base": base, "seconds": took}
    finally:
        stop_cluster(base, ports)
        shutil.rmtree(base, ignore_errors=True)


def _rows(store: Path, table: str) -> list[dict]:
    """The table's rows without run ids, in a fixed order."""
    from adaptlab import results

    rows = getattr(results.open(store), table)().to_pylist()
    for row in rows:
        row.pop("run_id")
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _done(scenario) -> dict[str, dict]:
    done = {
        json.loads(ln.split(" ", 1)[1])["phase"]: json.loads(ln.split(" ", 1)[1])
        for ln in scenario["out"]
        if ln.startswith("DONE ")
    }
    assert set(done) == {"clean", "fault"}, "".join(scenario["out"]) + "".join(scenario["err"][-60:])
    return done


def test_the_study_that_lost_a_training_node_has_the_clean_runs_rows(scenario):
    done = _done(scenario)
    assert done["clean"]["systems"] == done["fault"]["systems"] == ["tiny-base", "tiny-ft-s24", "tiny-ft-s8"]
    base = scenario["base"]
    for table in ("metrics", "per_query"):
        clean, fault = _rows(base / "clean" / "store", table), _rows(base / "fault" / "store", table)
        assert clean and fault == clean, table
    assert any(" (attempt 1 of 3); retrying it" in ln for ln in scenario["err"]), scenario["err"][-30:]


def test_the_killed_stage_resumed_from_its_published_checkpoint_with_the_clean_model(scenario):
    from adaptlab.adapt.train import checkpoints

    assert checkpoints.CHECKPOINTS == CHECKPOINTS
    _done(scenario)
    base, kill = scenario["base"], scenario["kill"]
    assert kill["step"] > 0
    manifests = {
        phase: json.loads(next((base / phase / "artifacts").glob(f"*/{kill['name']}/manifest.json")).read_text())
        for phase in ("clean", "fault")
    }
    assert manifests["fault"]["training"]["resumed_from_step"] >= kill["step"]
    assert manifests["clean"]["training"]["resumed_from_step"] == 0
    assert manifests["fault"]["files"] == manifests["clean"]["files"]  # the model's SHA-256, file by file
    for phase in ("clean", "fault"):  # published checkpoints are dropped with the artifacts published
        assert not [p for p in (base / phase / "artifacts" / CHECKPOINTS).rglob("*") if p.is_file()]
