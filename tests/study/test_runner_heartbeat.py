"""After embedding, a study's search, bootstrap and commit print heartbeat lines at the
progress interval (the quickstart was silent 15-29 s there: the first search imports its
backend, the bootstrap and the commit take seconds), and the numbers do not change."""

from __future__ import annotations

import io
import re
import sys
import time

import adaptlab.study.runner as runner
from adaptlab.runtime.progress import set_progress
from adaptlab.study import parse_study, run_study

INTERVAL = 0.2


def _slowed(fn, seconds: float):
    def slow(*args, **kwargs):
        time.sleep(seconds)
        return fn(*args, **kwargs)

    return slow


def test_search_bootstrap_and_commit_get_heartbeat_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_PROGRESS_INTERVAL", str(INTERVAL))
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "1")
    spec = {
        "study": {"name": "hb"},
        "datasets": [{"spec": "synthetic:n_documents=6,seed=1", "name": "syn"}],
        "models": [{"ref": "hash:16", "name": "h"}],
        "embedding": {"use_ray": False},
        "bootstrap": {"n_resamples": 50},
        "evaluation": {"metrics": ["acc@5"]},
    }
    plain = run_study(parse_study(spec), store=tmp_path / "plain")
    for name in ("build_records", "summarise", "commit_summary"):
        monkeypatch.setattr(runner, name, _slowed(getattr(runner, name), 3 * INTERVAL))
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    set_progress(None)
    slow = run_study(parse_study(spec), store=tmp_path / "slow")
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("[adaptlab]")]
    for what in (
        r"syn: top \d+ search with 'h'",
        r"syn: bootstrapping 1 system\(s\)",
        "syn: committing to the results store",
    ):
        assert any(re.match(rf"\[adaptlab\] {what} \(\d+ s\)$", line) for line in lines), (what, lines)
    assert plain.datasets[0].summary.to_json() == slow.datasets[0].summary.to_json()
