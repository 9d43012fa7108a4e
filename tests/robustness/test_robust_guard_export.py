"""Exports neither lose nor half-write (hostile corpus): two systems whose names become one file
are refused naming both; files are written whole or not at all (a full disk leaves nothing and is
one line); the trackers (MLflow, W&B) fail in one line without a traceback or a secret, and an
unreachable MLflow server is given up on within a bounded time."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from adaptlab import results
from robustness.hostile import _records, assert_one_line_error, cli

PASSWORD = "s3cr3t-Zq7"


def _store(root: Path, systems: tuple[str, ...]) -> Path:
    store = results.open(root, create=True)
    runs = [
        results.run_record(
            s, "toy", model_id=f"m/{s}", model_revision=None, dataset_fingerprint="fp", seed=0, config={"k": 2}
        )
        for s in systems
    ]
    ids = {r["system"]: r["run_id"] for r in runs}
    metrics = [{"run_id": ids[s], "system": s, "dataset": "toy", "measure": "ndcg@10", "value": 0.5} for s in systems]
    per_query = pa.concat_tables([_with_run_id(_records(s).to_arrow(), ids[s]) for s in systems])
    store.commit(runs, metrics, per_query)
    store.close()
    return root


def _with_run_id(table: pa.Table, run_id: str) -> pa.Table:
    column = pa.array([run_id] * table.num_rows)
    if "run_id" in table.schema.names:
        return table.set_column(table.schema.get_field_index("run_id"), "run_id", column)
    return table.append_column("run_id", column)


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.mark.parametrize("to", ["mteb", "ranx"])
def test_two_systems_that_become_one_file_are_refused_naming_both(tmp_path, to):
    store = _store(tmp_path / "store", ("a:b", "a_b"))
    rc, out, err = cli(["export", "--store", str(store), "--to", to, "--out", str(tmp_path / "out")])
    line = assert_one_line_error(rc, err, ("'a:b'", "'a_b'", "nothing was written"))
    assert "a_b" in line and _files(tmp_path / "out") == []


def test_one_system_a_case_apart_is_refused_too(tmp_path):
    store = _store(tmp_path / "store", ("BM25", "bm25"))
    rc, out, err = cli(["export", "--store", str(store), "--to", "mteb", "--out", str(tmp_path / "out")])
    assert_one_line_error(rc, err, ("'BM25'", "'bm25'"))


@pytest.mark.parametrize("to", ["mteb", "ranx"])
def test_a_failing_write_leaves_the_earlier_export_whole_and_no_temporary_file(tmp_path, monkeypatch, to):
    from adaptlab.results.exports import export_files

    store = _store(tmp_path / "store", ("bm25", "dense"))
    out = tmp_path / "out"
    rc, _, err = cli(["export", "--store", str(store), "--to", to, "--out", str(out)])
    assert rc == 0, err
    earlier = _files(out)
    for rel in earlier:
        (out / rel).write_text("earlier\n")
    real, opened = export_files.os.fdopen, []

    def second_file_fills_the_disk(fd, *args, **kwargs):
        f = real(fd, *args, **kwargs)
        opened.append(f)
        if len(opened) == 2:

            def write(text):
                raise OSError(errno.ENOSPC, "No space left on device")

            f.write = write
        return f

    monkeypatch.setattr(export_files.os, "fdopen", second_file_fills_the_disk)
    rc, _, err = cli(["export", "--store", str(store), "--to", to, "--out", str(out)])
    assert_one_line_error(rc, err, ("No space left on device", "no exported file was written"))
    assert _files(out) == earlier and {(out / rel).read_text() for rel in earlier} == {"earlier\n"}


@pytest.fixture
def full_disk(tiny_disk):
    """The 64 KiB tmpfs of ``tiny_disk`` filled to the last few KiB."""
    with open(tiny_disk / "fill", "wb") as f:
        try:
            f.write(b"\0" * 60_000)
        except OSError:
            pass
    return tiny_disk


@pytest.mark.parametrize("to", ["mteb", "ranx", "mlflow", "wandb"])
def test_a_full_disk_is_one_line_for_every_exporter_and_leaves_no_partial_file(tmp_path, full_disk, to):
    if to in ("mlflow", "wandb"):
        pytest.importorskip(to)
    store = _store(tmp_path / "store", ("bm25", "dense"))
    out = full_disk / "out"
    target = out.as_uri() if to == "mlflow" else str(out)
    env = {
        **os.environ,
        "ADAPTLAB_PROGRESS": "0",
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "WANDB_MODE": "offline",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "adaptlab", "export", "--store", str(store), "--to", to, "--out", target],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert_one_line_error(done.returncode, done.stderr, ("No space left on device",))
    assert "nothing partial was kept" not in done.stderr
    if to in ("mteb", "ranx"):
        assert _files(out) == []
    if to == "wandb":
        assert not [p for p in (out / "wandb").glob("*run-*") if p.is_dir() and not p.is_symlink()]


# -- passwords in URIs and bounded trackers ----------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [["results"], ["report", "--out", "rep"], ["compare"], ["export", "--to", "mteb", "--out", "x"], ["inspect"]],
)
def test_a_file_uri_with_a_password_is_masked_everywhere(work, command):
    rc, out, err = cli([*command, "--store", f"file://user:{PASSWORD}@localhost/{work}/store"])
    assert rc == 2 and PASSWORD not in out + err, err
    assert "Traceback" not in err and "user:***@localhost" in err, err


def test_a_remembered_secret_is_masked_where_its_url_became_a_path():
    from adaptlab.errors import forget_url_secrets, mask_url, remember_url_secrets

    remember_url_secrets(["--out", f"https://me:{PASSWORD}@host/x", "s3://b/k?X-Amz-Signature=abcdef"])
    try:
        assert mask_url(f"no store at /tmp/me:{PASSWORD}@host/x (abcdef)") == "no store at /tmp/me:***@host/x (***)"
    finally:
        forget_url_secrets()
    assert mask_url(f"/tmp/me:{PASSWORD}@host") == f"/tmp/me:{PASSWORD}@host"  # only what was given is remembered


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mlflow_at_an_unreachable_server_is_one_masked_line_within_bounded_time(tmp_path):
    pytest.importorskip("mlflow")
    store = _store(tmp_path / "store", ("bm25",))
    env = {**os.environ, "ADAPTLAB_PROGRESS": "0", "PYTHONPATH": os.pathsep.join(sys.path)}
    for name in (
        "MLFLOW_HTTP_REQUEST_TIMEOUT",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    ):
        env.pop(name, None)
    t0 = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "adaptlab",
            "export",
            "--store",
            str(store),
            "--to",
            "mlflow",
            "--out",
            f"http://u:{PASSWORD}@127.0.0.1:{_closed_port()}/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    took = time.monotonic() - t0
    line = assert_one_line_error(done.returncode, done.stderr, ("MLflow tracking store", "u:***@127.0.0.1"))
    assert PASSWORD not in done.stdout + done.stderr and took < 60, (took, line)


def test_mlflow_requests_are_bounded_unless_the_user_chose(monkeypatch):
    pytest.importorskip("mlflow")
    from adaptlab.results.exports import mlflow_log

    for name in mlflow_log.HTTP_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    mlflow_log._client("http://127.0.0.1:9")
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "3"  # the user's
    assert (
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2" and os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == "1"
    )
