"""Log a store's runs to Weights & Biases, offline: one W&B run per stored run.

Each stored run (one system on one dataset) becomes one W&B run named ``SYSTEM on DATASET`` in the
project ``project`` (default: the run's study, else ``adaptlab``), written as an offline run
folder ``DIR/wandb/offline-run-TIME-ID/`` that ``wandb sync`` uploads later, with

- config: the run's study config under ``config`` (nested, native values: W&B shows
  ``config.k``, MLflow's param names), its provenance (``system``, ``dataset``, ``model_id``, ...)
  and ``adaptlab.run_id`` / ``adaptlab.package_version``;
- summary: each score under a W&B-sortable name, ``NAME`` plus ``NAME_ci_low`` and
  ``NAME_ci_high`` when the CI is stored. W&B sorts and filters only metric names matching
  ``^[_a-zA-Z][_a-zA-Z0-9]*$`` (GraphQL names) and keeps names starting with ``_`` for its own
  (``_runtime``, ``_step``), so the MLflow name (``ndcg@10`` -> ``ndcg_at_10``) has any other
  character replaced by ``_`` and gets ``m_`` in front when it does not start with a letter;
- files: the files given in ``artifacts`` (a report, run files), copied into the run folder under
  ``files/adaptlab/`` (copies: the folder stays complete when the originals move).

The runs, their metric names and their provenance are :mod:`adaptlab.results.exports.tracker_runs`'s,
shared with the MLflow export. Offline only: nothing is sent, and adaptlab never reads, logs or
stores a W&B API key. A user who configured wandb themselves (``wandb login``) and set
``WANDB_MODE=online`` gets online runs, with the credentials wandb finds on its own. System
metrics, console capture, git and code saving are off. A failure (a full disk, W&B's own errors)
is one line, and the run folders this export made are removed. Needs ``pip install 'adaptlab[wandb]'``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError, require_extra
from adaptlab.results.exports.mteb import metric_key
from adaptlab.results.exports.tracker_runs import TrackedRun, attached_files, tracked_runs, tracker_failure

if TYPE_CHECKING:  # pragma: no cover
    from adaptlab.results.store import ResultsStore

__all__ = ["log_to_wandb", "offline", "wandb_metric_name"]

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]+")
"""Characters outside W&B's sortable metric names (GraphQL names: letters, digits, ``_``)."""
_NOT_IN_PROJECT = re.compile(r"[/\\#?%:\s]+")
"""Characters W&B refuses in a project name."""
_PROJECT_MAX = 128
_FILES = "adaptlab"
"""The folder of the attached files inside a run's ``files/``."""
INIT_TIMEOUT_S = 30.0
"""How long starting a run may take (W&B's own default is 90 s; online, it includes connecting)."""


def wandb_metric_name(measure: str) -> str:
    """A stored measure's W&B summary key: ``ndcg@10`` -> ``ndcg_at_10``, ``isoscore-2d`` ->
    ``isoscore_2d``, ``2d`` -> ``m_2d`` (see the module doc for W&B's rule)."""
    key = _NOT_IN_NAME.sub("_", metric_key(measure))
    return key if key[:1].isalpha() else f"m_{key.lstrip('_')}"


def _project(name: str, given: bool) -> str:
    """A valid W&B project name: ``given`` names are checked (one line when not), a study's name
    has W&B's refused characters replaced by ``_``."""
    if given:
        if not name.strip() or _NOT_IN_PROJECT.search(name) or len(name) > _PROJECT_MAX:
            raise ConfigError(
                f"log_to_wandb: project {name!r} is not a W&B project name; expected at most "
                f"{_PROJECT_MAX} characters without spaces or / \\ # ? % :"
            )
        return name
    return _NOT_IN_PROJECT.sub("_", name)[:_PROJECT_MAX] or "adaptlab"


def _wandb() -> Any:
    return require_extra("wandb", "trackers", "W&B exports")


