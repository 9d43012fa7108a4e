"""Benchmark: the Delta Lake results store against the previous store, in one run.

For each store (``delta``: adaptlab.results.open on a local directory; ``previous``: the
layout-1 store, written by the test writer testkit/legacy_writer.py and read by
adaptlab.results.legacy.legacy.LegacyReader, as adaptlab did before Delta Lake; ``delta-s3``: the
Delta store on a local moto S3 server, with --s3) it measures:

  * commit latency, 1 writer: --commits commits of 1 run + 4 metrics + --pq-rows per-query
    rows, one after another (median and mean);
  * commit latency, 8 writers: 8 processes started together, --commits each (mean per
    commit over all writers, and wall time for all);
  * query latency over --rows per-query rows (loaded in commits of 100,000 rows):
    ``per_query(system=...)`` (a 1/10 slice) and an aggregate (mean gold rank per system:
    SQL through DuckDB for Delta, pyarrow group_by for the previous store).

moto's conditional put is not atomic under races, and a local moto server is not S3: the
S3 numbers show the protocol's cost, not a real bucket's latency.

    python -m benchmarks.bench_store                          # 1M rows, local stores
    python -m benchmarks.bench_store --rows 200000 --commits 5   # quick
    python -m benchmarks.bench_store --s3                     # add the store on moto S3
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The repository root: the writer processes run there, so ``testkit`` (the writer of the previous
layout) imports by package."""

WRITER = r"""
import sys, time, json
import numpy as np
import pyarrow as pa
from adaptlab import results
kind, root, tag, n, pq_rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
if kind == "previous":
    from testkit.legacy_writer import LegacyWriter
    store = LegacyWriter(root)
else:
    store = results.open(root, create=True)
go = sys.argv[7] if len(sys.argv) > 7 else None
print("ready", flush=True)
if go:
    end = time.monotonic() + 120
    import os
    while not os.path.exists(go) and time.monotonic() < end:
        time.sleep(0.005)
rng = np.random.default_rng(0)
times = []
for i in range(n):
    run = results.run_record(tag, "bench", model_id="m", model_revision=None, dataset_fingerprint="fp",
                             seed=i, config={})
    metrics = [{"system": tag, "dataset": "bench", "measure": f"acc@{j + 1}", "value": 0.5} for j in range(4)]
    pq = pa.table({
        "system": [tag] * pq_rows, "dataset": ["bench"] * pq_rows, "query_id": [f"q{q}" for q in range(pq_rows)],
        "topk_ids": pa.array([["d1", "d2", "d3"]] * pq_rows, pa.list_(pa.string())),
        "topk_scores": pa.array([[0.9, 0.5, 0.1]] * pq_rows, pa.list_(pa.float32())),
        "gold_ids": pa.array([["d1"]] * pq_rows, pa.list_(pa.string())),
        "gold_rank": pa.array(rng.integers(0, 4, pq_rows), pa.int32()),
        "sim_gold": pa.array(rng.random(pq_rows), pa.float32()),
        "sim_random": pa.array(rng.random(pq_rows), pa.float32()), "random_id": ["d9"] * pq_rows})
    t = time.perf_counter()
    store.commit([run], metrics, pq)
    times.append(time.perf_counter() - t)
if hasattr(store, "close"):
    store.close()
print(json.dumps(times), flush=True)
"""


def _writers(kind: str, root: str, n_writers: int, n_commits: int, pq_rows: int, env: dict) -> tuple[list, float]:
    import json

    go = os.path.join(tempfile.mkdtemp(), "go")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, kind, root, f"w{i}", str(n_commits), str(pq_rows), ROOT, go],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for i in range(n_writers)
    ]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"writer failed: {p.stderr.read()[-2000:]}")
        t = time.perf_counter()
        open(go, "w").close()
        times = []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"writer failed: {err[-2000:]}")
            times += json.loads(out.strip().splitlines()[-1])
        return times, time.perf_counter() - t
    finally:
        for p in procs:  # only our own writers, by pid
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)


