"""Maintenance and writers under concurrency: two at once never both commit.

Two ``adaptlab results compact`` started at the same instant on one store doubled every row in
about 1 trial of 3 (delta-rs' optimize rebased its commit onto the other compaction's). Each trial
here starts two compactions in separate processes at one barrier and counts the rows afterwards.
With a 1-in-3 failure, ``TRIALS`` = 14 trials all pass by chance with probability (2/3)^14 < 0.004,
so the test catches it with probability > 0.99. The processes stay alive across trials (importing
adaptlab once), and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from adaptlab import results
from robustness.hostile import build_store

TRIALS = 14
_WAIT = 60.0

_COMPACTOR = textwrap.dedent("""
    import contextlib, io, os, sys, time
    from pathlib import Path
    from adaptlab.cli import main

    me, folder, trials = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    other = "b" if me == "a" else "a"
    for i in range(trials):
        (folder / f"ready-{me}-{i}").touch()
        deadline = time.monotonic() + 60
        while not (folder / f"ready-{other}-{i}").exists():  # the barrier: both start together
            if time.monotonic() > deadline:
                sys.exit(f"no partner for trial {i}")
            time.sleep(0.0005)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = main(["results", "compact", "--store", str(folder / f"store-{i}")])
        (folder / f"out-{me}-{i}").write_text(f"{rc}\\n{out.getvalue()}")
""")


def _env() -> dict[str, str]:
    tests_dir = str(Path(__file__).parents[1])
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")]),
        "ADAPTLAB_PROGRESS": "0",
    }


def _store_of_small_files(root: Path) -> None:
    """Versions 0..4: the hostile corpus' store plus three one-run commits (many small files)."""
    store = build_store(root)
    for i in range(3):
        run = results.run_record(
            f"s{i}", "toy", model_id="m", model_revision=None, dataset_fingerprint="fp", seed=0, config={}
        )
        store.commit([run], [{"system": f"s{i}", "dataset": "toy", "measure": "mrr", "value": 0.5}])
    store.close()


def _counts(root: Path) -> tuple[int, int, int, int]:
    store = results.open(root, strict=True)
    return (
        store.runs().num_rows,
        store.metrics(kind="all").num_rows,
        store.per_query().num_rows,
        len(set(store.runs().column("run_id").to_pylist())),
    )


