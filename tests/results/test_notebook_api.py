"""A notebook session end to end (issue 20): evaluate runs given as DataFrames (the same numbers
as from TREC files), store them, open the store (typed), read DataFrames of metrics, comparisons,
per-query rows and runs, and the wide frame with the numbers ``adaptlab results --wide`` prints."""

from __future__ import annotations

import csv
import io
import typing

import numpy as np
import pandas as pd
import pytest

import adaptlab
from adaptlab import results
from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation import Evaluation, summarise
from adaptlab.results.store import ResultsStore

N_QUERIES = 30
BOOT = {"n_resamples": 200, "seed": 0}


def _write_trec(tmp_path, rng: np.random.Generator) -> dict[str, object]:
    """qrels (one gold document per query) and two runs of 6 documents per query: ``ft`` ranks
    the gold document higher than ``base`` on most queries."""
    qrels = [(f"q{i}", f"d{i}", 1) for i in range(N_QUERIES)]
    runs: dict[str, list[tuple[str, str, float]]] = {}
    for name, boost in (("base", 0.2), ("ft", 0.6)):
        rows = []
        for i in range(N_QUERIES):
            docs = [f"d{(i + j) % N_QUERIES}" for j in range(6)]
            scores = rng.random(6)
            scores[0] += boost  # the gold document d{i}
            rows += [(f"q{i}", d, float(s)) for d, s in zip(docs, scores)]
        runs[name] = rows
    (tmp_path / "qrels.trec").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels))
    for name, rows in runs.items():
        (tmp_path / f"{name}.trec").write_text(
            "".join(f"{q} Q0 {d} {k} {s!r} {name}\n" for k, (q, d, s) in enumerate(rows, 1))
        )
    return {
        "qrels": pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"]),
        "runs": {n: pd.DataFrame(r, columns=["q_id", "doc_id", "score"]) for n, r in runs.items()},
    }


def _per_query_rows(run_id: str, system: str, run: pd.DataFrame) -> object:
    """The per_query rows of one run: its ranked documents, the gold document d{i} of q{i}."""
    import pyarrow as pa

    rows = []
    for q, docs in run.sort_values("score", ascending=False).groupby("q_id", sort=False):
        gold = f"d{q[1:]}"
        ids = list(docs["doc_id"])
        rows.append(
            {
                "run_id": run_id,
                "system": system,
                "dataset": "toy",
                "query_id": q,
                "topk_ids": ids,
                "topk_scores": list(docs["score"]),
                "gold_ids": [gold],
                "gold_rank": ids.index(gold) + 1,
                "sim_gold": float(docs["score"].max()),
                "sim_random": 0.0,
                "random_id": ids[-1],
            }
        )
    return pa.Table.from_pylist(rows)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """TREC files and their DataFrames, the evaluations, and a store holding them (two runs of a
    toy dataset, scores, the paired comparison ft - base, per-query rows)."""
    import pyarrow as pa

    tmp = tmp_path_factory.mktemp("notebook")
    frames = _write_trec(tmp, np.random.default_rng(7))
    measures = ["ndcg@10", "mrr@10"]
    evals = {n: adaptlab.evaluate(frames["qrels"], f, measures, system=n, **BOOT) for n, f in frames["runs"].items()}
    summary = summarise(evals, baseline="base", **BOOT)
    store = results.open(tmp / "store", create=True)
    runs = [
        results.run_record(n, "toy", model_id=n, model_revision=None, dataset_fingerprint="fp", seed=0, config={"k": 6})
        for n in evals
    ]
    ids = {r["system"]: r["run_id"] for r in runs}
    per_query = pa.concat_tables([_per_query_rows(ids[n], n, frames["runs"][n]) for n in evals])
    store.commit(runs, summary.metric_rows(ids, "toy"), per_query)
    return {"dir": tmp, "frames": frames, "evals": evals, "summary": summary, "root": tmp / "store"}


def test_open_is_typed():
    assert typing.get_type_hints(results.open)["return"] is ResultsStore


