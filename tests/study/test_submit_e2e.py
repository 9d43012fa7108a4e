"""``adaptlab submit``: fast checks against a fake Jobs API client and a fake HTTP server
(entrypoint quoting, token variables, one-line errors, attempts after FAILED, store resolution),
then (slow) against a real Ray head node on 127.0.0.1 with token authentication.

The real head: ``ray start --head`` (dashboard bound to 127.0.0.1, RAY_AUTH_MODE=token) is
started on free ports in its own temp dir and stopped by pid; checks that the Jobs API refuses a
request without the token, that only RAY_AUTH_TOKEN suffices, that a shell-like store is one
argument, that a modified working copy is the code that runs, and reads the store back.
"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from adaptlab.errors import ConfigError
from adaptlab.evaluation.persist import SUBMITTED_CODE_ENV
from adaptlab.study import submit as submit_mod
from adaptlab.study.submit import CODE_ENV, JobsApiError, build_entrypoint, resolve_store, submission_id, submit_study
from testkit.ray_cluster import HeadPorts, start_head, stop_cluster

REPO = Path(__file__).resolve().parents[2]
slow = pytest.mark.slow
HOSTILE = "x; echo INJECTED > FILE"


# -- fast: no Ray cluster ------------------------------------------------------------------------
def test_entrypoint_quotes_every_argument():
    cmd = build_entrypoint("jobs/a b.toml", f"/data/{HOSTILE}")
    assert shlex.split(cmd) == ["python", "-m", "adaptlab", "run", "jobs/a b.toml", "--store", f"/data/{HOSTILE}"]
    assert "$(" not in shlex.split(build_entrypoint("jobs/q.toml", "$(touch /tmp/p)"))[0]


def test_code_env_names_agree():
    assert CODE_ENV == SUBMITTED_CODE_ENV


def test_store_resolution(tmp_path):
    local, remote = "http://127.0.0.1:8265", "http://10.0.0.5:8265"
    assert resolve_store("results/q", base=tmp_path, address=local) == str(tmp_path / "results" / "q")
    assert resolve_store("s3://bucket/q", base=tmp_path, address=remote) == "s3://bucket/q"
    assert resolve_store("file:///mnt/shared/q", base=tmp_path, address=remote) == "file:///mnt/shared/q"
    for bad in ("results/q", "/abs/q"):
        with pytest.raises(ConfigError, match="s3://"):
            resolve_store(bad, base=tmp_path, address=remote)
    with pytest.raises(ConfigError, match="credentials"):
        resolve_store("s3://key:secret@bucket/q", base=tmp_path, address=remote)


def test_cli_refuses_a_local_store_for_a_remote_cluster_before_any_request(capsys):
    from adaptlab.cli import main

    assert main(["submit", str(REPO / "jobs" / "quickstart.toml"), "--address", "http://192.0.2.1:8265"]) == 2
    err = capsys.readouterr().err.strip()
    assert "s3://" in err and "\n" not in err and "Traceback" not in err


def test_dataset_outside_the_project_is_refused(study_file, monkeypatch):
    monkeypatch.setattr(submit_mod, "_client", lambda address: pytest.fail("no request expected"))
    study_file.write_text(study_file.read_text().replace("synthetic:n_documents=4", "beir:../outside/scifact"))
    with pytest.raises(ConfigError, match="outside the project folder"):
        submit_study(study_file, "http://127.0.0.1:1", store="s3://b/x")


class _Job:
    def __init__(self, sid, status):
        self.submission_id, self.status = sid, status


class FakeClient:
    """The part of JobSubmissionClient that submit uses, with jobs in memory."""

    def __init__(self, jobs=None):
        self.jobs = dict(jobs or {})
        self.submitted = []

    def list_jobs(self):
        return [_Job(k, v) for k, v in self.jobs.items()]

    def get_job_status(self, sid):
        return f"JobStatus.{self.jobs[sid]}"

    def submit_job(self, **kw):
        self.submitted.append(kw)
        self.jobs[kw["submission_id"]] = "PENDING"
        return kw["submission_id"]

    def get_job_logs(self, sid):
        return ""


@pytest.fixture
def study_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "7.7.7"\n')
    (tmp_path / "platform" / "adaptlab").mkdir(parents=True)
    (tmp_path / "platform" / "adaptlab" / "__init__.py").write_text("")
    f = tmp_path / "jobs" / "s.toml"
    f.parent.mkdir()
    f.write_text(
        '[study]\nname = "s"\n[[datasets]]\nspec = "synthetic:n_documents=4"\n'
        '[[models]]\nname = "hash"\nref = "hash:8"\n'
    )
    return f


def test_submit_quotes_store_and_uploads_the_working_copy(study_file, tmp_path, monkeypatch):
    fake = FakeClient()
    monkeypatch.setattr(submit_mod, "_client", lambda address: fake)
    res = submit_study(study_file, "http://127.0.0.1:1", store=str(tmp_path / HOSTILE))
    kw = fake.submitted[0]
    assert shlex.split(kw["entrypoint"])[-2:] == ["--store", str(tmp_path / HOSTILE)]
    env = kw["runtime_env"]
    # an allow-list staged in a folder of its own (tests/robustness/test_robust_submit.py checks its content)
    assert env["working_dir"] != str(tmp_path) and env["env_vars"]["PYTHONPATH"] == "platform"
    assert "excludes" not in env and not Path(env["working_dir"]).exists()  # removed once Ray has packed it
    code = json.loads(env["env_vars"][CODE_ENV])
    assert code["version"] == "7.7.7" and len(code["tree_sha256"]) == 64 and res.code == code
    assert res.attempt == 1 and res.previous_status is None and not res.resubmitted


def test_resubmit_after_failed_starts_a_new_attempt(study_file, tmp_path, monkeypatch):
    store = str(tmp_path / "st")
    sid = submission_id(study_file.resolve(), store)
    fake = FakeClient({sid: "FAILED"})
    monkeypatch.setattr(submit_mod, "_client", lambda address: fake)
    res = submit_study(study_file, "http://127.0.0.1:1", store=store)
    assert (res.submission_id, res.attempt, res.previous_status) == (f"{sid}-a2", 2, "FAILED")
    fake.jobs[f"{sid}-a2"] = "RUNNING"
    again = submit_study(study_file, "http://127.0.0.1:1", store=store)
    assert again.resubmitted and again.submission_id == f"{sid}-a2" and len(fake.submitted) == 1
    fake.jobs[f"{sid}-a2"] = "STOPPED"
    third = submit_study(study_file, "http://127.0.0.1:1", store=store)
    assert third.submission_id == f"{sid}-a3" and third.previous_status == "STOPPED"


def test_token_alone_sets_token_mode(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_AUTH_MODE", "unset")  # recorded, so teardown also removes what the code sets
    monkeypatch.delenv("RAY_AUTH_MODE")  # (a bare delenv of an absent variable records nothing: "token" leaked)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "a" * 32)
    submit_mod._ensure_token_mode()
    assert os.environ["RAY_AUTH_MODE"] == "token"
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # an explicit choice is respected
    submit_mod._ensure_token_mode()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"


class _Handler(http.server.BaseHTTPRequestHandler):
    def _reply(self):
        if self.path.startswith("/api/version"):
            body, code = (
                json.dumps({"version": "4", "ray_version": "2.60.0", "ray_commit": "x", "session_name": "s"}).encode(),
                200,
            )
        else:
            body, code = b"<html>\n<h1>500 Internal Server Error</h1>\nTraceback (most recent call last):\n</html>", 500
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _reply

    def log_message(self, *args):
        pass


@pytest.fixture
def http500():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _reset_ray_auth_state() -> None:
    """Ray's cached auth config and token, read again from the (restored) environment: a client
    built in this process under RAY_AUTH_MODE=token caches both, and every later embedded Ray start
    of the session then failed with AuthenticationError (Ray's own tests reset them the same way)."""
    if "ray._raylet" not in sys.modules:
        return
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def test_jobs_api_http_500_is_one_line(http500, tmp_path, capsys):
    from adaptlab.cli import main

    try:
        with pytest.MonkeyPatch.context() as mp:  # undone before Ray's state is reset below
            mp.setenv("RAY_AUTH_MODE", "unset")  # recorded, so the "token" the client sets is removed
            mp.delenv("RAY_AUTH_MODE")
            mp.setenv("RAY_AUTH_TOKEN", "b" * 32)
            with pytest.raises(JobsApiError):
                submit_study(REPO / "jobs" / "quickstart.toml", http500, store=str(tmp_path / "s"))
            assert (
                main(
                    [
                        "submit",
                        str(REPO / "jobs" / "quickstart.toml"),
                        "--address",
                        http500,
                        "--store",
                        str(tmp_path / "s"),
                    ]
                )
                == 2
            )
    finally:
        _reset_ray_auth_state()
    err = capsys.readouterr().err.strip()
    assert "500" in err and "\n" not in err and "Traceback" not in err and "b" * 32 not in err


# -- slow: a real head node ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def head_node():
    """A real head node on 127.0.0.1 with token auth; yields (dashboard address, client env).

    Clients run in subprocesses: Ray caches the token of the first cluster a process talks to,
    and this test process may already run an embedded Ray of its own."""
    token = secrets.token_hex(16)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    ports = HeadPorts()
    temp_dir = Path(tempfile.mkdtemp(prefix="raye2e", dir="/tmp"))  # short: Ray puts sockets there
    try:
        start = start_head(ports, temp_dir, env, num_cpus=4)
        if start.returncode != 0:
            pytest.fail(f"ray start failed: {start.stderr[-2000:]}")
        yield ports.dashboard_address, env
    finally:
        stop_cluster(temp_dir, ports)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _submit(study: Path, address: str, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adaptlab", "submit", str(study), "--address", address, *extra],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )


@slow
def test_jobs_api_refuses_requests_without_the_token(head_node):
    address, _ = head_node
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{address}/api/jobs/", timeout=30)
    assert e.value.code in (401, 403)


@slow
def test_submit_with_a_wrong_token_is_a_clear_error(head_node, tmp_path):
    address, env = head_node
    res = _submit(REPO / "jobs" / "quickstart.toml", address, {**env, "RAY_AUTH_TOKEN": "0" * 32})
    assert res.returncode == 2 and "token" in res.stderr.lower() and "Traceback" not in res.stderr


@slow
def test_submit_quickstart_waits_attaches_and_results_land_in_the_store(head_node, tmp_path):
    """The README's quickstart (MiniLM on a Ray actor) submitted with --wait: the client waits for
    SUCCEEDED, the same study and store submitted again attach to that job instead of running it
    twice, and the rows are in the store. (One job for what two jobs, a hash study and the
    quickstart, showed before: each job costs a driver start and a run.)"""
    address, env = head_node
    study, store = REPO / "jobs" / "quickstart.toml", tmp_path / "qs"
    sid = submission_id(study, str(store))
    res = _submit(study, address, env, "--store", str(store), "--wait")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"submitted job {sid}: SUCCEEDED" in res.stdout
    again = _submit(study, address, env, "--store", str(store))
    assert again.returncode == 0 and f"attached to existing job {sid}" in again.stdout, again.stdout + again.stderr
    from adaptlab import results

    st = results.open(store)
    assert sorted(st.runs().column("system").to_pylist()) == ["bm25", "minilm"]  # the quickstart's two systems
    assert st.metrics(system="minilm").num_rows >= 5
    assert st.metrics(measure="acc@5").num_rows == 2
    assert st.per_query().num_rows > 0


@slow
def test_modified_working_copy_runs_with_only_the_token_variable_and_a_shell_like_store(head_node, tmp_path):
    """One job proves three things: RAY_AUTH_TOKEN alone is enough (no RAY_AUTH_MODE), a store
    path full of shell syntax is one argument (nothing runs), and the job runs the submitted
    working copy (its modified version string is what the store records)."""
    address, env = head_node
    wc = tmp_path / "wc"
    shutil.copytree(REPO / "platform", wc / "platform", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO / "pyproject.toml", wc / "pyproject.toml")
    (wc / "platform" / "adaptlab" / "_version.py").write_text('__version__ = "9.9.9+workingcopy"\n')
    study = wc / "jobs" / "wc.toml"
    study.parent.mkdir()
    study.write_text(
        '[study]\nname = "wc"\n[[datasets]]\nspec = "synthetic:n_documents=6,seed=1"\n'
        '[[models]]\nname = "hash"\nref = "hash:32"\n[bootstrap]\nn_resamples = 50\n'
        "[embedding]\nuse_ray = false\n"
    )
    marker = tmp_path / "INJECTED"
    store = tmp_path / f"x; touch {marker}; echo"
    client_env = {k: v for k, v in env.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")}
    client_env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token: only the variable
    res = _submit(study, address, client_env, "--store", str(store), "--wait")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "code: adaptlab" in res.stdout and "files " in res.stdout
    assert not marker.exists(), "the store path was run as a shell command"
    from adaptlab import results

    runs = results.open(store).runs()
    assert runs.column("package_version").to_pylist() == ["9.9.9+workingcopy"]
    config = json.loads(runs.column("config")[0].as_py())
    assert config["submitted_code"]["tree_sha256"] == submit_mod.source_info(wc)["tree_sha256"]
