"""A damaged store is never read as empty, and every store failure is one clean line (issue 19).

Each case damages a copy of a small store (versions 0, 1, 2) the way a probe did: an emptied,
truncated or garbled commit file, a missing data file, a deleted checksum folder, the checksum
record of a commit whose log file vanished; then a full disk, a frozen S3 endpoint and noisy
native error text.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from adaptlab import results
from adaptlab.results.damage import StoreDamagedError
from adaptlab.results.native import remote_options, short_message
from robustness.hostile import assert_one_line_error, build_store, cli

LOG = "_delta_log"


def _log(root: Path, version: int) -> Path:
    return root / LOG / f"{version:020d}.json"


def _run(system: str) -> dict:
    return results.run_record(
        system, "toy", model_id="m", model_revision=None, dataset_fingerprint="fp", seed=0, config={}
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A store with versions 0 (creation), 1 (two runs, metrics, per-query rows) and 2 (one run)."""
    root = tmp_path_factory.mktemp("robust_store") / "store"
    store = build_store(root)
    store.commit([_run("third")], [{"system": "third", "dataset": "toy", "measure": "mrr", "value": 0.5}])
    store.close()
    return root


@pytest.fixture
def store_copy(template, tmp_path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(template, root)
    return root


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _truncate(p: Path) -> None:
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])


def _garble(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    raw[40:48] = b"\xff\x00}}]]{{"
    p.write_bytes(bytes(raw))


def _cut_at_a_line(p: Path) -> None:  # still valid JSON lines: only the action count shows it
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join(lines[:2]))


DAMAGE = {
    "emptied": _empty,
    "truncated": _truncate,
    "garbled": _garble,
    "cut at a line": _cut_at_a_line,
    "deleted": Path.unlink,
}


@pytest.mark.parametrize(
    ("damage", "version"), [(d, v) for d in sorted(DAMAGE) for v in (1, 2) if (d, v) != ("deleted", 2)]
)  # that one: vanished commit, below
def test_a_damaged_commit_file_is_one_line_refuses_commits_and_repair_says_what_it_did(store_copy, damage, version):
    DAMAGE[damage](_log(store_copy, version))
    rc, out, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    line = assert_one_line_error(rc, err, (f"{version:020d}.json", f"version {version}", "repair"))
    assert "rows" not in out and "panicked" not in err and "<unknown>" not in line
    with pytest.raises(StoreDamagedError) as info:
        results.open(store_copy)
    assert info.value.version == version
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0, err
    assert (
        f"{version:020d}.json" in out and f"cut back to version {version - 1}" in out and "_adaptlab_quarantine" in out
    )
    quarantined = list((store_copy / "_adaptlab_quarantine").rglob(f"{version:020d}.json"))
    assert len(quarantined) == (0 if damage == "deleted" else 1)
    store = results.open(store_copy)
    assert store.version() == version - 1
    assert store.runs().num_rows == (0 if version == 1 else 2)
    store.commit([_run("after")])
    assert store.version() == version and results.open(store_copy).runs(system="after").num_rows == 1
    rc, out, _ = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "no damage found" in out


def test_a_commit_is_refused_when_the_log_is_damaged_under_an_open_store(store_copy):
    store = results.open(store_copy)
    _empty(_log(store_copy, 2))
    with pytest.raises(StoreDamagedError, match=r"00000000000000000002\.json \(version 2\) is empty"):
        store.commit([_run("refused")])
    assert _log(store_copy, 2).read_bytes() == b"" and not _log(store_copy, 3).exists()


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_missing_or_cut_data_file_is_flagged_refuses_commits_and_repair_restores(store_copy, damage):
    victim = next((store_copy / "kind=runs").iterdir())
    store = results.open(store_copy)
    versions = {
        p.name: v for v in (1, 2) for p in store_copy.glob("kind=runs/*") if p.name in _log(store_copy, v).read_text()
    }
    problem = "is missing" if damage == "deleted" else "bytes, the log recorded"
    victim.unlink() if damage == "deleted" else _truncate(victim)
    rc, _, err = cli(["results", "--store", str(store_copy)])
    assert_one_line_error(rc, err, (victim.name, f"version {versions[victim.name]}", problem))
    with pytest.raises(StoreDamagedError, match=problem):
        store.commit([_run("refused")])
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0, err
    good = versions[victim.name] - 1
    assert victim.name in out and f"restored the store to version {good} as new version 3" in out
    reread = results.open(store_copy)
    assert reread.version() == 3 and reread.runs().num_rows == (2 if good == 1 else 0)
    reread.commit([_run("after")])


