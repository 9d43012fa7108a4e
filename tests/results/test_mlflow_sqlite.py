"""MLflow export to a SQLite tracking store (mlflow-skinny + SQLAlchemy + Alembic), read back
with MLflow's own client: run names, params, values and CI bounds (the measures computed through
ir_measures included), artifacts beside the database."""

from __future__ import annotations

import sys

import pytest
from toy_tracker_store import toy_store

from adaptlab.errors import ConfigError
from adaptlab.results.exports.mlflow_log import log_to_mlflow

pytest.importorskip("mlflow", reason="MLflow logging needs mlflow: pip install mlflow-skinny")
pytest.importorskip("sqlalchemy", reason="a sqlite: tracking store needs SQLAlchemy: pip install sqlalchemy")
pytest.importorskip("alembic", reason="a sqlite: tracking store needs Alembic: pip install alembic")

MEASURES = {"ndcg@10": "ndcg_at_10", "rprec": "rprec", "bpref": "bpref", "judged@5": "judged_at_5", "err@5": "err_at_5"}
"""Stored measure -> its MLflow metric name."""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store with the scores (values and CIs) of two systems on ``toy``; the stored rows."""
    return toy_store(
        tmp_path_factory.mktemp("mlflow-sqlite"), list(MEASURES), n_queries=16, seed=4, run_seed=0, config={"k": 8}
    )


@pytest.fixture(scope="module")
def tracked(store, tmp_path_factory):
    """The store logged to a new SQLite database (MLflow creates its tables: the slow step, ~20 s
    on a loaded 2-core machine, so the tests share it), from a working directory that must stay
    empty (MLflow's default artifact root of a database store is ./mlruns)."""
    tmp = tmp_path_factory.mktemp("tracking")
    report = tmp / "report.html"
    report.write_text("<html>report</html>")
    db = tmp / "db" / "mlflow.db"
    db.parent.mkdir()
    (tmp / "cwd").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        mp.chdir(tmp / "cwd")
        logged = log_to_mlflow(store["store"], f"sqlite:///{db}", experiment="toy-sqlite", artifacts=[report])
    return {"uri": f"sqlite:///{db}", "db": db, "logged": logged, "dir": tmp}


@pytest.mark.slow
def test_sqlite_round_trip_with_mlflow_client(store, tracked, tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    logged, db = tracked["logged"], tracked["db"]
    assert sorted(logged) == sorted(store["ids"].values()) and db.is_file()
    client = MlflowClient(tracking_uri=tracked["uri"])
    experiment = client.get_experiment_by_name("toy-sqlite")
    assert experiment.artifact_location == (db.parent / "mlartifacts").as_uri()
    for system, run_id in store["ids"].items():
        run = client.get_run(logged[run_id])
        assert run.info.run_name == f"{system} on toy" and run.info.status == "FINISHED"
        assert run.data.tags["adaptlab.run_id"] == run_id and run.data.params["config.model"] == system
        stored = {r["measure"]: r for r in store["rows"] if r["system"] == system}
        expected = {}
        for measure, key in MEASURES.items():
            row = stored[measure]
            assert row["ci_low"] < row["ci_high"], measure
            expected |= {key: row["value"], f"{key}_ci_low": row["ci_low"], f"{key}_ci_high": row["ci_high"]}
        assert run.data.metrics == pytest.approx(expected, abs=1e-12)
        assert [a.path for a in client.list_artifacts(logged[run_id], "adaptlab")] == ["adaptlab/report.html"]
        local = client.download_artifacts(logged[run_id], "adaptlab/report.html", str(tmp_path))
        assert open(local).read() == "<html>report</html>"
    assert (db.parent / "mlartifacts").is_dir() and not any((tracked["dir"] / "cwd").iterdir())


@pytest.mark.slow
def test_sqlite_logging_again_keeps_the_experiment(store, tracked, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    again = log_to_mlflow(
        store["store"],
        tracked["uri"],
        experiment="toy-sqlite",
        system="ft",
        artifact_location=(tracked["dir"] / "ignored").as_uri(),
    )
    client = MlflowClient(tracking_uri=tracked["uri"])
    exp = client.get_experiment_by_name("toy-sqlite")
    runs = client.search_runs([exp.experiment_id])
    ft = store["ids"]["ft"]
    # idempotent: the run made for the stored run the first time is found again, not doubled
    assert len(runs) == 2 and again == {ft: tracked["logged"][ft]}
    assert exp.artifact_location == (tracked["db"].parent / "mlartifacts").as_uri()  # kept from its creation


def test_sqlite_without_alembic_is_one_line_naming_the_packages(store, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "alembic", None)  # import raises ImportError
    with pytest.raises(
        ConfigError,
        match=r"^MLflow sqlite: tracking stores need the trackers extra: "
        r"pip install 'adaptlab\[trackers\]' \(.*alembic.*\)$",
    ):
        log_to_mlflow(store["store"], f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not (tmp_path / "mlflow.db").exists()
