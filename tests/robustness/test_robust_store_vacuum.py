"""Vacuum beside a writer, a compaction and another vacuum: no committed version, and no commit
that lands, ever references a deleted file; two vacuums at once both exit 0.

Each test runs ``TRIALS`` trials in two long-lived processes (adaptlab imported once), started and
stopped by pid, every wait bounded. With a failure in 1 trial of 3, 14 trials all pass by chance
with probability (2/3)^14 < 0.004: the tests catch it with probability > 0.99. After each trial
the rows are counted and every version of the store is read.

The writer case is made deterministic: the writer's ``stage`` (its data files written, its log
entry not yet) waits until the vacuum has run, so the vacuum sees the writer's files in flight in
every trial (``--retention-hours 0`` makes them old enough to go).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from adaptlab import results
from robustness.test_robust_store_concurrency import _env, _store_of_small_files

TRIALS = 14
_WAIT = 240.0
_OLD = time.time() - 400 * 3600  # older than the default retention (168 hours)

_BARRIER = """
def barrier(folder, me, other, i):
    (folder / f"ready-{me}-{i}").touch()
    deadline = time.monotonic() + 60
    while not (folder / f"ready-{other}-{i}").exists():  # both start together
        if time.monotonic() > deadline:
            sys.exit(f"no partner for trial {i}")
        time.sleep(0.0005)
"""

_VACUUM = textwrap.dedent("""
    import contextlib, io, sys, time
    from pathlib import Path
    from adaptlab.cli import main
    {barrier}
    me, folder, trials, other, hours = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    for i in range(trials):
        barrier(folder, me, other, i)
        if other == "w":  # the writer's files are written, its log entry is not: vacuum now
            deadline = time.monotonic() + 60
            while not (folder / f"staged-{i}").exists():
                if time.monotonic() > deadline:
                    sys.exit(f"the writer never staged in trial {i}")
                time.sleep(0.001)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = main(["results", "vacuum", "--store", str(folder / f"store-{i}"), "--retention-hours", hours])
        (folder / f"vacuumed-{i}").touch()
        (folder / f"out-{me}-{i}").write_text(f"{rc}\\n{out.getvalue()}")
""").replace("{barrier}", _BARRIER)

_COMPACT = textwrap.dedent("""
    import contextlib, io, sys, time
    from pathlib import Path
    from adaptlab.cli import main
    {barrier}
    me, folder, trials, other, hours = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    for i in range(trials):
        barrier(folder, me, other, i)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = main(["results", "compact", "--store", str(folder / f"store-{i}"), "--retention-hours", hours])
        (folder / f"out-{me}-{i}").write_text(f"{rc}\\n{out.getvalue()}")
""").replace("{barrier}", _BARRIER)

_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from adaptlab import results
    from adaptlab.results import writer
    {barrier}
    me, folder, trials, other = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    real_stage, trial = writer.stage, [0]

    def slow_stage(fs, data, **kw):  # the first staging of each trial waits for the vacuum
        staged = real_stage(fs, data, **kw)
        i = trial[0]
        if not (folder / f"staged-{i}").exists():
            (folder / f"staged-{i}").touch()
            deadline = time.monotonic() + 60
            while not (folder / f"vacuumed-{i}").exists() and time.monotonic() < deadline:
                time.sleep(0.001)
        return staged

    writer.stage = slow_stage
    for i in range(trials):
        trial[0] = i
        run = results.run_record("late", "toy", model_id="m", model_revision=None, dataset_fingerprint="fp",
                                 seed=0, config={})
        store = results.open(folder / f"store-{i}")
        barrier(folder, me, other, i)
        got = store.commit([run], [{"system": "late", "dataset": "toy", "measure": "mrr", "value": 0.5}])
        (folder / f"out-{me}-{i}").write_text(f"0\\n{got} {got.version}")
""").replace("{barrier}", _BARRIER)


def _template(root: Path) -> list[str]:
    """A store of small files (versions 0..4) and three stray data files no commit added, dated
    older than any retention; returns the strays' store-relative paths."""
    _store_of_small_files(root)
    strays = []
    for kind in ("runs", "scores", "per_query"):
        src = next((root / f"kind={kind}").iterdir())
        dst = src.with_name(f"part-00000-{uuid.uuid4()}-c000.zstd.parquet")
        shutil.copyfile(src, dst)  # rows that would be doubled if a read ever took it
        os.utime(dst, (_OLD, _OLD))
        strays.append(f"kind={kind}/{dst.name}")
    return strays


