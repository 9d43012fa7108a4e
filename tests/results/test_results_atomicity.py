"""Atomic commits under SIGKILL, and concurrent writers (and compactions) losing no rows.

Writers run as separate processes (the script below). Each commit holds one run whose
config says how many metrics and per-query rows the writer put in the same commit, so a
reader can check that every visible commit is complete.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from adaptlab import results

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX rename and SIGKILL semantics")

WRITER = r"""
import sys
import numpy as np
from adaptlab import results
from adaptlab.retrieval.records import PerQueryRecords

root, tag, n_commits, rows, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
store = results.open(root, create=True)
rng = np.random.default_rng(abs(hash(tag)) % 2**32)
docs = rng.integers(0, 10**9, size=(rows, k))
template = PerQueryRecords(
    tag, "toy", [f"q{i}" for i in range(rows)], [[f"doc{d}" for d in row] for row in docs],
    rng.random((rows, k)), [[f"doc{row[0]}"] for row in docs], np.ones(rows, np.int32),
    rng.random(rows), rng.random(rows), [f"doc{d}" for d in docs[:, 1]],
).to_arrow()
print("ready", flush=True)
i = 0
while n_commits < 0 or i < n_commits:
    n_metrics, n_pq = 1 + i % 4, rows - (i * 37) % (rows // 2)
    run = results.run_record(tag, "toy", model_id="m", model_revision=None, dataset_fingerprint="fp",
                             seed=i, config={"n_metrics": n_metrics, "n_pq": n_pq})
    metrics = [{"system": tag, "dataset": "toy", "measure": f"acc@{j + 1}", "value": j / 10}
               for j in range(n_metrics)]
    store.commit([run], metrics, template.slice(0, n_pq))
    i += 1
    print("committed", i, flush=True)
"""

COMPACTOR = r"""
import sys, time
from adaptlab import results
store = results.open(sys.argv[1])
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    n += store.compact() is not None
    time.sleep(0.05)
print(n, flush=True)
"""


def _start(script: str, *args: object) -> subprocess.Popen:
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _wait_ready(p: subprocess.Popen) -> None:
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        raise AssertionError(f"helper failed to start: {line!r} {p.stderr.read()}")


def _check_complete(store: results.ResultsStore, *, quiescent: bool = False) -> list[dict]:
    """Every run visible now has all the metrics and per-query rows its commit held."""
    runs = store.runs().to_pylist()  # first: commits published later may add rows below
    n_metrics = Counter(store.metrics(columns=["run_id"]).column("run_id").to_pylist())
    n_pq = Counter(store.per_query(columns=["run_id"]).column("run_id").to_pylist())
    for r in runs:
        cfg = json.loads(r["config"])
        assert n_metrics[r["run_id"]] == cfg["n_metrics"], r
        assert n_pq[r["run_id"]] == cfg["n_pq"], r
    if quiescent:
        ids = {r["run_id"] for r in runs}
        assert len(ids) == len(runs)
        assert set(n_metrics) <= ids and set(n_pq) <= ids  # no orphan rows
    return runs


def test_sigkill_mid_commit_leaves_only_complete_commits(tmp_path):
    root = tmp_path / "store"
    store = results.open(root, create=True)
    rng = random.Random(20240601)
    kills = 6
    for round_ in range(kills):
        p = _start(WRITER, root, f"w{round_}", -1, 3000, 50)
        _wait_ready(p)
        for _ in range(rng.randint(0, 2)):  # let some commits finish (whatever the machine's load)
            assert p.stdout.readline().startswith("committed")
        time.sleep(rng.uniform(0.0, 0.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert p.returncode == -signal.SIGKILL
        _check_complete(store)
    runs = _check_complete(results.open(root), quiescent=True)
    leftovers = [n for n in os.listdir(root / "tmp") if n.endswith(".tmp")]
    # the kills landed mid-write: temp dirs of dead writers are left, and ignored
    assert runs and leftovers, (len(runs), leftovers)
    assert len(store.commit_ids()) == len(runs)
    removed = store.clean(stale_after=0)
    assert sorted(r for r in removed if r.endswith(".tmp")) == sorted(
        f"tmp/{n}" for n in leftovers)
    assert os.listdir(root / "tmp") == []
    assert len(_check_complete(store, quiescent=True)) == len(runs)


def test_concurrent_writers_and_compactions_lose_no_rows(tmp_path):
    root = tmp_path / "store"
    store = results.open(root, create=True)
    n_writers, n_commits = 4, 6
    compactor = _start(COMPACTOR, root, 4.0)
    _wait_ready(compactor)
    writers = [_start(WRITER, root, f"w{i}", n_commits, 200, 10) for i in range(n_writers)]
    checks = 0
    while any(w.poll() is None for w in writers):
        store.compact()  # contends with the compactor process and the writers
        _check_complete(store)
        checks += 1
    for w in writers:
        assert w.returncode == 0, w.stderr.read()
    compactor.wait(timeout=60)
    assert compactor.returncode == 0, compactor.stderr.read()
    runs = _check_complete(store, quiescent=True)
    assert sorted((r["system"], r["seed"]) for r in runs) == sorted(
        (f"w{i}", s) for i in range(n_writers) for s in range(n_commits))
    assert store.metrics().num_rows == n_writers * sum(1 + s % 4 for s in range(n_commits))
    store.compact()
    assert len(store.commit_ids()) == 1 and len(os.listdir(root / "commits")) == 1
    assert len(_check_complete(results.open(root), quiescent=True)) == n_writers * n_commits
    assert checks >= 1


def test_concurrent_writers_without_compaction_each_commit_separately(tmp_path):
    root = tmp_path / "store"
    results.open(root, create=True)
    writers = [_start(WRITER, root, f"p{i}", 5, 50, 5) for i in range(4)]
    for w in writers:
        w.wait(timeout=120)
        assert w.returncode == 0, w.stderr.read()
    store = results.open(root)
    assert len(store.commit_ids()) == 20
    runs = _check_complete(store, quiescent=True)
    assert len({r["run_id"] for r in runs}) == 20
    assert os.listdir(root / "tmp") == []
