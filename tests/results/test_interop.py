"""Interop (issue 20): MTEB measure names, MTEB TaskResult JSON out and in, ranx run/qrels JSON
and DataFrames in and out, and one MLflow run per stored run in a local tracking store."""

from __future__ import annotations

import json

import numpy as np
import pytest

import adaptlab
from adaptlab import results
from adaptlab.errors import ConfigError, DataError, StoreError
from adaptlab.metrics.measures import Measure
from adaptlab.results.exports.mlflow_log import log_to_mlflow
from adaptlab.results.exports.mteb import MtebTaskResult, compare_mteb, export_mteb, mteb_results
from adaptlab.results.exports.ranx_io import (
    export_ranx,
    from_ranx_frame,
    read_ranx_json,
    store_run,
    to_ranx_frame,
    write_ranx_json,
)
from adaptlab.results.validate import canonical_measure


@pytest.mark.parametrize(
    ("mteb", "ours"),
    [
        ("ndcg_at_10", "ndcg@10"),
        ("NDCG_AT_10", "ndcg@10"),
        ("recall_at_100", "recall@100"),
        ("mrr_at_10", "mrr@10"),
        ("map_at_1000", "map@1000"),
        ("precision_at_5", "precision@5"),
        ("hit_rate_at_10", "acc@10"),
    ],
)
def test_mteb_measure_names_parse(mteb: str, ours: str) -> None:
    assert str(Measure.parse(mteb)) == ours
    assert canonical_measure(mteb) == ours


def test_main_score_is_refused_with_its_meaning() -> None:
    with pytest.raises(ConfigError, match="main_score.*per-task.*ndcg@10"):
        Measure.parse("main_score")
    with pytest.raises(ConfigError, match="unknown measure 'foo_at'"):
        Measure.parse("foo_at_10")


N_QUERIES = 12
MEASURES = ("ndcg@10", "recall@5", "mrr")


def _toy_runs(rng: np.random.Generator) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, dict[str, float]]]]:
    """qrels (one gold document d{i} per query q{i}) and two runs of 6 documents, scores exact in
    float32 (the store keeps float32 scores, so a run read back equals the one written)."""
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(N_QUERIES)}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for name, boost in (("base", 0.125), ("ft", 0.375)):
        runs[name] = {}
        for i in range(N_QUERIES):
            scores = rng.permutation(6) / 8.0
            scores[0] += boost
            runs[name][f"q{i}"] = {f"d{(i + j) % N_QUERIES}": float(s) for j, s in enumerate(scores)}
    return qrels, runs


