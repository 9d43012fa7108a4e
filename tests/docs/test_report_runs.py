"""Issue 20: a report of a store with several runs of a system says which run it shows (the latest
of each system and dataset, its id and date), and says nothing of the kind with one run each."""

from __future__ import annotations

from datetime import datetime, timezone

from adaptlab import results
from adaptlab.analysis.report import build_report


def _commit(store, system: str, when: datetime, value: float) -> dict:
    run = dict(
        results.run_record(
            system,
            "toy",
            model_id=f"m/{system}",
            model_revision="r",
            dataset_fingerprint="fp",
            seed=0,
            config={"k": 10},
        ),
        timestamp=when,
    )
    store.commit(
        [run],
        [
            {
                "run_id": run["run_id"],
                "system": system,
                "dataset": "toy",
                "measure": "ndcg@10",
                "value": value,
                "ci_low": value - 0.1,
                "ci_high": value + 0.1,
                "n_queries": 50,
            }
        ],
    )
    return run


def test_the_report_names_the_runs_it_shows(tmp_path):
    store = results.open(tmp_path / "store", create=True)
    _commit(store, "base", datetime(2025, 1, 1, 9, 30, tzinfo=timezone.utc), 0.111)
    latest = _commit(store, "base", datetime(2025, 2, 3, 14, 5, tzinfo=timezone.utc), 0.5)
    ft = _commit(store, "ft", datetime(2025, 2, 3, 14, 6, tzinfo=timezone.utc), 0.6)
    md = build_report(store.root, tmp_path / "out").read_text()
    assert "shows the latest run of each system on each dataset" in md
    assert f"| toy | base | {latest['run_id'][:8]} | 2025-02-03 14:05 UTC | 2 |" in md
    assert f"| toy | ft | {ft['run_id'][:8]} | 2025-02-03 14:06 UTC | 1 |" in md
    assert "0.111" not in md and "0.500" in md  # the older run's value is not shown


def test_one_run_each_needs_no_note(tmp_path):
    store = results.open(tmp_path / "store", create=True)
    _commit(store, "base", datetime(2025, 1, 1, tzinfo=timezone.utc), 0.4)
    md = build_report(store.root, tmp_path / "out").read_text()
    assert "Run shown" not in md and "latest run of each system" not in md
