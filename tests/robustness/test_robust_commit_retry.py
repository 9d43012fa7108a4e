"""A commit whose outcome is unknown says so, and a retry of a commit that landed adds nothing
(issue 28).

On S3: a small TCP proxy on 127.0.0.1 in front of moto's server forwards everything until the PUT of
a Delta commit file; it lets moto store it, drops moto's answer and closes the connection, and
refuses every connection after that until the test restores it (the endpoint was cut during
the commit). On local disk: a writer process killed between writing its data files and its log
entry, and one killed between its log entry and its checksum record.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from adaptlab import results
from robustness.hostile import _records, assert_one_line_error, cli
from s3servers import free_port, running

BUCKET = "adaptlab-cut"
_LOG_PUT = re.compile(rb"PUT /[^ ]*_delta_log/(?!0{20})\d{20}\.json")  # a commit, not the table's creation


class CutProxy:
    """A TCP proxy on 127.0.0.1:``port`` to ``127.0.0.1:upstream``, run in a process of its own
    (delta-rs holds the GIL while it waits for an answer, so it cannot run in the test's process).
    Controlled through files in ``control``: while ``armed`` exists, the connection whose request
    matches :data:`_LOG_PUT` is cut once moto answered it (``armed`` removed, ``cut`` and ``down``
    created); while ``down`` exists, every new connection is closed at once."""

    def __init__(self, port: int, upstream: int, control: Path) -> None:
        self.port, self.upstream, self.control = port, upstream, control

    def serve(self) -> None:
        srv = socket.create_server(("127.0.0.1", self.port))
        while True:
            client, _ = srv.accept()
            if (self.control / "down").exists():
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            state = {"cut": False}
            for args in ((client, upstream, state, True), (upstream, client, state, False)):
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, state: dict, to_server: bool) -> None:
        armed = self.control / "armed"
        try:
            while chunk := src.recv(65536):
                if to_server and _LOG_PUT.search(chunk) and armed.exists():
                    armed.unlink()
                    state["cut"] = True
                if not to_server and state["cut"]:  # moto answered the commit: the client never hears it
                    (self.control / "down").touch()
                    (self.control / "cut").touch()
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    pytest.importorskip("moto")
    with running("moto", tmp_path_factory.mktemp("moto_cut"), BUCKET) as server:
        yield server


@pytest.fixture
def proxy(moto, monkeypatch, tmp_path):
    """The control folder of a cut proxy in front of moto; the environment points at the proxy."""
    control = tmp_path / "proxy"
    control.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, str(port), str(moto.port), str(control)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_child_env(),
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.05)
        for k, v in dict(moto.env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}").items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("ADAPTLAB_STORE_TIMEOUT", "2")
        yield control
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _child_env() -> dict[str, str]:
    """This environment with the tests folder importable (robustness.*, s3servers)."""
    tests_dir = str(Path(__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")])}


def _commit_rows(system: str = "minilm"):
    run = results.run_record(
        system, "toy", model_id="m", model_revision=None, dataset_fingerprint="fp", seed=0, config={}
    )
    metrics = [{"system": system, "dataset": "toy", "measure": m, "value": 0.5} for m in ("ndcg@10", "acc@1")]
    return [run], metrics, _records(system).to_arrow()


def test_a_commit_cut_on_s3_is_unknown_and_its_retry_adds_nothing(proxy):
    uri = f"s3://{BUCKET}/cut-{proxy.parent.name}"
    store = results.open(uri, create=True)
    runs, metrics, per_query = _commit_rows()
    run_id = runs[0]["run_id"]
    (proxy / "armed").touch()
    with pytest.raises(results.StoreError) as info:
        store.commit(runs, metrics, per_query)
    message = str(info.value)
    assert (proxy / "cut").exists(), "the proxy never saw the commit's PUT"
    assert "\n" not in message and "outcome unknown" in message and "nothing was committed" not in message
    assert f"--has-run {run_id}" in message
    rc, out, err = cli(["results", "--store", uri, "--has-run", run_id])
    assert_one_line_error(rc, err)  # the endpoint is still cut: the question cannot be answered either
    (proxy / "down").unlink()
    rc, out, err = cli(["results", "--store", uri, "--has-run", run_id])
    assert rc == 0 and f"run {run_id}: in the store (committed at version 1)" in out, err
    again = store.commit(runs, metrics, per_query)  # the natural retry
    assert again.version == 1 and store.version() == 1
    assert store.runs().num_rows == 1 and store.per_query().num_rows == 3 and store.metrics().num_rows == 2
    store.close()


def test_evaluate_cut_on_s3_says_the_outcome_is_unknown_and_names_the_run_to_look_up(proxy, work):
    uri = f"s3://{BUCKET}/evaluate-{proxy.parent.name}"
    (proxy / "armed").touch()
    rc, out, err = cli(
        [
            "evaluate",
            "--qrels",
            "qrels.txt",
            "--run",
            "run.txt",
            "--metrics",
            "ndcg@10",
            "--bootstrap",
            "20",
            "--store",
            uri,
            "--dataset",
            "toy",
        ]
    )
    line = assert_one_line_error(rc, err, ("outcome unknown", "--has-run"))
    assert (proxy / "cut").exists() and "nothing was committed" not in line
    run_id = re.search(r"--has-run ([0-9a-f]{32})", line).group(1)
    (proxy / "down").unlink()
    rc, out, err = cli(["results", "--store", uri, "--has-run", run_id])
    assert rc == 0 and "in the store (committed at version 1)" in out, err


_EVALUATE = [
    "evaluate",
    "--qrels",
    "qrels.txt",
    "--run",
    "run.txt",
    "--metrics",
    "ndcg@10",
    "--bootstrap",
    "20",
    "--dataset",
    "toy",
]


def _row_counts(uri: str) -> tuple[int, int, int]:
    store = results.open(uri)
    try:
        return store.runs().num_rows, store.metrics(kind="all").num_rows, store.per_query().num_rows
    finally:
        store.close()


def test_evaluate_run_again_after_a_cut_commit_adds_nothing(proxy, work):
    """The user's natural retry: the same command again once the endpoint is back."""
    uri = f"s3://{BUCKET}/evaluate-again-{proxy.parent.name}"
    (proxy / "armed").touch()
    rc, out, err = cli([*_EVALUATE, "--store", uri])
    line = assert_one_line_error(rc, err, ("outcome unknown",))
    run_id = re.search(r"--has-run ([0-9a-f]{32})", line).group(1)
    (proxy / "down").unlink()
    before = _row_counts(uri)
    assert before == (1, 1, 3)  # the cut commit landed
    rc, out, err = cli([*_EVALUATE, "--store", uri])
    assert rc == 0, err
    assert f"already in the store as run {run_id} (version 1); nothing added" in err.splitlines()
    assert "ndcg@10" in out  # the evaluation is still printed
    assert _row_counts(uri) == before and results.open(uri).version() == 1
    rc, out, err = cli(["results", "--store", uri, "--has-run", run_id])
    assert rc == 0 and f"run {run_id}: in the store (committed at version 1)" in out, err


def test_evaluate_again_on_disk_adds_nothing_and_other_inputs_or_again_add_runs(work):
    store = str(work / "s")
    rc, _, err = cli([*_EVALUATE, "--store", store])
    assert rc == 0 and "already in the store" not in err, err
    assert _row_counts(store) == (1, 1, 3)
    rc, _, err = cli([*_EVALUATE, "--store", store])
    assert rc == 0 and re.search(
        r"^already in the store as run [0-9a-f]{32} \(version 1\); nothing added$", err, re.M
    ), err
    assert _row_counts(store) == (1, 1, 3)
    rc, _, err = cli([*_EVALUATE[:-2], "--dataset", "toy2", "--store", store])  # another dataset name: a new evaluation
    assert rc == 0 and "already in the store" not in err, err
    (work / "run.txt").write_text((work / "run.txt").read_text().replace("0.90 sys", "0.95 sys"))  # other scores
    rc, _, err = cli([*_EVALUATE, "--store", store])
    assert rc == 0 and "already in the store" not in err, err
    rc, _, err = cli([*_EVALUATE, "--store", store, "--again"])  # the same evaluation, forced
    assert rc == 0 and "already in the store" not in err, err
    assert _row_counts(store) == (4, 4, 12) and results.open(store).version() == 4


def test_a_study_run_again_after_a_cut_commit_adds_nothing(proxy, work, monkeypatch):
    uri = f"s3://{BUCKET}/study-again-{proxy.parent.name}"
    (proxy / "armed").touch()
    rc, out, err = cli(["run", "study.toml", "--store", uri])
    line = assert_one_line_error(rc, err, ("outcome unknown",))
    run_id = re.search(r"--has-run ([0-9a-f]{32})", line).group(1)
    (proxy / "down").unlink()
    before = _row_counts(uri)
    assert before[0] == 1 and before[2] > 0
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")  # the study's line is a progress line
    rc, out, err = cli(["run", "study.toml", "--store", uri])
    assert rc == 0, err
    assert f"syn: already in the store as run {run_id} (version 1); nothing added" in err
    assert _row_counts(uri) == before and results.open(uri).version() == 1
    rc, out, err = cli(["results", "--store", uri, "--has-run", run_id])
    assert rc == 0 and "in the store (committed at version 1)" in out, err


def test_has_run_says_which_runs_are_missing_with_exit_1(tmp_path):
    store = results.open(tmp_path / "s", create=True)
    runs, metrics, per_query = _commit_rows()
    store.commit(runs, metrics, per_query)
    rc, out, err = cli(["results", "--store", str(tmp_path / "s"), "--has-run", f"{runs[0]['run_id']},abc123"])
    assert rc == 1, err
    assert f"run {runs[0]['run_id']}: in the store (committed at version 1)" in out
    assert "run abc123: not in the store (version 1)" in out


def test_other_runs_reusing_a_landed_run_id_are_still_refused(tmp_path):
    store = results.open(tmp_path / "s", create=True)
    runs, metrics, per_query = _commit_rows()
    store.commit(runs, metrics, per_query)
    other, _, _ = _commit_rows("other")
    other[0]["run_id"] = runs[0]["run_id"]
    with pytest.raises(results.StoreError, match="is already in the store"):
        store.commit(other)
    assert store.version() == 1 and store.runs().num_rows == 1


_CHILD = textwrap.dedent("""
    import os, signal, sys
    from datetime import datetime
    import deltalake
    from adaptlab import results
    from adaptlab.results import writer
    from robustness.test_robust_commit_retry import _commit_rows

    where, root, run_id, when = sys.argv[1:5]
    runs, metrics, per_query = _commit_rows("killed")
    runs[0].update(run_id=run_id, timestamp=datetime.fromisoformat(when))

    def die_before_the_log(self, *args, **kwargs):  # a kill between the data files and the log entry
        os.kill(os.getpid(), signal.SIGKILL)

    if where == "before-log":
        deltalake.DeltaTable.create_write_transaction = die_before_the_log
    else:
        writer.ResultsStore._record_checksums = lambda self, label: os.kill(os.getpid(), signal.SIGKILL)
    results.open(root).commit(runs, metrics, per_query)
""")


@pytest.mark.parametrize("where", ["before-log", "after-log"])
def test_a_writer_killed_during_its_commit_is_resolved_by_run_id_and_its_retry_lands_once(tmp_path, where):
    root = tmp_path / "s"
    results.open(root, create=True).close()
    runs, metrics, per_query = _commit_rows("killed")  # the same rows as the killed writer's, for the retry
    run_id = runs[0]["run_id"]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, where, str(root), run_id, runs[0]["timestamp"].isoformat()],
        capture_output=True,
        timeout=120,
        env=_child_env(),
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    landed = where == "after-log"
    assert (root / "kind=runs").is_dir()  # the data files were written either way
    rc, out, err = cli(["results", "--store", str(root), "--has-run", run_id])
    assert rc == (0 if landed else 1), err
    assert ("in the store (committed at version 1)" if landed else "not in the store (version 0)") in out
    store = results.open(root)
    retry = store.commit(runs, metrics, per_query)
    assert retry.version == 1 and store.version() == 1
    assert store.runs().num_rows == 1 and store.per_query().num_rows == 3 and store.metrics().num_rows == 2


if __name__ == "__main__":  # the proxy's own process: PORT UPSTREAM_PORT CONTROL_DIR
    CutProxy(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])).serve()
