"""Issue 29: a system's CI and bootstrap mean depend only on its own per-query values, the
query set, the measure and the seed, never on the other systems evaluated with it. Before, the
same run got nDCG@10 [0.601, 0.698] alone and [0.602, 0.700] beside a weak or a strong run
(the "auto" path was chosen for all rows together, and the exact multinomial draws of a row
came from a stream numbered by its position)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.analysis.compare import compare
from adaptlab.evaluation.summary import summarise_runs
from adaptlab.metrics import evaluate

MEASURES = ["ndcg@10", "mrr@10", "acc@5", "recall@100"]


def _run(rng: np.random.Generator, p_top: float, q: int, docs: int) -> dict[str, dict[str, float]]:
    """A TREC-like run: the gold document D{q} lands in the top 10 with probability p_top."""
    run = {}
    for i in range(q):
        cands = rng.choice(docs, 30, replace=False)
        scores = {f"D{c}": float(s) for c, s in zip(cands, rng.random(30) * 0.5)}
        if rng.random() < p_top:
            scores[f"D{i}"] = float(0.5 + rng.random() * 0.5)
        run[f"Q{i}"] = scores
    return run


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(2)
    q = 150
    qrels = {f"Q{i}": {f"D{i}": 1} for i in range(q)}
    return qrels, {name: _run(rng, p, q, 400) for name, p in (("medium", 0.6), ("weak", 0.3), ("strong", 0.9))}


def _cis(summary, system):
    return {m: (r.value, r.boot_mean, r.ci_low, r.ci_high) for m, r in summary.systems[system].items()}


def test_evaluate_gives_a_run_the_same_ci_alone_and_beside_others(runs):
    qrels, all_runs = runs
    alone = summarise_runs(qrels, {"medium": all_runs["medium"]}, MEASURES, seed=0)
    for others in (["weak"], ["strong"], ["weak", "strong"], ["strong", "weak"]):
        names = others[:1] + ["medium"] + others[1:]  # medium not first: its row number changes too
        beside = summarise_runs(qrels, {n: all_runs[n] for n in names}, MEASURES, seed=0)
        assert _cis(beside, "medium") == _cis(alone, "medium"), others
        rows = {
            (r["system"], r["measure"]): r
            for r in beside.metric_rows({n: n for n in names}, "d")
            if r["compared_to"] is None
        }  # what the results store keeps
        for m, (value, boot_mean, lo, hi) in _cis(alone, "medium").items():
            r = rows[("medium", m)]
            assert (r["value"], r["boot_mean"], r["ci_low"], r["ci_high"]) == (value, boot_mean, lo, hi)


def test_compare_gives_a_system_the_same_ci_whatever_it_is_compared_with(runs):
    qrels, all_runs = runs
    alone = summarise_runs(qrels, {"medium": all_runs["medium"]}, MEASURES, seed=0)

    scored = {n: evaluate(qrels, r, MEASURES) for n, r in all_runs.items()}
    for other in ("weak", "strong"):
        c = compare({other: scored[other], "medium": scored["medium"]})
        row = c.frame().set_index(["measure", "system"])
        for m, (value, _bm, lo, hi) in _cis(alone, "medium").items():
            got = row.loc[(m, "medium")]
            assert (got["value"], got["ci_low"], got["ci_high"]) == (value, lo, hi), (other, m)
