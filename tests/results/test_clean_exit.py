"""A Python process that read a results store exits cleanly: status 0 and no C++ abort.

Through delta-rs' Python file system, pyarrow worker threads held Python-owned buffers of a scan
and could free the last one after the interpreter began to exit; such a thread aborts the process
("terminate called without an active exception", status -6) in about 5-10% of short scripts. A
local store is now read through pyarrow's native file system (``StoreReader._arrow_fs``), so
``adaptlab results`` no longer needs to end with ``os._exit``. (Object stores keep delta-rs' file
system; the exit hook of :mod:`adaptlab.results.reader` lets pyarrow's threads finish first.)"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest

from adaptlab import results
from adaptlab.results.delta_table import KINDS
from adaptlab.retrieval.records import PerQueryRecords

RUNS = 4
"""Processes (two at a time): before the fix about one short script in 15 aborted, so this is a smoke
check of the whole exit; the test of the file system below is the deterministic guard."""
SNIPPET = (
    "import adaptlab.results as r; s = r.open({root!r}); print(s.metrics().num_rows, s.per_query(system='a').num_rows)"
)


def _records(system: str) -> PerQueryRecords:
    return PerQueryRecords(
        system=system,
        dataset="toy",
        query_ids=["q1", "q2"],
        topk_ids=[["d1", "d2"], ["d2", "d1"]],
        topk_scores=np.array([[0.9, 0.5], [0.7, 0.2]]),
        gold_ids=[["d1"], ["d1"]],
        gold_rank=[1, 2],
        sim_gold=[0.9, 0.2],
        sim_random=[0.1, 0.05],
        random_ids=["d3", "d3"],
    )


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small store with two systems (made once for the module)."""
    root = tmp_path_factory.mktemp("clean_exit") / "store"
    store = results.open(root, create=True)
    runs = [
        results.run_record(s, "toy", model_id=s, model_revision=None, dataset_fingerprint="fp", seed=0, config={})
        for s in ("a", "b")
    ]
    store.commit(
        runs,
        [{"system": s, "dataset": "toy", "measure": "mrr", "value": v} for s, v in (("a", 0.5), ("b", 0.25))],
        [_records("a"), _records("b")],
    )
    store.close()
    return root


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_reading_a_store_then_exiting_never_aborts(store_root: Path) -> None:
    """The Python API and ``adaptlab results`` (which exits normally now, exit handlers run)."""
    api = [sys.executable, "-c", SNIPPET.format(root=str(store_root))]
    cli = [sys.executable, "-m", "adaptlab", "results", "--store", str(store_root), "--filter", "system=a"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(_run, [api, cli] * (RUNS // 2)))
    for i, p in enumerate(done):
        assert "terminate called" not in p.stderr, f"run {i}: {p.stderr[-500:]}"
        assert p.returncode == 0, f"run {i}: status {p.returncode}: {p.stderr[-500:]}"
        if p.args is api:
            assert p.stdout.split() == ["2", "2"], f"run {i}: {p.stdout!r}"
        else:
            assert "0.500" in p.stdout and "0.250" not in p.stdout, f"run {i}: {p.stdout!r}"


def test_a_local_store_is_scanned_without_python_file_objects(store_root: Path) -> None:
    """The cause, checked directly: the scan's file system is pyarrow's own, not a PyFileSystem
    whose buffers are Python objects freed by pyarrow's threads."""
    store = results.open(store_root)
    try:
        ds = store._dataset(KINDS)
        assert not isinstance(ds.filesystem, pafs.PyFileSystem)
        assert isinstance(ds.filesystem, pafs.SubTreeFileSystem)
        assert ds.to_table(columns=["system"]).num_rows > 0
    finally:
        store.close()