def strip_log_checksums(root: Path, version: int) -> None:
    """Make commit ``version`` look written by an adaptlab that recorded checksums only in the
    checksum folder (none in the commit's own log entry)."""
    import json

    path = _log(root, version)
    actions = [json.loads(ln) for ln in path.read_text().splitlines()]
    for a in actions:
        a.get("commitInfo", {}).pop("adaptlab.checksums", None)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_a_deleted_checksum_folder_leaves_every_file_verified_by_its_commit(store_copy, monkeypatch):
    monkeypatch.setattr("adaptlab.results.integrity.GRACE_SECONDS", 0.0)
    shutil.rmtree(store_copy / "_adaptlab_checksums")
    rc, out, err = cli(["results", "--store", str(store_copy), "--strict"])
    assert rc == 0 and "(5 rows)" in out and "WARNING" not in err, err
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "copied the SHA-256 of 6 data file(s) from their commits' log entries" in out, err
    rc, out, err = cli(["results", "--store", str(store_copy), "--strict"])
    assert rc == 0 and "WARNING" not in err


def test_a_deleted_checksum_folder_of_commits_without_logged_checksums_is_a_warning(store_copy, monkeypatch):
    monkeypatch.setattr("adaptlab.results.integrity.GRACE_SECONDS", 0.0)
    strip_log_checksums(store_copy, 1)
    strip_log_checksums(store_copy, 2)
    shutil.rmtree(store_copy / "_adaptlab_checksums")
    rc, out, err = cli(["results", "--store", str(store_copy)])
    assert rc == 0 and "(5 rows)" in out
    warning = [ln for ln in err.splitlines() if "WARNING" in ln]
    assert len(warning) == 1 and "_adaptlab_checksums/ is missing" in warning[0] and "unverified" in warning[0]


def test_a_missing_checksum_record_names_the_version(store_copy, monkeypatch):
    monkeypatch.setattr("adaptlab.results.integrity.GRACE_SECONDS", 0.0)
    commit_id = results.open(store_copy).history().to_pylist()[0]["commit_id"]  # version 2
    (store_copy / "_adaptlab_checksums" / f"{commit_id}.json").unlink()
    rc, _, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    assert rc == 0 and "WARNING" not in err, err  # its log entry still holds its checksums
    strip_log_checksums(store_copy, 2)
    rc, _, err = cli(["results", "--store", str(store_copy), "--table", "runs"])
    assert rc == 0
    assert "WARNING" in err and "no checksum record" in err and "version(s) 2" in err


def test_a_checksum_record_whose_commit_vanished_is_flagged(store_copy):
    _log(store_copy, 2).unlink()  # the last commit file: the log alone cannot tell
    rc, _, err = cli(["results", "--store", str(store_copy)])
    assert_one_line_error(rc, err, ("_adaptlab_checksums/", "not in the log", "a commit file was deleted"))
    with pytest.raises(StoreDamagedError):
        results.open(store_copy)
    rc, out, err = cli(["results", "repair", "--store", str(store_copy)])
    assert rc == 0 and "records the checksums of a commit that is not in the log: moved it to" in out, err
    assert results.open(store_copy).version() == 1


# -- one failure, one line ---------------------------------------------------------------------


def _full_disk_writer(store: results.ResultsStore, calls: list[int]):
    """The log entry's write as on a full disk (the commit's data file landed before it): ENOSPC,
    with a Rust-style panic on fd 2."""

    def write(self, *args, **kwargs):
        calls.append(1)
        os.write(2, b"thread 'tokio-rt-worker' panicked at object_store/src/buffered.rs:369:41:\nAlready shut down\n")
        raise OSError(errno.ENOSPC, "Generic LocalFileSystem error: No space left on device (os error 28)")

    return write


