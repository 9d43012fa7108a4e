"""Issue 12's multi-node run: results that outlive the cluster.

A Ray head and a second Ray node (``ray start``, 127.0.0.1, token auth on, their own ports and
temp dir), an S3 server (moto) on 127.0.0.1, then ``adaptlab submit jobs/quickstart.toml
--store s3://BUCKET/quickstart --wait``. Credentials reach the nodes only through the
environment of ``ray start`` (as a Kubernetes Secret's env or a VM's env file would); the
client has the Ray token and nothing else. A separate Python process queries the results from
S3 with ``adaptlab.results.open`` and SQL, before and after the whole Ray cluster is stopped.
Every process is started here and stopped by pid (or by its temp dir) in ``finally``.

moto proves function, not concurrency: its conditional put is not atomic under races.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from testkit.ray_cluster import HeadPorts, free_port, start_head, start_worker, stop_cluster, stop_pids

REPO = Path(__file__).resolve().parents[2]
BUCKET = "adaptlab-multinode"
pytestmark = pytest.mark.slow


_QUERY = r"""
import sys
from adaptlab import results
store = results.open(sys.argv[1])   # endpoint and credentials from the environment only
runs = store.runs()
assert sorted(runs.column("system").to_pylist()) == ["bm25", "minilm"], runs  # the quickstart's two systems
rows = store.sql("SELECT system, value FROM metrics WHERE measure = 'ndcg@10' ORDER BY system", as_arrow=True).to_pylist()
assert [r["system"] for r in rows] == ["bm25", "minilm"] and all(0.0 <= r["value"] <= 1.0 for r in rows), rows
assert store.per_query().num_rows > 0
print("VERSION", store.version(), "NDCG", [r["value"] for r in rows])
store.close()
from pyarrow import fs
# the nodes' shared embedding cache on S3 (ADAPTLAB_EMBEDDING_CACHE), beside the store, not in it
cache, path = fs.FileSystem.from_uri(sys.argv[1].rsplit("/", 1)[0] + "/embedding-cache/embeddings")
assert [i for i in cache.get_file_info(fs.FileSelector(path)) if i.path.endswith(".npy")], "no cached embeddings"
"""


def _query(uri: str, env: dict) -> str:
    res = subprocess.run([sys.executable, "-c", _QUERY, uri], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return res.stdout


def test_submit_to_two_nodes_results_on_s3_outlive_the_cluster(tmp_path):
    moto = shutil.which("moto_server")
    if moto is None:
        pytest.skip("moto_server not installed: pip install 'moto[server]'")
    s3_port, ports = free_port(), HeadPorts()
    endpoint = f"http://127.0.0.1:{s3_port}"
    s3_env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "multinode-key-id",
        "AWS_SECRET_ACCESS_KEY": "multinode-secret-value",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    token = secrets.token_hex(16)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RAY_"))}
    node_env = {
        **base,
        **s3_env,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "HF_HUB_OFFLINE": "1",
        "ADAPTLAB_EMBEDDING_CACHE": f"s3://{BUCKET}/embedding-cache",
    }
    client_env = {**base, "RAY_AUTH_TOKEN": token, "HOME": str(tmp_path)}  # the token only: no S3 credentials
    temp_dir = Path(tempfile.mkdtemp(prefix="raymn", dir="/tmp"))  # short: Ray puts sockets there
    procs: list[subprocess.Popen] = []
    t0 = time.monotonic()

    def phase(name: str) -> None:
        print(f"[multinode] {name}: {time.monotonic() - t0:.1f} s", flush=True)

    try:
        procs.append(
            subprocess.Popen(
                [moto, "-H", "127.0.0.1", "-p", str(s3_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
        deadline = time.monotonic() + 30
        while True:  # bounded wait for the S3 server
            try:
                urllib.request.urlopen(endpoint + "/", timeout=1).close()
                break
            except OSError:
                assert procs[0].poll() is None and time.monotonic() < deadline, "moto_server did not start"
                time.sleep(0.2)
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=s3_env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=s3_env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        head = start_head(ports, temp_dir, node_env, num_cpus=2, lean=True)  # no log or autoscaler monitor
        assert head.returncode == 0, head.stderr[-2000:]
        phase("head up")
        # its own temp dir: two nodes on one machine sharing one would unpack the job's working
        # directory into the same folder, pulling it from under the running driver
        worker = start_worker(ports, temp_dir / "node2", node_env, num_cpus=2, lean=True)
        assert worker.returncode == 0, worker.stderr[-2000:]
        phase("second node up")
        uri = f"s3://{BUCKET}/quickstart"
        sub = subprocess.run(
            [
                sys.executable,
                "-m",
                "adaptlab",
                "submit",
                str(REPO / "jobs" / "quickstart.toml"),
                "--address",
                ports.dashboard_address,
                "--store",
                uri,
                "--wait",
                "--timeout",
                "600",
            ],
            env=client_env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert sub.returncode == 0, sub.stdout[-4000:] + sub.stderr[-3000:]
        phase("job done")
        assert "SUCCEEDED" in sub.stdout and f"store: {uri}" in sub.stdout
        assert f"results stored in {uri}" in sub.stdout  # the job's own output, not a local path
        assert "multinode-secret-value" not in sub.stdout + sub.stderr
        reader_env = {**base, **s3_env}
        before = _query(uri, reader_env)
        phase("queried")
        assert not stop_cluster(temp_dir, ports)  # the whole Ray cluster: head and second node
        phase("cluster stopped")
        after = _query(uri, reader_env)
        phase("queried again")
        assert before.split("NDCG")[1] == after.split("NDCG")[1]
    finally:
        stop_cluster(temp_dir, ports)
        stop_pids([p.pid for p in procs])
        shutil.rmtree(temp_dir, ignore_errors=True)
