"""An embedded Ray whose only node died (issue 28): the embedding call fails at once with one line
saying the node cannot come back, instead of waiting out the placement time-out (180 s) with
"0/421 texts (0%), still working" lines; while no actor is ready the progress lines say
"waiting for capacity"."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from adaptlab.embedding import dispatch as dispatch_mod
from adaptlab.embedding.dispatch import Dispatch
from adaptlab.embedding.placement import WAITING_STATE, ClusterCapacityError, PoolPlacement
from adaptlab.runtime.progress import Progress


def _dispatch(monkeypatch, *, embedded: bool, nodes: dict, raylet: bool | None) -> Dispatch:
    fake_pool = SimpleNamespace(
        ready_members=list, members=[object()], placement=PoolPlacement(1, 1.0, 0.0, 1, "cpu"), reported_losses=set()
    )
    monkeypatch.setattr(dispatch_mod, "is_embedded", lambda: embedded)
    monkeypatch.setattr(dispatch_mod, "cluster_nodes", lambda: nodes)
    monkeypatch.setattr(dispatch_mod, "embedded_node_alive", lambda: raylet)
    return Dispatch(fake_pool, [(list(range(3)), ["a", "b", "c"])], "document", 8, 3, timeout=180.0)


@pytest.mark.parametrize(
    "nodes, raylet",
    [({"n1" * 10: (False, "127.0.0.1")}, None), ({"n1" * 10: (True, "127.0.0.1")}, False)],
    ids=["gcs-says-dead", "raylet-process-gone"],
)
def test_embedded_ray_without_a_live_node_fails_at_the_first_check(monkeypatch, nodes, raylet):
    dispatch = _dispatch(monkeypatch, embedded=True, nodes=nodes, raylet=raylet)
    with pytest.raises(ClusterCapacityError, match="cannot come back") as caught:
        dispatch.check_capacity(time.monotonic())
    text = str(caught.value)
    assert "\n" not in text and "0/3 texts" in text and "run the study again" in text


@pytest.mark.parametrize(
    "embedded, nodes, raylet",
    [(True, {"n1" * 10: (True, "127.0.0.1")}, True), (False, {"n1" * 10: (False, "10.0.0.2")}, None)],
    ids=["embedded-node-alive", "remote-cluster-may-grow-back"],
)
def test_a_live_node_or_a_cluster_that_may_grow_back_keeps_waiting(monkeypatch, embedded, nodes, raylet):
    dispatch = _dispatch(monkeypatch, embedded=embedded, nodes=nodes, raylet=raylet)
    dispatch.check_capacity(time.monotonic())  # no error: within the placement time-out
    with pytest.raises(ClusterCapacityError, match="no embedding actor was ready for 180 s"):
        dispatch.check_capacity(time.monotonic() + 181)


def test_progress_says_waiting_for_capacity_while_no_actor_is_ready(monkeypatch):
    dispatch = _dispatch(monkeypatch, embedded=False, nodes={}, raylet=None)
    stream = io.StringIO()
    bar = Progress(3, "embedding 3 documents", interval=0.2, stream=stream, enabled=True)
    dispatch.progress = bar
    try:
        dispatch.check_capacity(time.monotonic())
        time.sleep(0.7)
        waiting = stream.getvalue()
        dispatch.pool.ready_members = lambda: [0]
        dispatch.check_capacity(time.monotonic())
        time.sleep(0.7)
    finally:
        bar.close()
    lines = waiting.splitlines()
    assert lines and all(f"0/3 texts (0%), {WAITING_STATE}" in ln for ln in lines), lines
    assert "still working" not in waiting
    assert "still working" in stream.getvalue()[len(waiting) :]  # an actor is ready: back to working


_DRIVER = textwrap.dedent(
    """
    import time, psutil
    from adaptlab.errors import AdaptlabError
    from adaptlab.runtime import init_ray
    from adaptlab.embedding.pipeline import embed_texts
    init_ray(num_cpus=2)
    for p in psutil.Process().children(recursive=True):
        if "raylet" in p.name():
            p.kill()
    start = time.monotonic()
    try:
        embed_texts([f"text {i}" for i in range(50)], "hash:16", use_ray=True, num_actors=1)
    except AdaptlabError as e:
        print(f"{time.monotonic() - start:.1f} {e}", flush=True)
    """
)


@pytest.mark.slow
def test_a_killed_raylet_of_the_embedded_ray_fails_the_call_in_seconds(tmp_path):
    env = {**os.environ, "ADAPTLAB_PROGRESS": "1", "ADAPTLAB_PROGRESS_INTERVAL": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER], capture_output=True, text=True, timeout=150, env=env, cwd=tmp_path
    )
    found = re.search(r"^([0-9.]+) (embedding stopped: .*)$", done.stdout, re.M)  # Ray's own log lines aside
    assert found and "cannot come back" in found[2], (done.stdout[-2000:], done.stderr[-2000:])
    assert float(found[1]) < 30, found[1]  # the placement time-out is 180 s
    progress = [ln for ln in done.stderr.splitlines() if ln.startswith("[adaptlab] embedding")]
    assert not any("still working" in ln for ln in progress), progress
