"""Log a store's runs to MLflow: one MLflow run per stored run.

Each stored run (one system on one dataset) becomes one MLflow run named ``SYSTEM on DATASET``
in the experiment ``experiment`` (default: the run's study, else ``adaptlab``), with

- params: the run's study config (flattened, ``a.b`` keys) and its provenance (``system``,
  ``dataset``, ``model_id``, ``model_revision``, ``dataset_fingerprint``, ``seed``);
- metrics: each score under an MLflow-safe name (MLflow refuses ``@``: ``ndcg@10`` ->
  ``ndcg_at_10``, ``acc@1`` -> ``accuracy_at_1``, the MTEB key of
  :func:`adaptlab.results.exports.mteb.metric_key`) plus
  ``NAME_ci_low`` and ``NAME_ci_high`` when the CI is stored;
- tags: ``adaptlab.run_id`` and ``adaptlab.package_version``; exporting again updates the MLflow
  run tagged with the stored run id instead of adding one (the run count stays the same);
- artifacts: the files given in ``artifacts`` (a report, run files), under ``adaptlab/``.

The runs, their metric names and their provenance are :mod:`adaptlab.results.exports.tracker_runs`'s,
shared with the W&B export (:mod:`adaptlab.results.exports.wandb_log`).

The tracking URI must be given (a local ``file:`` path or ``sqlite:`` database, or a server the
caller chose): nothing is sent to a default server, and MLflow's usage telemetry is switched off
unless ``MLFLOW_DISABLE_TELEMETRY`` is set. A server's requests are bounded (:data:`HTTP_LIMITS`: 10 s
each, two retries) and any failure is one line with the URI's credentials masked. Needs ``pip install mlflow-skinny`` (or ``mlflow``).
MLflow 3 refuses its file backend unless ``MLFLOW_ALLOW_FILE_STORE=true``; a ``file:`` URI (or a
plain path) given here sets it when unset. A database URI (``sqlite:///path/mlflow.db``) also
needs SQLAlchemy and Alembic (``pip install sqlalchemy alembic``; mlflow-skinny does not bring
them); MLflow creates the database's tables on first use. MLflow keeps a database store's
artifacts apart from the database, by default in ``./mlruns`` of the current directory: an
experiment created here for a ``sqlite:`` file keeps them in ``mlartifacts/`` beside the
database instead (or in ``artifact_location``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError, StoreError, require_extra
from adaptlab.results.exports.tracker_runs import TrackedRun, attached_files, tracked_runs, tracker_failure

if TYPE_CHECKING:  # pragma: no cover
    from adaptlab.results.store import ResultsStore

__all__ = ["RUN_ID_TAG", "log_to_mlflow"]

RUN_ID_TAG = "adaptlab.run_id"
"""The MLflow tag holding the stored run id: a second export finds and updates its run."""

_PARAM_MAX = 6000
"""MLflow's limit on a param value's length (longer values are cut with a marker)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]+")
"""Characters MLflow refuses in a param name (it allows letters, digits, ``_ - . /`` and space)."""
_DATABASE_SCHEMES = frozenset({"sqlite", "postgresql", "mysql", "mssql"})
"""URI schemes of MLflow's SQLAlchemy tracking store (``mysql+pymysql:`` counts as ``mysql``)."""
_SQLITE = "sqlite:///"
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
"""A tracking server's requests time out after 10 s and are retried twice (MLflow's defaults,
120 s and 7 retries with growing waits, kept an unreachable server busy for minutes); a value the
user set in the environment wins."""


def _client(tracking_uri: str) -> Any:
    if not isinstance(tracking_uri, str) or not tracking_uri.strip():
        raise ConfigError(
            "log_to_mlflow: tracking_uri is required (e.g. file:///path/mlruns or "
            "sqlite:///path/mlflow.db); there is no default server"
        )
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    for name, value in HTTP_LIMITS.items():
        os.environ.setdefault(name, value)
    if tracking_uri.startswith("file:") or "://" not in tracking_uri:  # asked for by name: allow it
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    tracking = require_extra("mlflow.tracking", "trackers", "MLflow exports")
    _require_database_packages(tracking_uri)
    return tracking.MlflowClient(tracking_uri=tracking_uri)


def _require_database_packages(tracking_uri: str) -> None:
    """A database tracking URI needs SQLAlchemy and Alembic, which mlflow-skinny lacks."""
    scheme = tracking_uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme not in _DATABASE_SCHEMES:
        return
    for module in ("sqlalchemy", "alembic"):  # mlflow-skinny does not install them
        require_extra(module, "trackers", f"MLflow {scheme}: tracking stores")


