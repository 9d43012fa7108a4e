"""The small store both tracker-export tests (MLflow, W&B) log from: graded qrels with judged
non-relevant documents, two systems' runs of 8 documents, their scores with CIs committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import adaptlab
from adaptlab import results


def toy_qrels_runs(n_queries: int, seed: int) -> tuple[dict, dict]:
    """Qrels (grades 2, 1, 0 per query) and runs ``base``/``ft`` (``ft``'s first document boosted
    more); scores are multiples of 1/8, exact in float32 as the store keeps them."""
    rng = np.random.default_rng(seed)
    qrels = {f"q{i}": {f"d{i}": 2, f"d{i + 1}": 1, f"d{i + 2}": 0} for i in range(n_queries)}
    runs = {}
    for name, boost in (("base", 0.125), ("ft", 0.5)):
        runs[name] = {
            f"q{i}": {
                f"d{i + j}": float(s + (boost if j == 0 else 0.0)) for j, s in enumerate(rng.permutation(8) / 8.0)
            }
            for i in range(n_queries)
        }
    return qrels, runs


def toy_store(
    folder: Path,
    measures: list[str],
    *,
    n_queries: int,
    seed: int,
    run_seed: int,
    config: dict[str, Any],
    extra_rows: list[tuple[str, float]] = (),
) -> dict[str, Any]:
    """A new store in ``folder/store`` with each system's scores on ``toy`` (200 resamples) and,
    per system, ``extra_rows`` (measure, value) without a CI; returns the store, run ids and rows."""
    qrels, runs = toy_qrels_runs(n_queries, seed)
    store = results.open(folder / "store", create=True)
    recs = [
        results.run_record(
            n,
            "toy",
            model_id=n,
            model_revision=None,
            dataset_fingerprint="fp-toy",
            seed=run_seed,
            config={**config, "model": n},
        )
        for n in runs
    ]
    ids = {r["system"]: r["run_id"] for r in recs}
    rows = []
    for name, run in runs.items():
        ev = adaptlab.evaluate(qrels, run, measures, system=name, n_resamples=200, seed=0)
        rows += [
            {
                "run_id": ids[name],
                "system": name,
                "dataset": "toy",
                "measure": m,
                "value": float(r.value),
                "ci_low": float(r.ci_low),
                "ci_high": float(r.ci_high),
            }
            for m, r in ev.summary.systems[name].items()
        ]
        rows += [
            {"run_id": ids[name], "system": name, "dataset": "toy", "measure": m, "value": v} for m, v in extra_rows
        ]
    store.commit(recs, rows)
    return {"store": store, "ids": ids, "rows": rows, "dir": folder}
