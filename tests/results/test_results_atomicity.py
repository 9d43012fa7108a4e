"""Atomic commits under SIGKILL, and concurrent writers losing no rows (Delta Lake store).

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
import zlib
from collections import Counter
from pathlib import Path

import pytest

from adaptlab import results

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL semantics")

WRITER = r"""
import sys
import pyarrow.ipc
from adaptlab import results

root, tag, n_commits, template_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
store = results.open(root, create=True)
template = pyarrow.ipc.open_file(template_file).read_all()  # built by the test: no retrieval/scipy import here
rows = template.num_rows
print("ready", flush=True)
if len(sys.argv) > 5:  # wait for a go file, so that all writers contend at once
    import os, time
    end = time.monotonic() + 60
    while not os.path.exists(sys.argv[5]) and time.monotonic() < end:
        time.sleep(0.01)
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


def _template(folder: Path, tag: str, rows: int, k: int) -> Path:
    """The per-query rows a writer commits (slices of): ``rows`` queries of ``tag`` with top-``k``
    lists, written as an Arrow file, so that writers need not import the retrieval package (and
    SciPy under it): that import was about half of each writer's start."""
    import numpy as np
    import pyarrow as pa

    from adaptlab.retrieval.records import PerQueryRecords

    rng = np.random.default_rng(zlib.crc32(tag.encode()))
    docs = rng.integers(0, 10**9, size=(rows, k))
    table = PerQueryRecords(
        tag,
        "toy",
        [f"q{i}" for i in range(rows)],
        [[f"doc{d}" for d in row] for row in docs],
        rng.random((rows, k)),
        [[f"doc{row[0]}"] for row in docs],
        np.ones(rows, np.int32),
        rng.random(rows),
        rng.random(rows),
        [f"doc{d}" for d in docs[:, 1]],
    ).to_arrow()
    path = folder / f"template-{tag}.arrow"
    with pa.ipc.new_file(path, table.schema) as out:
        out.write_table(table)
    return path


def _start(script: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_ready(p: subprocess.Popen) -> None:
    line = p.stdout.readline()  # bounded: the helper prints or exits
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


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:  # only our own helpers, by pid
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


def test_sigkill_mid_commit_leaves_only_complete_commits(tmp_path):
    root = tmp_path / "store"
    store = results.open(root, create=True)
    rng = random.Random(20240601)
    kills = 4
    procs = []
    try:
        for round_ in range(kills):
            p = _start(WRITER, root, f"w{round_}", -1, _template(tmp_path, f"w{round_}", 3000, 50))
            procs.append(p)
            _wait_ready(p)
            for _ in range(rng.randint(0, 2)):  # let some commits finish (whatever the machine's load)
                assert p.stdout.readline().startswith("committed")
            time.sleep(rng.uniform(0.0, 0.2))
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
            assert p.returncode == -signal.SIGKILL
            _check_complete(store)
    finally:
        _stop(procs)
    runs = _check_complete(results.open(root), quiescent=True)
    assert runs
    # one Delta version per commit: killed writers added none (their Parquet files, if any,
    # are unreferenced and invisible)
    assert store.version() == len(runs) == len(store.commit_ids())
    written = [
        f for d in ("kind=runs", "kind=scores", "kind=per_query") if (root / d).is_dir() for f in os.listdir(root / d)
    ]
    assert len(written) >= len(store._table().file_uris())


def test_concurrent_writers_lose_no_rows_and_readers_see_whole_commits(tmp_path):
    root = tmp_path / "store"
    store = results.open(root, create=True)
    n_writers, n_commits = 8, 3
    go = tmp_path / "go"
    writers = [
        _start(WRITER, root, f"w{i}", n_commits, _template(tmp_path, f"w{i}", 200, 10), go) for i in range(n_writers)
    ]
    try:
        for w in writers:
            _wait_ready(w)
        go.write_text("go")
        checks = 0
        end = time.monotonic() + 240
        while any(w.poll() is None for w in writers) and time.monotonic() < end:
            _check_complete(store)  # readers during writes see only whole commits
            checks += 1
            time.sleep(0.3)  # leave the 2 cores to the writers
        for w in writers:
            w.wait(timeout=max(1.0, end - time.monotonic()))
            assert w.returncode == 0, w.stderr.read()
    finally:
        _stop(writers)
    runs = _check_complete(store, quiescent=True)
    assert sorted((r["system"], r["seed"]) for r in runs) == sorted(
        (f"w{i}", s) for i in range(n_writers) for s in range(n_commits)
    )
    assert store.metrics().num_rows == n_writers * sum(1 + s % 4 for s in range(n_commits))
    assert store.version() == n_writers * n_commits  # each commit exactly once
    assert checks >= 1