def _load(kind: str, root: str, rows: int, env: dict) -> None:
    batch = 100_000
    n_sys = 10
    per = max(1, rows // n_sys)
    import pyarrow as pa  # noqa: F401

    code = WRITER.replace('[f"q{q}" for q in range(pq_rows)]', '[f"q{i}-{q}" for q in range(pq_rows)]')
    for s in range(n_sys):
        left = per
        while left > 0:
            k = min(batch, left)
            subprocess.run(
                [sys.executable, "-c", code, kind, root, f"s{s}", "1", str(k), ROOT],
                check=True,
                env=env,
                cwd=ROOT,
                capture_output=True,
                timeout=600,
            )
            left -= k


def _time(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _queries(kind: str, root: str, options: dict | None) -> dict[str, float]:
    from adaptlab import results
    from adaptlab.results.legacy.legacy import LegacyReader

    if kind == "previous":
        store = LegacyReader(root)

        def agg():
            return (
                store.per_query(columns=["system", "gold_rank"]).group_by("system").aggregate([("gold_rank", "mean")])
            )
    else:
        store = results.open(root, storage_options=options)

        def agg():
            return store.sql("SELECT system, avg(gold_rank) FROM per_query GROUP BY system")

    n = store.per_query(columns=["query_id"]).num_rows
    out = {"rows": n, "filter_s": _time(lambda: store.per_query(system="s3")), "aggregate_s": _time(agg)}
    if hasattr(store, "close"):
        store.close()
    return out


def _moto() -> tuple[subprocess.Popen, dict]:
    exe = shutil.which("moto_server")
    if exe is None:
        raise SystemExit("--s3 needs moto_server: pip install 'moto[server]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint + "/", timeout=1).close()
            break
        except OSError:
            if time.monotonic() > end or proc.poll() is not None:
                proc.kill()
                raise SystemExit("moto_server did not start") from None
            time.sleep(0.1)
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    import boto3

    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    ).create_bucket(Bucket="adaptlab-bench")
    return proc, env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="per-query rows for the query benchmark")
    ap.add_argument("--commits", type=int, default=10, help="commits per writer")
    ap.add_argument("--pq-rows", type=int, default=100, help="per-query rows per commit in the commit benchmark")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--s3", action="store_true", help="also measure the Delta store on a local moto S3 server")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench_store_")
    proc = None
    try:
        targets = [
            ("previous", os.path.join(work, "{}-previous"), None),
            ("delta", os.path.join(work, "{}-delta"), None),
        ]
        s3_env: dict = {}
        if args.s3:
            proc, s3_env = _moto()
            targets.append(("delta-s3", "s3://adaptlab-bench/{}", s3_env))
        print(
            f"{'store':<10} {'1 writer ms (median/mean)':>26} {f'{args.writers} writers ms/commit':>20} "
            f"{'wall s':>7} {'rows':>9} {'filter s':>9} {'aggregate s':>12}",
            flush=True,
        )
        for name, pattern, options in targets:
            env = dict(os.environ, **(options or {}))
            kind = "previous" if name == "previous" else "delta"
            one, _ = _writers(kind, pattern.format("one"), 1, args.commits, args.pq_rows, env)
            many, wall = _writers(kind, pattern.format("many"), args.writers, args.commits, args.pq_rows, env)
            _load(kind, pattern.format("big"), args.rows, env)
            q = _queries(kind, pattern.format("big"), options)
            print(
                f"{name:<10} {statistics.median(one) * 1e3:>12.1f} / {statistics.mean(one) * 1e3:>10.1f} "
                f"{statistics.mean(many) * 1e3:>20.1f} {wall:>7.2f} {q['rows']:>9} {q['filter_s']:>9.3f} "
                f"{q['aggregate_s']:>12.3f}",
                flush=True,
            )
    finally:
        if proc is not None:  # our own moto server, by pid
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