def test_evaluate_from_dataframes_equals_evaluate_from_trec_files(session):
    tmp, frames = session["dir"], session["frames"]
    for name in frames["runs"]:
        from_frame = session["evals"][name]
        from_files = adaptlab.evaluate(
            tmp / "qrels.trec", tmp / f"{name}.trec", ["ndcg@10", "mrr@10"], system=name, **BOOT
        )
        assert isinstance(from_frame, Evaluation) and from_frame.query_ids == from_files.query_ids
        for m in ("ndcg@10", "mrr@10"):
            np.testing.assert_array_equal(from_frame.values[m], from_files.values[m])
        summary = from_frame.summary_frame()
        assert summary.equals(from_files.summary_frame())
        assert summary.loc["ndcg@10", "value"] == pytest.approx(from_frame.mean()["ndcg@10"])
        assert summary.loc["ndcg@10", "ci_low"] <= summary.loc["ndcg@10", "value"] <= summary.loc["ndcg@10", "ci_high"]
    per = session["evals"]["ft"].frame()
    assert list(per.columns) == ["ndcg@10", "mrr@10"] and len(per) == N_QUERIES
    assert per.loc["q0", "mrr@10"] == session["evals"]["ft"].values["mrr@10"][0]


def test_evaluate_names_a_frame_without_its_columns(session):
    bad = session["frames"]["runs"]["ft"].rename(columns={"score": "points"})
    with pytest.raises(DataError, match="run DataFrame: no value column; expected one of score"):
        adaptlab.evaluate(session["frames"]["qrels"], bad)
    with pytest.raises(ConfigError, match="unknown keyword.*n_resample; the bootstrap keywords are"):
        adaptlab.evaluate(session["frames"]["qrels"], session["frames"]["runs"]["ft"], n_resample=10)
    ev = session["evals"]["ft"]
    assert (
        repr(ev) == f"Evaluation('ft': {N_QUERIES} queries, ndcg@10={ev.mean()['ndcg@10']:.4f}, "
        f"mrr@10={ev.mean()['mrr@10']:.4f})"
    )


def test_dataframes_with_tidy_columns(session):
    store = results.open(session["root"])
    scores = store.metrics(as_frame=True)
    assert isinstance(scores, pd.DataFrame) and len(scores) == 4
    assert "compared_to" not in scores.columns and "p_value" not in scores.columns  # null on every score row
    ft = scores.set_index(["system", "measure"]).loc[("ft", "ndcg@10")]
    assert ft["value"] == pytest.approx(session["summary"].systems["ft"]["ndcg@10"].value)
    cmp = store.comparisons(as_frame=True)
    assert list(cmp[["system", "compared_to"]].iloc[0]) == ["ft", "base"] and "p_value" in cmp.columns
    assert set(store.metrics(as_frame=True, columns=["system", "compared_to"]).columns) == {"system", "compared_to"}
    pq = store.per_query(as_frame=True, system="ft")
    assert len(pq) == N_QUERIES and (pq["gold_rank"] >= 1).all() and "topk_ids" in pq.columns
    assert sorted(store.runs(as_frame=True)["system"]) == ["base", "ft"]
    assert store.metrics().num_rows == 4  # the pyarrow default stands


def test_wide_frame_has_the_numbers_of_the_cli(session, cli):
    frame = results.open(session["root"]).wide()
    assert frame.columns.names == ["measure", "stat"] and frame.index.names == ["dataset", "system"]
    assert list(frame.columns.get_level_values("stat")[:3]) == ["value", "ci_low", "ci_high"]
    res = cli("results", "--store", str(session["root"]), "--wide", "--format", "csv")
    assert res.returncode == 0, res.stderr
    for row in csv.DictReader(io.StringIO(res.stdout)):
        for m in ("ndcg@10", "mrr@10"):
            got = frame.loc[(row["dataset"], row["system"]), m]
            assert list(got) == [float(row[m]), float(row[f"{m}_ci_low"]), float(row[f"{m}_ci_high"])]
    assert frame.loc[("toy", "ft"), ("ndcg@10", "value")] == pytest.approx(
        session["summary"].systems["ft"]["ndcg@10"].value
    )


def test_a_typo_among_filter_values_is_refused(session, cli):
    res = cli("results", "--store", str(session["root"]), "--wide", "--filter", "measure=ndcg@10,mrr")
    assert res.returncode == 2
    assert "--filter measure=mrr: no row of metrics has measure 'mrr'; did you mean 'mrr@10'?" in res.stderr
    res = cli("results", "--store", str(session["root"]), "--filter", "system=ft,bsae")
    assert res.returncode == 2 and "did you mean 'base'?" in res.stderr
    res = cli("results", "--store", str(session["root"]), "--wide", "--filter", "measure=mrr@10,ndcg@10")
    assert res.returncode == 0 and res.stdout.splitlines()[0].split()[2:] == ["mrr@10", "ndcg@10"]


def test_missing_store_says_run_a_study_or_check_the_path(tmp_path, cli):
    res = cli("results", "--store", str(tmp_path / "absent"))
    assert res.returncode == 2
    assert f"no results store at {tmp_path / 'absent'}: run a study first or check the path" in res.stderr
    assert "create=True" not in res.stderr
