"""``adaptlab submit`` against a real Ray head node on 127.0.0.1 with token authentication.

Starts ``ray start --head`` (dashboard bound to 127.0.0.1, RAY_AUTH_MODE=token), checks that the
Jobs API refuses a request without the token, submits a study (the quickstart's shape with a
fast hashing encoder, and the real jobs/quickstart.toml through the CLI), waits, and reads the store back.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from adaptlab.study.submit import submission_id, submit_study

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head_node(tmp_path_factory):
    ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    token = secrets.token_hex(16)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    env.pop("RAY_ADDRESS", None)
    gcs, dash = _free_port(), _free_port()
    start = subprocess.run(
        [ray_bin, "start", "--head", f"--port={gcs}", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
         f"--dashboard-port={dash}", "--num-cpus=4", "--include-dashboard=true", "--disable-usage-stats"],
        env=env, capture_output=True, text=True, timeout=180,
    )
    if start.returncode != 0:
        pytest.fail(f"ray start failed: {start.stderr[-2000:]}")
    old = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    try:
        yield f"http://127.0.0.1:{dash}"
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_jobs_api_refuses_requests_without_the_token(head_node):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{head_node}/api/jobs/", timeout=30)
    assert e.value.code in (401, 403)


def test_submit_waits_and_results_land_in_the_store(head_node, tmp_path):
    study = REPO / "jobs" / "_e2e_submit_study.toml"
    study.write_text(
        '[study]\nname = "e2e"\n[[datasets]]\nspec = "synthetic:n_documents=8,seed=2"\n'
        '[[models]]\nname = "hash"\nref = "hash:64"\n[bootstrap]\nn_resamples = 200\n[embedding]\nnum_actors = 1\n'
    )
    store = tmp_path / "store"
    try:
        logs: list[str] = []
        res = submit_study(study, head_node, store=str(store), wait=True, timeout_s=900, log=logs.append)
        assert res.status == "SUCCEEDED", "".join(logs)[-3000:]
        assert res.submission_id == submission_id(study, str(store))
        again = submit_study(study, head_node, store=str(store), wait=False)
        assert again.resubmitted and again.submission_id == res.submission_id
    finally:
        study.unlink()
    from adaptlab import results

    st = results.open(store)
    assert st.runs().column("system").to_pylist() == ["hash"]
    assert st.metrics(measure="acc@5").num_rows == 1
    assert st.per_query().num_rows > 0


def test_submit_quickstart_cli(head_node, tmp_path):
    res = subprocess.run([sys.executable, "-m", "adaptlab", "submit", str(REPO / "jobs" / "quickstart.toml"),
                          "--address", head_node, "--store", str(tmp_path / "qs"), "--wait"],
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    from adaptlab import results

    assert results.open(tmp_path / "qs").metrics(system="minilm").num_rows >= 5