def offline() -> bool:
    """True (runs are written offline) unless the user set ``WANDB_MODE=online`` themselves."""
    return os.environ.get("WANDB_MODE", "").strip().lower() != "online"


def _settings(wandb: Any) -> Any:
    """No console capture, system metrics, machine metadata, git state or code: only what the
    export writes, and nothing printed."""
    return wandb.Settings(
        mode="offline" if offline() else "online",
        console="off",
        silent=True,
        x_disable_stats=True,
        x_disable_meta=True,
        x_disable_machine_info=True,
        disable_git=True,
        save_code=False,
        x_save_requirements=False,
        init_timeout=INIT_TIMEOUT_S,
    )


def _config(run: TrackedRun) -> dict[str, Any]:
    meta = {"run_id": run.run_id, "package_version": run.row.get("package_version")}
    return {"config": run.config, **run.provenance, "adaptlab": meta}


def _attach(wb_run: Any, files: Sequence[Path]) -> None:
    """Copy ``files`` into the run's ``files/adaptlab/`` and record them for ``wandb sync``."""
    target = Path(wb_run.dir) / _FILES
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        copy = target / path.name
        shutil.copyfile(path, copy)
        wb_run.save(str(copy), base_path=wb_run.dir, policy="now", glob=False)


def _log_one(wandb: Any, out_dir: Path, project: str, run: TrackedRun, files: Sequence[Path]) -> Path:
    """One W&B run for one stored run; returns its run folder."""
    wb_run = wandb.init(
        project=project,
        name=run.name,
        dir=str(out_dir),
        config=_config(run),
        tags=["adaptlab"],
        job_type="adaptlab-export",
        reinit="create_new",
        settings=_settings(wandb),
    )
    try:
        wb_run.summary.update(run.metrics)
        _attach(wb_run, files)
    except BaseException:
        wb_run.finish(exit_code=1)
        raise
    wb_run.finish()
    return Path(wb_run.dir).parent


def log_to_wandb(
    store: ResultsStore,
    out_dir: str | os.PathLike[str],
    *,
    project: str | None = None,
    system: str | None = None,
    dataset: str | None = None,
    artifacts: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Path]:
    """Write the latest run of each (system, dataset) in ``store`` (filtered by ``system`` /
    ``dataset``) as offline W&B runs under ``out_dir/wandb/`` (created when missing; see the
    module doc); ``artifacts``: files attached to every run. Returns ``{stored run_id: the W&B
    run folder}``, each one ``wandb sync FOLDER`` uploads."""
    files = attached_files(artifacts, "log_to_wandb")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"log_to_wandb: {out} is a file; expected a folder for the offline W&B runs")
    if project is not None:
        _project(project, given=True)
    runs = tracked_runs(store, system=system, dataset=dataset, name=wandb_metric_name)
    wandb = _wandb()
    before = _run_folders(out)
    raising, logging.raiseExceptions = logging.raiseExceptions, False  # W&B's log files on a full disk: no tracebacks
    try:
        out.mkdir(parents=True, exist_ok=True)
        return {
            run.run_id: _log_one(
                wandb, out, project or _project(str(run.row.get("study") or "adaptlab"), False), run, files
            )
            for run in runs
        }
    except Exception as e:  # noqa: BLE001 - W&B and file errors: one line, and no run of this export is kept
        for folder in _run_folders(out) - before:
            shutil.rmtree(folder, ignore_errors=True)
        raise tracker_failure("W&B runs", str(out), e) from None
    finally:
        logging.raiseExceptions = raising


def _run_folders(out: Path) -> set[Path]:
    """The W&B run folders under ``out/wandb`` (offline and online)."""
    try:
        return {
            p
            for p in (out / "wandb").iterdir()
            if p.is_dir() and not p.is_symlink() and p.name.startswith(("offline-run-", "run-"))
        }
    except OSError:
        return set()
