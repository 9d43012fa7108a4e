"""``commit_summary`` (evaluation/persist.py) returns the store version of its commit, which the
study output prints and a paper cites; a job started by ``adaptlab submit`` records the
submitted code in every run's config."""

from __future__ import annotations

import json

import numpy as np

from adaptlab import results
from adaptlab.evaluation import summarise
from adaptlab.evaluation.persist import SUBMITTED_CODE_ENV, StoredRuns, commit_summary
from adaptlab.metrics import PerQueryMetrics


def _summary():
    ids = [f"q{i}" for i in range(6)]
    per = {
        s: PerQueryMetrics(ids, {"acc@1": np.array(v, float)})
        for s, v in (("a", [1, 0, 1, 1, 0, 1]), ("b", [0, 0, 1, 0, 0, 1]))
    }
    return summarise(per, n_resamples=50, seed=0)


def test_commit_summary_returns_the_store_version(tmp_path, monkeypatch):
    monkeypatch.delenv(SUBMITTED_CODE_ENV, raising=False)
    first = commit_summary(tmp_path / "s", _summary(), dataset="d", config={"k": 1})
    second = commit_summary(tmp_path / "s", _summary(), dataset="d", config={"k": 2})  # another evaluation
    assert isinstance(first, StoredRuns) and set(first) == {"a", "b"}
    store = results.open(tmp_path / "s")
    assert second.version == store.version() and first.version is not None and first.version < second.version
    assert second.uri == store.uri and second.commit_id in store.commit_ids()
    assert results.open(tmp_path / "s", version=first.version).runs().num_rows == 2


def test_submitted_code_lands_in_the_run_config(tmp_path, monkeypatch):
    code = {"version": "1.2.3", "commit": "ab" * 20, "dirty": True, "tree_sha256": "cd" * 32}
    monkeypatch.setenv(SUBMITTED_CODE_ENV, json.dumps(code))
    commit_summary(tmp_path / "s", _summary(), dataset="d", config={"k": 1})
    config = json.loads(results.open(tmp_path / "s").runs().column("config")[0].as_py())
    assert config["submitted_code"] == code and config["k"] == 1