def test_a_full_disk_is_one_line_not_retried_and_leaves_no_file(store_copy, monkeypatch, capfd):
    import deltalake

    store = results.open(store_copy)
    before = sorted(p.name for p in (store_copy / "kind=runs").iterdir())
    calls: list[int] = []
    monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", _full_disk_writer(store, calls))
    t0 = time.monotonic()
    with pytest.raises(results.StoreError) as info:
        store.commit([_run("full")])
    message = str(info.value)
    assert len(calls) == 1 and time.monotonic() - t0 < 10
    assert "\n" not in message and "No space left on device" in message and "not retried" in message
    assert "nothing was committed (the store was at version 2 before it)" in message and "1 data file(s)" in message
    assert sorted(p.name for p in (store_copy / "kind=runs").iterdir()) == before
    assert "panicked" not in capfd.readouterr().err
    assert results.open(store_copy).version() == 2


def test_a_real_full_disk_is_one_line_and_leaves_no_data_file(tiny_disk, capfd):
    store = results.open(tiny_disk / "s", create=True)
    big = dict(_run("big"), dataset_fingerprint=os.urandom(40_000).hex())
    t0 = time.monotonic()
    with pytest.raises(results.StoreError) as info:
        store.commit([big])
    message = str(info.value)
    assert time.monotonic() - t0 < 20 and "\n" not in message
    assert "No space left on device" in message and "not retried" in message and "version 0" in message
    assert not list((tiny_disk / "s").glob("kind=*/*.parquet"))
    assert "panicked" not in capfd.readouterr().err


def test_s3_errors_lose_ansi_codes_and_server_xml_but_keep_the_code():
    raw = (
        '\x1b[31mGeneric S3 error\x1b[0m: Error performing put request: response error "<?xml version="1.0" '
        'encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist'
        '</Message><BucketName>b</BucketName><RequestId>abc</RequestId></Error>" 0: <unknown> 1: <unknown>\n'
        "12: start_thread at ./nptl/pthread_create.c:442:8"
    )
    line = short_message(RuntimeError(raw))
    assert "\x1b" not in line and "<" not in line and "RequestId" not in line and "\n" not in line
    assert "NoSuchBucket" in line and "The specified bucket does not exist" in line and "Generic S3 error" in line
    assert "start_thread" not in line and "<unknown>" not in line


@pytest.mark.parametrize(
    ("error", "permanent", "retried"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), True, False),
        (PermissionError(errno.EACCES, "Permission denied"), True, False),
        (RuntimeError("Generic S3 error: 403 Forbidden (S3 error AccessDenied: Access Denied)"), True, False),
        (
            RuntimeError("Generic LocalFileSystem error: Unable to open file: No such file or directory (os error 2)"),
            True,
            False,
        ),
        (
            RuntimeError("Error performing GET in 4.1s, after 1 retries, max_retries: 2 - operation timed out"),
            False,
            True,
        ),
        (RuntimeError("after 2 retries, max_retries: 2 - Server returned non-2xx status code: 503"), False, True),
        (OSError("connection reset by peer"), False, False),
    ],
)
def test_which_errors_a_commit_retries(error, permanent, retried):
    from adaptlab.results.native import is_permanent, retried_already

    assert (is_permanent(error), retried_already(error)) == (permanent, retried)


def test_s3_time_outs_are_bounded_and_configurable(monkeypatch):
    defaults = remote_options(None)
    total = float(defaults["timeout"][:-1]) + float(defaults["retry_timeout"][:-1])
    assert total < 60 and defaults["connect_timeout"] == "5s"
    assert remote_options({"TIMEOUT": "90s"})["TIMEOUT"] == "90s" and "timeout" not in remote_options({"TIMEOUT": "9s"})
    monkeypatch.setenv("ADAPTLAB_STORE_TIMEOUT", "abc")
    with pytest.raises(
        results.StoreError, match="ADAPTLAB_STORE_TIMEOUT='abc': expected a positive number of seconds up to 3600"
    ):
        remote_options(None)


@pytest.fixture
def frozen_endpoint():
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.2)
    held, stop = [], threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for c in held:
            c.close()
        srv.close()


def test_a_frozen_s3_endpoint_fails_within_the_configured_time_out(frozen_endpoint, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_STORE_TIMEOUT", "1")
    options = {
        "AWS_ENDPOINT_URL": frozen_endpoint,
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "hidden-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    t0 = time.monotonic()
    with pytest.raises(results.StoreError) as info:
        results.open("s3://bucket/store", storage_options=options)
    took = time.monotonic() - t0
    message = str(info.value)
    assert took < 15, took
    assert "\n" not in message and "timed out" in message and "ADAPTLAB_STORE_TIMEOUT=1" in message
    assert "hidden-secret" not in message