def test_two_compactions_at_once_never_both_commit(tmp_path):
    template = tmp_path / "template"
    _store_of_small_files(template)
    want = _counts(template)
    for i in range(TRIALS):
        shutil.copytree(template, tmp_path / f"store-{i}")
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _COMPACTOR, me, str(tmp_path), str(TRIALS)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for me in ("a", "b")
    ]
    errs = [p.communicate(timeout=_WAIT * 3)[1].decode()[-2000:] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    elapsed = time.monotonic() - t0
    merged = []
    for i in range(TRIALS):
        root = tmp_path / f"store-{i}"
        assert _counts(root) == want, f"trial {i}: rows {_counts(root)}, expected {want}"
        outs = [(tmp_path / f"out-{me}-{i}").read_text() for me in ("a", "b")]
        assert all(o.startswith("0\n") and "compacted" in o for o in outs), outs
        merged.append(sum("0 file(s) merged" not in o for o in outs))
        ops = [h for h in results.open(root).history().to_pylist() if h["commit_id"] is None and h["version"] > 0]
        assert len(ops) == 1, f"trial {i}: {len(ops)} compaction commits"
    assert merged == [1] * TRIALS  # exactly one of the two merged the files each time
    print(f"{TRIALS} trials of two concurrent compactions in {elapsed:.1f} s")


_COMMITTER = textwrap.dedent("""
    import sys, time
    from datetime import datetime, timezone
    from pathlib import Path
    from adaptlab import results

    me, folder, trials = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    other = "b" if me == "a" else "a"
    for i in range(trials):
        run = results.run_record("same", "toy", model_id="m", model_revision=None, dataset_fingerprint="fp",
                                 seed=0, config={})
        run.update(run_id=f"run{i:04d}", timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc))
        store = results.open(folder / f"store-{i}")
        (folder / f"ready-{me}-{i}").touch()
        deadline = time.monotonic() + 60
        while not (folder / f"ready-{other}-{i}").exists():
            if time.monotonic() > deadline:
                sys.exit(f"no partner for trial {i}")
            time.sleep(0.0005)
        got = store.commit([run], [{"system": "same", "dataset": "toy", "measure": "mrr", "value": 0.5}])
        (folder / f"out-{me}-{i}").write_text(f"{got} {got.version}")
""")


def test_two_identical_commits_at_once_store_one(tmp_path):
    for i in range(TRIALS):
        results.open(tmp_path / f"store-{i}", create=True).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _COMMITTER, me, str(tmp_path), str(TRIALS)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for me in ("a", "b")
    ]
    errs = [p.communicate(timeout=_WAIT * 3)[1].decode()[-2000:] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    for i in range(TRIALS):
        store = results.open(tmp_path / f"store-{i}", strict=True)
        assert store.version() == 1 and store.runs().num_rows == 1 and store.metrics().num_rows == 1, i
        outs = {(tmp_path / f"out-{me}-{i}").read_text() for me in ("a", "b")}
        assert len(outs) == 1 and outs.pop().endswith(" 1")  # both name the one commit that landed
        assert not [
            p
            for p in (tmp_path / f"store-{i}" / "kind=runs").iterdir()
            if p.name not in {Path(u).name for u in store._file_uris(store._table())}
        ], "a staged file was left"


_REPAIRER = _COMPACTOR.replace('["results", "compact", "--store"', '["results", "repair", "--store"')


def test_two_repairs_at_once_never_both_restore(tmp_path):
    """A changed data file of version 2: repair restores version 1 as a new version; two at once
    commit that restore once, and both exit 0."""
    template = tmp_path / "template"
    store = build_store(template)
    want = _counts(template)
    run = results.run_record(
        "third", "toy", model_id="m", model_revision=None, dataset_fingerprint="fp", seed=0, config={}
    )
    commit = store.commit([run], [{"system": "third", "dataset": "toy", "measure": "mrr", "value": 0.5}])
    store.close()
    actions = [
        json.loads(ln) for ln in (template / "_delta_log" / f"{commit.version:020d}.json").read_text().splitlines()
    ]
    changed = template / sorted(a["add"]["path"] for a in actions if "add" in a)[0]
    raw = bytearray(changed.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    changed.write_bytes(bytes(raw))
    for i in range(TRIALS):
        shutil.copytree(template, tmp_path / f"store-{i}")
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _REPAIRER, me, str(tmp_path), str(TRIALS)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for me in ("a", "b")
    ]
    errs = [p.communicate(timeout=_WAIT * 3)[1].decode()[-2000:] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    elapsed = time.monotonic() - t0
    for i in range(TRIALS):
        root = tmp_path / f"store-{i}"
        outs = [(tmp_path / f"out-{me}-{i}").read_text() for me in ("a", "b")]
        assert all(o.startswith("0\n") for o in outs), outs
        assert sum("restored the store to version 1" in o for o in outs) == 1, outs
        assert _counts(root) == want, f"trial {i}: rows {_counts(root)}, expected {want}"
        assert results.open(root).version() == 3
    print(f"{TRIALS} trials of two concurrent repairs in {elapsed:.1f} s")


def test_a_compaction_beside_a_writer_loses_and_doubles_nothing(tmp_path):
    """One process compacts while another commits a new run at the same instant."""
    template = tmp_path / "template"
    _store_of_small_files(template)
    runs, metrics, per_query, distinct = _counts(template)
    for i in range(TRIALS):
        shutil.copytree(template, tmp_path / f"store-{i}")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, me, str(tmp_path), str(TRIALS)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for script, me in ((_COMPACTOR, "a"), (_COMMITTER, "b"))
    ]
    errs = [p.communicate(timeout=_WAIT * 3)[1].decode()[-2000:] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    for i in range(TRIALS):
        got = _counts(tmp_path / f"store-{i}")
        assert got == (runs + 1, metrics + 1, per_query, distinct + 1), f"trial {i}: {got}"
