"""``adaptlab submit`` against a real Ray head node on 127.0.0.1 with token authentication.

Starts ``ray start --head`` (dashboard bound to 127.0.0.1, RAY_AUTH_MODE=token), checks that the
Jobs API refuses a request without the token, submits a study (the quickstart's shape with a
fast hashing encoder, and the real jobs/quickstart.toml through the CLI), waits, and reads the store back.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from adaptlab.study.submit import submission_id

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head_node():
    """A real head node on 127.0.0.1 with token auth; yields (dashboard address, client env).

    Clients run in subprocesses: Ray caches the token of the first cluster a process talks to,
    and this test process may already run an embedded Ray of its own."""
    ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    token = secrets.token_hex(16)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    gcs, dash = _free_port(), _free_port()
    temp_dir = Path(tempfile.mkdtemp(prefix="raye2e", dir="/tmp"))  # short: Ray puts sockets there
    start = subprocess.run(
        [ray_bin, "start", "--head", f"--port={gcs}", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
         f"--dashboard-port={dash}", "--num-cpus=4", "--include-dashboard=true", "--disable-usage-stats",
         f"--temp-dir={temp_dir}"],
        env=env, capture_output=True, text=True, timeout=180,
    )
    try:
        if start.returncode != 0:
            pytest.fail(f"ray start failed: {start.stderr[-2000:]}")
        yield f"http://127.0.0.1:{dash}", env
    finally:
        _stop_own_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _stop_own_cluster(temp_dir: Path) -> None:
    """Stop only this test's head node: every process whose command line names its temp dir
    (`ray stop` would stop every Ray on the machine, including other users' runs)."""
    needle = str(temp_dir).encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if needle in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.2)


def _submit(study: Path, address: str, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adaptlab", "submit", str(study), "--address", address, *extra],
                          capture_output=True, text=True, timeout=1800, env=env)


def test_jobs_api_refuses_requests_without_the_token(head_node):
    address, _ = head_node
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{address}/api/jobs/", timeout=30)
    assert e.value.code in (401, 403)


def test_submit_with_a_wrong_token_is_a_clear_error(head_node, tmp_path):
    address, env = head_node
    res = _submit(REPO / "jobs" / "quickstart.toml", address, {**env, "RAY_AUTH_TOKEN": "0" * 32})
    assert res.returncode == 2 and "token" in res.stderr.lower() and "Traceback" not in res.stderr


def test_submit_waits_and_results_land_in_the_store(head_node, tmp_path):
    address, env = head_node
    study = REPO / "jobs" / "_e2e_submit_study.toml"
    study.write_text(
        '[study]\nname = "e2e"\n[[datasets]]\nspec = "synthetic:n_documents=8,seed=2"\n'
        '[[models]]\nname = "hash"\nref = "hash:64"\n[bootstrap]\nn_resamples = 200\n[embedding]\nnum_actors = 1\n'
    )
    store = tmp_path / "store"
    try:
        sid = submission_id(study, str(store))
        res = _submit(study, address, env, "--store", str(store), "--wait")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        assert f"submitted job {sid}: SUCCEEDED" in res.stdout
        again = _submit(study, address, env, "--store", str(store))
        assert again.returncode == 0 and f"attached to existing job {sid}" in again.stdout
    finally:
        study.unlink()
    from adaptlab import results

    st = results.open(store)
    assert st.runs().column("system").to_pylist() == ["hash"]
    assert st.metrics(measure="acc@5").num_rows == 1
    assert st.per_query().num_rows > 0


def test_submit_quickstart_cli(head_node, tmp_path):
    address, env = head_node
    res = _submit(REPO / "jobs" / "quickstart.toml", address, env, "--store", str(tmp_path / "qs"), "--wait")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    from adaptlab import results

    assert results.open(tmp_path / "qs").metrics(system="minilm").num_rows >= 5