def _default_artifacts(tracking_uri: str) -> str | None:
    """``mlartifacts/`` beside a ``sqlite:`` database file (MLflow's default is ``./mlruns`` of
    the current directory); None (MLflow's default) for any other store."""
    if not tracking_uri.startswith(_SQLITE):
        return None
    path = tracking_uri[len(_SQLITE) :].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return (Path(path).resolve().parent / "mlartifacts").as_uri()


def _flatten(config: Any, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}``; lists as JSON; values cut to MLflow's limit."""
    if not isinstance(config, Mapping):
        return {prefix or "config": _param_text(config)}
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        out.update(
            _flatten(value, name) if isinstance(value, Mapping) else {_UNSAFE.sub("_", name): _param_text(value)}
        )
    return out


def _param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _PARAM_MAX else text[: _PARAM_MAX - 3] + "..."


def _params(run: TrackedRun) -> dict[str, str]:
    params = {f"config.{k}": v for k, v in _flatten(run.config).items()}
    params.update({k: _param_text(v) for k, v in run.provenance.items()})
    return params


def _existing(client: Any, experiment_id: str, run_id: str) -> Any | None:
    """The MLflow run an earlier export made for stored run ``run_id`` (tag ``adaptlab.run_id``)."""
    found = client.search_runs([experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'", max_results=1)
    return found[0] if found else None


def _log_one(client: Any, experiment_id: str, run: TrackedRun, artifacts: Sequence[Path]) -> str:
    """One MLflow run for one stored run, or the one an earlier export made for it (found by the
    stored run id, :data:`RUN_ID_TAG`), updated: only metrics whose value differs and params it
    lacks are logged, so exporting twice leaves one run with one value per metric. Returns the
    MLflow run id."""
    from mlflow.entities import Metric, Param

    row = run.row
    existing = _existing(client, experiment_id, run.run_id)
    if existing is None:
        tags = {RUN_ID_TAG: run.run_id, "adaptlab.package_version": str(row.get("package_version"))}
        mlflow_id = client.create_run(experiment_id, run_name=run.name, tags=tags).info.run_id
        have_metrics: dict[str, float] = {}
        have_params: dict[str, str] = {}
    else:
        mlflow_id, have_metrics, have_params = existing.info.run_id, existing.data.metrics, existing.data.params
    stamp = int(row["timestamp"].timestamp() * 1000) if row.get("timestamp") is not None else 0
    client.log_batch(
        mlflow_id,
        metrics=[Metric(k, v, stamp, 0) for k, v in run.metrics.items() if have_metrics.get(k) != v],
        params=[Param(k, v) for k, v in sorted(_params(run).items()) if k not in have_params],
    )
    for path in artifacts:
        client.log_artifact(mlflow_id, str(path), artifact_path="adaptlab")
    client.set_terminated(mlflow_id)
    return mlflow_id


def _experiment(client: Any, name: str, artifact_location: str | None) -> str:
    """The id of experiment ``name``, created (with ``artifact_location``) when it is new."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return client.create_experiment(name, artifact_location=artifact_location)


def log_to_mlflow(
    store: ResultsStore,
    tracking_uri: str,
    *,
    experiment: str | None = None,
    system: str | None = None,
    dataset: str | None = None,
    artifacts: Sequence[str | os.PathLike[str]] = (),
    artifact_location: str | None = None,
) -> dict[str, str]:
    """Log the latest run of each (system, dataset) in ``store`` (filtered by ``system`` /
    ``dataset``) to the MLflow tracking store at ``tracking_uri`` (required; see the module doc);
    ``artifacts``: files attached to every run; ``artifact_location``: where an experiment created
    here keeps them (default: MLflow's, or ``mlartifacts/`` beside a ``sqlite:`` database).
    Returns ``{stored run_id: MLflow run id}``."""
    files = attached_files(artifacts, "log_to_mlflow")
    runs = tracked_runs(store, system=system, dataset=dataset)
    out: dict[str, str] = {}
    try:
        client = _client(tracking_uri)
        for run in runs:
            exp_id = _experiment(
                client,
                experiment or run.row.get("study") or "adaptlab",
                artifact_location or _default_artifacts(tracking_uri),
            )
            out[run.run_id] = _log_one(client, exp_id, run, files)
    except Exception as e:  # noqa: BLE001 - MLflow, HTTP and file errors: one line, no traceback, no secret
        error = tracker_failure("MLflow tracking store", str(tracking_uri), e)
        if out:
            error = StoreError(f"{error} ({len(out)} of {len(runs)} runs logged; exporting again completes the rest)")
        raise error from None
    return out