def _counts(root: Path, version: int | None = None) -> tuple[int, int, int]:
    store = results.open(root, strict=True, version=version)
    return store.runs().num_rows, store.metrics(kind="all").num_rows, store.per_query().num_rows


def _run_pair(tmp_path: Path, scripts: list[tuple[str, str, list[str]]]) -> None:
    """Run two trial scripts side by side (``(script, me, extra args)``), stopped by pid on any
    failure; both must exit 0."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, me, str(tmp_path), str(TRIALS), *extra],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for script, me, extra in scripts
    ]
    try:
        errs = [p.communicate(timeout=_WAIT)[1].decode()[-2000:] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    assert [p.returncode for p in procs] == [0, 0], errs


def _copies(tmp_path: Path) -> tuple[list[str], tuple[int, int, int], list[tuple[int, int, int]]]:
    """``TRIALS`` copies of the template store: its strays, its rows, the rows of each version."""
    template = tmp_path / "template"
    strays = _template(template)
    versions = [_counts(template, v) for v in range(results.open(template).version() + 1)]
    for i in range(TRIALS):
        shutil.copytree(template, tmp_path / f"store-{i}")
    return strays, _counts(template), versions


def _out(tmp_path: Path, me: str, i: int) -> str:
    text = (tmp_path / f"out-{me}-{i}").read_text()
    assert text.startswith("0\n") and "Traceback" not in text, f"trial {i} ({me}): {text}"
    return text


def test_two_vacuums_at_once_delete_only_strays_and_both_exit_0(tmp_path):
    strays, want, versions = _copies(tmp_path)
    _run_pair(tmp_path, [(_VACUUM, "a", ["b", "168"]), (_VACUUM, "b", ["a", "168"])])
    for i in range(TRIALS):
        root = tmp_path / f"store-{i}"
        outs = [_out(tmp_path, me, i) for me in ("a", "b")]
        deleted = [int(o.split(": ", 1)[1].split(" ", 1)[0]) for o in outs]
        assert sum(deleted) == len(strays), f"trial {i}: {outs}"  # each stray deleted once, by one of them
        assert not [s for s in strays if (root / s).exists()], f"trial {i}: a stray file is left"
        assert [_counts(root, v) for v in range(len(versions))] == versions, f"trial {i}: a version lost rows"
        assert _counts(root) == want


def test_a_vacuum_never_deletes_the_files_of_a_commit_in_flight(tmp_path):
    """The writer's files exist, its log entry does not, when the vacuum plans (every trial)."""
    strays, (runs, metrics, per_query), versions = _copies(tmp_path)
    _run_pair(tmp_path, [(_VACUUM, "v", ["w", "0"]), (_WRITER, "w", ["v"])])
    for i in range(TRIALS):
        root = tmp_path / f"store-{i}"
        assert (tmp_path / f"staged-{i}").exists()
        _out(tmp_path, "v", i)
        assert _out(tmp_path, "w", i).endswith(f" {len(versions) + 1}"), f"trial {i}"  # after the vacuum's entry
        assert _counts(root) == (runs + 1, metrics + 1, per_query), f"trial {i}: rows {_counts(root)}"
        assert [_counts(root, v) for v in range(len(versions))] == versions, f"trial {i}: a version lost rows"
        assert not [s for s in strays if (root / s).exists()], f"trial {i}: a stray file is left"


def test_a_vacuum_beside_a_compaction_keeps_every_row(tmp_path):
    """Retention 0: the vacuum may take the files the compaction merged away, never the merged ones."""
    strays, want, versions = _copies(tmp_path)
    _run_pair(tmp_path, [(_VACUUM, "v", ["c", "0"]), (_COMPACT, "c", ["v", "0"])])
    for i in range(TRIALS):
        root = tmp_path / f"store-{i}"
        _out(tmp_path, "v", i)
        assert "compacted" in _out(tmp_path, "c", i)
        assert _counts(root) == want, f"trial {i}: rows {_counts(root)}, expected {want}"
        assert not [s for s in strays if (root / s).exists()], f"trial {i}: a stray file is left"
        latest = results.open(root).version()
        assert _counts(root, latest) == want  # the latest version reads with every checksum (strict)
