"""What an experiment-tracker export (MLflow, Weights & Biases) takes from a results store.

One tracked run per stored run: the latest run of each (system, dataset), filtered by system and
dataset, named ``SYSTEM on DATASET``, with

- its study config (the ``runs`` row's JSON, parsed) and its provenance (``system``, ``dataset``,
  ``model_id``, ``model_revision``, ``dataset_fingerprint``, ``seed``);
- its scores as flat metric names: ``ndcg@10`` -> ``ndcg_at_10`` (the MTEB key,
  :func:`adaptlab.results.exports.mteb.metric_key`, or a tracker's stricter rule), plus ``NAME_ci_low``
  and ``NAME_ci_high`` when the CI is stored.

The trackers' own modules (``mlflow_log.py``, ``wandb_log.py``) only write these.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import AdaptlabError, ConfigError, StoreError, mask_url
from adaptlab.results.exports.mteb import metric_key

if TYPE_CHECKING:  # pragma: no cover
    from adaptlab.results.store import ResultsStore

__all__ = ["PROVENANCE", "TrackedRun", "attached_files", "score_metrics", "tracked_runs", "tracker_failure"]

PROVENANCE = ("system", "dataset", "model_id", "model_revision", "dataset_fingerprint", "seed")
"""The ``runs`` columns every tracker records beside the study config."""
_BOUNDS = ("ci_low", "ci_high")
_REASON = re.compile(
    r"\[Errno -?\d+\] [^\"')\]]+|Read timed out|timed out|Connection refused|Name or service not known"
)


@dataclass(frozen=True)
class TrackedRun:
    """One stored run as a tracker sees it: its ``runs`` row and its named metrics."""

    row: Mapping[str, Any]
    metrics: dict[str, float]

    @property
    def run_id(self) -> str:
        return str(self.row["run_id"])

    @property
    def name(self) -> str:
        """``SYSTEM on DATASET``, the tracked run's display name."""
        return f"{self.row['system']} on {self.row['dataset']}"

    @property
    def config(self) -> Any:
        """The study config as stored (a JSON text, parsed; kept as is when it is not JSON)."""
        config = self.row.get("config") or "{}"
        if not isinstance(config, str):
            return config
        try:
            return json.loads(config)
        except json.JSONDecodeError:
            return config

    @property
    def provenance(self) -> dict[str, Any]:
        """The :data:`PROVENANCE` fields that are set, with their stored values."""
        return {k: self.row[k] for k in PROVENANCE if self.row.get(k) is not None}


def score_metrics(rows: Sequence[Mapping[str, Any]], name: Callable[[str], str] = metric_key) -> dict[str, float]:
    """``{name(measure): value, name(measure)_ci_low: ..., name(measure)_ci_high: ...}`` of one
    run's score rows; two measures that ``name`` maps to one key are refused (one line)."""
    out: dict[str, float] = {}
    source: dict[str, str] = {}
    for r in rows:
        measure = str(r["measure"])
        key = name(measure)
        if source.setdefault(key, measure) != measure:
            raise StoreError(
                f"measures {source[key]!r} and {measure!r} both become the tracker metric {key!r}; rename one of them"
            )
        out[key] = float(r["value"])
        out.update({f"{key}_{b}": float(r[b]) for b in _BOUNDS if r.get(b) is not None})
    return out


def attached_files(paths: Sequence[str | os.PathLike[str]], caller: str) -> list[Path]:
    """``paths`` as Paths, each an existing file and no two with one file name (a tracker keeps
    them side by side under ``adaptlab/``); else one ConfigError naming them."""
    files = [Path(p) for p in paths]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise ConfigError(f"{caller}: artifact file(s) not found: {', '.join(missing)}")
    names = [p.name for p in files]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(
            f"{caller}: artifact files share a name ({', '.join(twice)}); "
            "they are stored side by side under adaptlab/: rename or copy one"
        )
    return files


def tracked_runs(
    store: ResultsStore,
    *,
    system: str | None = None,
    dataset: str | None = None,
    name: Callable[[str], str] = metric_key,
) -> list[TrackedRun]:
    """The latest run of each (system, dataset) in ``store`` (filtered by ``system`` /
    ``dataset``), each with its score metrics named by ``name``; a StoreError when none match."""
    filters: dict[str, Any] = {k: v for k, v in (("system", system), ("dataset", dataset)) if v is not None}
    runs = store.runs(latest=True, **filters).to_pylist()
    if not runs:
        raise StoreError(f"no runs in the store for {filters or 'any system'}; run a study first or check the filter")
    scores = store.metrics(kind="score", latest=True, **filters).to_pylist()
    return [TrackedRun(run, score_metrics([r for r in scores if r["run_id"] == run["run_id"]], name)) for run in runs]


def tracker_failure(tracker: str, where: str, e: BaseException) -> AdaptlabError:
    """One line for a tracker's failure, to raise instead of ``e``: the tracker, where (masked),
    and the reason (an OS error's text, a connection failure's cause, else the first line of the
    message, masked and cut); never a traceback or a secret. An adaptlab error is returned as is."""
    if isinstance(e, AdaptlabError):
        return e
    text = str(e)
    if isinstance(e, OSError) and e.strerror:
        reason = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    else:
        found = _REASON.findall(text)
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        reason = found[-1] if found else first
    hint = (
        "; free some space and export again"
        if getattr(e, "errno", None) == errno.ENOSPC or "No space left" in text
        else ""
    )
    line = " ".join(mask_url(f"{tracker} at {where}: {reason.strip()}{hint}").split())
    return StoreError(line if len(line) <= 400 else line[:397] + "...")
