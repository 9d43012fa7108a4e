"""A study no step of which needs Ray does not start it (issue 22): a cached quickstart waited
12-20 s (load 27 on 2 cores) for a Ray start begun alongside the loading that nothing used."""

from __future__ import annotations

import io
import re
import sys
from concurrent.futures import Future

import pytest

import adaptlab.embedding.pipeline as pipeline
import adaptlab.embedding.tokens as tokens
import adaptlab.runtime as runtime
import adaptlab.runtime.cluster as cluster
from adaptlab.runtime.progress import set_progress
from adaptlab.study import parse_study, run_study

SPEC = {
    "study": {"name": "cached"},
    "datasets": [{"spec": "synthetic:n_documents=8,seed=2", "name": "syn"}],
    "models": [{"ref": "hash:32", "name": "h"}],
    "embedding": {"use_ray": True},
    "bootstrap": {"n_resamples": 100},
    "evaluation": {"metrics": ["ndcg@10", "mrr@10"]},
}


@pytest.fixture
def ray_starts(monkeypatch):
    """Every way a study starts or joins Ray, recorded (address) and never run: a background
    start returns a finished future, a direct start fails the test's study."""
    calls: list[object] = []

    def start_ray(address=None, **_):
        calls.append(("start_ray", address))
        done: Future = Future()
        done.set_result(None)
        return done

    def init_ray(address=None, **_):
        calls.append(("init_ray", address))
        raise AssertionError("Ray was started")

    for module in (runtime, cluster):
        monkeypatch.setattr(module, "start_ray", start_ray)
    for module in (runtime, cluster, pipeline, tokens):
        monkeypatch.setattr(module, "init_ray", init_ray)
    return calls


def _run(tmp_path, name, monkeypatch, **options):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")
    set_progress(None)
    outcome = run_study(parse_study(SPEC), store=tmp_path / name, **options)
    return outcome, stream.getvalue()


def test_a_fully_cached_study_starts_no_ray_and_gives_the_same_numbers(tmp_path, monkeypatch, ray_starts):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    first, _ = _run(tmp_path, "uncached", monkeypatch)  # fills the (per-test, empty) embedding cache
    ray_starts.clear()
    cached, err = _run(tmp_path, "cached", monkeypatch)
    assert re.search(r"^\[adaptlab\] h: (\d+) of \1 texts from the embedding cache", err, re.M), err  # all hits
    assert ray_starts == []  # neither a background start nor a direct one
    assert cached.datasets[0].summary.to_json() == first.datasets[0].summary.to_json()


def test_a_study_on_a_cluster_address_still_connects_alongside_the_loading(tmp_path, monkeypatch, ray_starts):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    _run(tmp_path, "remote", monkeypatch, address="127.0.0.1:6379")
    assert ray_starts == [("start_ray", "127.0.0.1:6379")]  # a bad address still fails before any work