def _per_query(run_id: str, system: str, run: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    rows = []
    for q, docs in run.items():
        ids = sorted(docs, key=lambda d: (-docs[d], d))
        gold = f"d{q[1:]}"
        rows.append(
            {
                "run_id": run_id,
                "system": system,
                "dataset": "toy",
                "query_id": q,
                "topk_ids": ids,
                "topk_scores": [docs[d] for d in ids],
                "gold_ids": [gold],
                "gold_rank": ids.index(gold) + 1,
                "sim_gold": docs[gold],
                "sim_random": 0.0,
                "random_id": ids[-1],
            }
        )
    return rows


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A store with the scores (value and CI) and per-query rows of two systems on ``toy``,
    the qrels and runs it was built from, and TREC files of them."""
    import pyarrow as pa

    tmp = tmp_path_factory.mktemp("interop")
    qrels, runs = _toy_runs(np.random.default_rng(3))
    (tmp / "qrels.trec").write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items()))
    for name, run in runs.items():
        (tmp / f"{name}.trec").write_text(
            "".join(f"{q} Q0 {d} 1 {s!r} {name}\n" for q, docs in run.items() for d, s in docs.items())
        )
    evals = {n: adaptlab.evaluate(qrels, r, list(MEASURES), system=n, n_resamples=200, seed=0) for n, r in runs.items()}
    store = results.open(tmp / "store", create=True)
    recs = [
        results.run_record(
            n, "toy", model_id=n, model_revision=None, dataset_fingerprint="fp-toy", seed=0, config={"k": 6, "model": n}
        )
        for n in runs
    ]
    ids = {r["system"]: r["run_id"] for r in recs}
    metrics = [
        {
            "run_id": ids[n],
            "system": n,
            "dataset": "toy",
            "measure": m,
            "value": float(row.value),
            "ci_low": float(row.ci_low),
            "ci_high": float(row.ci_high),
        }
        for n, e in evals.items()
        for m, row in e.summary.systems[n].items()
    ]
    per_query = pa.Table.from_pylist([row for n in runs for row in _per_query(ids[n], n, runs[n])])
    store.commit(recs, metrics, per_query)
    return {"dir": tmp, "store": store, "qrels": qrels, "runs": runs, "metrics": metrics, "ids": ids}


def test_mteb_json_has_mteb_fields_and_reads_back(toy, tmp_path) -> None:
    paths = export_mteb(toy["store"], tmp_path / "mteb", task_names={"toy": "ToyRetrieval"})
    assert sorted(p.relative_to(tmp_path / "mteb").as_posix() for p in paths) == [
        "base/no_revision_available/ToyRetrieval.json",
        "ft/no_revision_available/ToyRetrieval.json",
    ]
    data = json.loads(paths[1].read_text())
    assert set(data) >= {
        "dataset_revision",
        "task_name",
        "mteb_version",
        "scores",
        "evaluation_time",
        "kg_co2_emissions",
    }
    assert data["task_name"] == "ToyRetrieval" and data["dataset_revision"] == "dataset revision not available"
    assert data["adaptlab"]["dataset_fingerprint"] == "fp-toy"
    (subset,) = data["scores"]["test"]
    assert subset["hf_subset"] == "default" and isinstance(subset["languages"], list)
    stored = {r["measure"]: r for r in toy["metrics"] if r["system"] == "ft"}
    assert subset["main_score"] == subset["ndcg_at_10"] == stored["ndcg@10"]["value"]
    assert subset["recall_at_5_ci_low"] == stored["recall@5"]["ci_low"]
    back = MtebTaskResult.from_disk(paths[1])
    assert back.values() == {m: r["value"] for m, r in stored.items()}
    assert back.get_score("main_score") == back.get_score("ndcg@10") == stored["ndcg@10"]["value"]


def test_mteb_published_scores_compare_with_the_store(toy, tmp_path) -> None:
    stored = {r["measure"]: r for r in toy["metrics"] if r["system"] == "base"}
    published = {
        "task_name": "Toy",
        "mteb_version": "1.12.0",
        "dataset_revision": "abc",
        "scores": {
            "test": [
                {
                    "hf_subset": "default",
                    "languages": ["eng-Latn"],
                    "main_score": 0.5,
                    "ndcg_at_10": stored["ndcg@10"]["value"] - 0.01,
                    "mrr_at_10": 0.9,
                    "nauc_map_at_10_max": 3.0,
                    "recall_at_5": 2.0,
                }
            ]
        },
        "evaluation_time": 1.5,
        "kg_co2_emissions": None,
    }
    path = tmp_path / "Toy.json"
    path.write_text(json.dumps(published))
    frame = compare_mteb(MtebTaskResult.from_disk(path), toy["store"], system="base", dataset="toy")
    assert list(frame.index) == ["ndcg@10", "recall@5"]
    assert frame.loc["ndcg@10", "difference"] == pytest.approx(0.01)
    assert not frame.loc["recall@5", "within_ci"]


def test_mteb_bad_input_is_one_clear_line(toy, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"task_name": "X"}))
    with pytest.raises(DataError, match="bad.json: missing key.*scores"):
        MtebTaskResult.from_disk(bad)
    with pytest.raises(StoreError, match="no map@100 score to use as MTEB's main_score"):
        mteb_results(toy["store"], main_measure="map@100")
    with pytest.raises(DataError, match="no split 'dev'"):
        MtebTaskResult.from_dict({"task_name": "X", "scores": {"test": []}}).values("dev")


def _means(evaluation) -> dict[str, float]:
    return {m: float(np.mean(v)) for m, v in evaluation.values.items()}


def test_ranx_json_from_the_store_evaluates_like_the_trec_files(toy, tmp_path) -> None:
    paths = export_ranx(toy["store"], tmp_path / "ranx")
    assert sorted(p.relative_to(tmp_path / "ranx").as_posix() for p in paths) == [
        "toy/qrels.json",
        "toy/runs/base.json",
        "toy/runs/ft.json",
    ]
    qrels = read_ranx_json(tmp_path / "ranx/toy/qrels.json", qrels=True)
    assert qrels == toy["qrels"]
    for name in ("base", "ft"):
        run = read_ranx_json(tmp_path / f"ranx/toy/runs/{name}.json")
        assert run == toy["runs"][name]
        ours = adaptlab.evaluate(qrels, run, list(MEASURES))
        trec = adaptlab.evaluate(toy["dir"] / "qrels.trec", toy["dir"] / f"{name}.trec", list(MEASURES))
        assert ours.query_ids == trec.query_ids and _means(ours) == _means(trec)


def test_ranx_frames_round_trip_and_evaluate(toy, tmp_path) -> None:
    run = toy["runs"]["ft"]
    frame = to_ranx_frame(run)
    assert list(frame.columns) == ["q_id", "doc_id", "score"] and len(frame) == 6 * N_QUERIES
    assert from_ranx_frame(frame) == run
    qframe = to_ranx_frame(toy["qrels"])
    assert from_ranx_frame(qframe, qrels=True) == toy["qrels"]
    write_ranx_json(from_ranx_frame(frame), tmp_path / "run.json")
    assert read_ranx_json(tmp_path / "run.json") == run
    trec = adaptlab.evaluate(toy["dir"] / "qrels.trec", toy["dir"] / "ft.trec", list(MEASURES))
    assert _means(adaptlab.evaluate(qframe, frame, list(MEASURES))) == _means(trec)
    assert store_run(toy["store"], system="ft", dataset="toy") == run


def test_ranx_bad_input_is_one_clear_line(tmp_path) -> None:
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"q1": {"d1": 0.5}}))
    with pytest.raises(DataError, match="q.json: query 'q1', document 'd1' has 0.5, expected an integer relevance"):
        read_ranx_json(bad, qrels=True)
    bad.write_text(json.dumps({"q1": ["d1"]}))
    with pytest.raises(DataError, match="query 'q1' maps to list"):
        read_ranx_json(bad)
    with pytest.raises(DataError, match="no column.*q_id"):
        from_ranx_frame(to_ranx_frame({"q": {"d": 1.0}}).rename(columns={"q_id": "qid"}))


def test_mlflow_one_run_per_stored_run_with_safe_names_and_ci(toy, tmp_path, monkeypatch) -> None:
    pytest.importorskip("mlflow", reason="MLflow logging needs mlflow: pip install mlflow-skinny")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # what log_to_mlflow sets for a file: URI
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    report = tmp_path / "report.html"
    report.write_text("<html>report</html>")
    uri = (tmp_path / "mlruns").as_uri()
    logged = log_to_mlflow(toy["store"], uri, experiment="toy-study", artifacts=[report, toy["dir"] / "ft.trec"])
    assert sorted(logged) == sorted(toy["ids"].values())
    client = MlflowClient(tracking_uri=uri)
    for system, run_id in toy["ids"].items():
        run = client.get_run(logged[run_id])
        stored = {r["measure"]: r for r in toy["metrics"] if r["system"] == system}
        assert run.info.run_name == f"{system} on toy" and run.data.tags["adaptlab.run_id"] == run_id
        assert run.data.params["config.model"] == system and run.data.params["config.k"] == "6"
        assert run.data.params["dataset_fingerprint"] == "fp-toy"
        expected = {}
        for key, measure in (("ndcg_at_10", "ndcg@10"), ("recall_at_5", "recall@5"), ("mrr", "mrr")):
            expected |= {
                key: stored[measure]["value"],
                f"{key}_ci_low": stored[measure]["ci_low"],
                f"{key}_ci_high": stored[measure]["ci_high"],
            }
        assert run.data.metrics == pytest.approx(expected)
        names = sorted(a.path for a in client.list_artifacts(logged[run_id], "adaptlab"))
        assert names == ["adaptlab/ft.trec", "adaptlab/report.html"]


def test_mlflow_needs_an_explicit_tracking_uri(toy, tmp_path) -> None:
    with pytest.raises(ConfigError, match="tracking_uri is required"):
        log_to_mlflow(toy["store"], "")
    with pytest.raises(ConfigError, match="artifact file.*not found: .*nope.html"):
        log_to_mlflow(toy["store"], (tmp_path / "mlruns").as_uri(), artifacts=[tmp_path / "nope.html"])


def test_cli_export_writes_mteb_and_ranx_files(toy, tmp_path, cli) -> None:
    done = cli(
        "export", "--store", str(toy["dir"] / "store"), "--to", "mteb", "--out", str(tmp_path / "m"), "--system", "ft"
    )
    assert done.returncode == 0, done.stderr
    assert "exported 1 files" in done.stdout
    assert MtebTaskResult.from_disk(tmp_path / "m/ft/no_revision_available/toy.json").get_score("ndcg_at_10") == next(
        r["value"] for r in toy["metrics"] if r["system"] == "ft" and r["measure"] == "ndcg@10"
    )
    done = cli("export", "--store", str(toy["dir"] / "store"), "--to", "ranx", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert read_ranx_json(tmp_path / "r/toy/runs/base.json") == toy["runs"]["base"]
    done = cli(
        "export", "--store", str(toy["dir"] / "store"), "--to", "mteb", "--out", str(tmp_path / "x"), "--system", "nope"
    )
    assert done.returncode == 2 and "no scores in the store" in done.stderr


def test_cli_export_to_mlflow(toy, tmp_path, cli, monkeypatch) -> None:
    pytest.importorskip("mlflow", reason="MLflow logging needs mlflow: pip install mlflow-skinny")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    uri = (tmp_path / "mlruns").as_uri()
    done = cli(
        "export",
        "--store",
        str(toy["dir"] / "store"),
        "--to",
        "mlflow",
        "--out",
        uri,
        "--system",
        "base",
        "--experiment",
        "cli-exp",
    )
    assert done.returncode == 0, done.stderr
    assert f"run {toy['ids']['base']} -> MLflow run" in done.stdout and "exported 1 runs" in done.stdout
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("cli-exp").experiment_id])
    assert run.data.tags["adaptlab.run_id"] == toy["ids"]["base"] and "ndcg_at_10_ci_high" in run.data.metrics


def test_mlflow_export_twice_updates_the_same_runs(toy, tmp_path, monkeypatch) -> None:
    """Issue 30: a second export found each stored run's MLflow run (tag adaptlab.run_id) and
    updated it: the same run count, one history entry per metric; read back with
    mlflow.search_runs as docs/results-store.md shows (MLFLOW_ALLOW_FILE_STORE for file:)."""
    mlflow = pytest.importorskip("mlflow", reason="MLflow logging needs mlflow: pip install mlflow-skinny")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    first = log_to_mlflow(toy["store"], uri, experiment="twice")
    again = log_to_mlflow(toy["store"], uri, experiment="twice")
    assert again == first
    mlflow.set_tracking_uri(uri)
    frame = mlflow.search_runs(experiment_names=["twice"])
    assert len(frame) == len(toy["ids"]) == 2
    ft = frame[frame["tags.adaptlab.run_id"] == toy["ids"]["ft"]].iloc[0]
    stored = next(r for r in toy["metrics"] if r["system"] == "ft" and r["measure"] == "ndcg@10")
    assert ft["metrics.ndcg_at_10"] == stored["value"] and ft["metrics.ndcg_at_10_ci_low"] == stored["ci_low"]
    history = MlflowClient(tracking_uri=uri).get_metric_history(first[toy["ids"]["ft"]], "ndcg_at_10")
    assert [m.value for m in history] == [stored["value"]]
