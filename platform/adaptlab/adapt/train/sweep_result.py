"""What a sweep returns: :class:`SweepResult`, one row per trial from Ray Tune's results
(:func:`summarise_trial`: every reported field from the trial's best epoch by the selection
objective), the chosen row (:func:`choose_best`, with its honest value on the confirmation
queries), and the rows for the store's ``metrics`` table (:meth:`SweepResult.to_metric_rows`).
The objective itself is :mod:`.objective`; the driver that runs the sweep :mod:`.tune`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptlab.stats import BootstrapConfig

__all__ = ["TUNE_MEASURE", "SweepResult", "choose_best", "summarise_trial", "trial_rows"]

TUNE_MEASURE = "tune_objective"
"""The ``measure`` of a sweep's rows in the store's ``metrics`` table (:meth:`SweepResult.to_metric_rows`)."""


_REPORTED = (
    "objective",
    "ci_low",
    "ci_high",
    "mean",
    "point",
    "n_queries",
    "epoch",
    "confirm_ci_low",
    "confirm_ci_high",
    "confirm_mean",
    "confirm_n_queries",
)
"""Per-epoch report fields a row takes from its best epoch."""


@dataclass
class SweepResult:
    """One row per trial (``config/<name>`` columns plus the report of its best epoch by the
    selection objective), the best row (:func:`choose_best`: the selection value,
    ``best_objective``, is optimistic; ``confirmed_*`` are the honest value and CI on the
    confirmation queries), where the experiment lives, whether it was restored, and the
    objective's measure and bootstrap."""

    rows: list[dict[str, Any]]
    best: dict[str, Any] | None
    experiment_path: str
    restored: bool = False
    measure: str = ""
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)

    def to_arrow(self) -> Any:
        import pyarrow as pa  # deferred: pyarrow loads on use

        return pa.Table.from_pylist(self.rows)

    def best_config(self) -> dict[str, Any]:
        """The chosen trial's settings ``{name: value}`` (``epochs`` = the epoch that won); empty
        when no trial was chosen."""
        return _trial_settings(self.best or {})

    def to_metric_rows(self, system: str, dataset: str, confirm_dataset: str) -> list[dict[str, Any]]:
        """Rows for the store's ``metrics`` table (``run_id`` left to the caller), measure
        :data:`TUNE_MEASURE`: one per trial on ``dataset``, value = its best selection objective (a
        lower CI bound on the queries that chose it: optimistic for the chosen trial,
        ``extra.selection = "optimistic"``) with the CI of the same epoch; and one for the chosen
        trial on ``confirm_dataset``: its lower bound on the confirmation queries, which took no
        part in the selection (``extra.selection = "confirmed"``, the honest value).
        ``sample_size`` is the number of queries each resample drew: the bootstrap's, else the
        part's (``n_queries``)."""
        boot = self.bootstrap
        rows = []
        for r in self.rows:
            value = r.get("best_objective")
            rows.append(
                {
                    "system": system,
                    "dataset": dataset,
                    "measure": TUNE_MEASURE,
                    "value": float("nan") if value is None else float(value),
                    "ci_low": r.get("ci_low"),
                    "ci_high": r.get("ci_high"),
                    "boot_mean": r.get("mean"),
                    "n_queries": r.get("n_queries"),
                    "n_resamples": boot.n_resamples,
                    "sample_size": boot.sample_size or r.get("n_queries"),
                    "seed": boot.seed,
                    "extra": {
                        "trial_id": r.get("trial_id"),
                        "status": r.get("status"),
                        "iterations": r.get("iterations"),
                        "measure": r.get("measure"),
                        "epoch_objective": r.get("objective"),
                        "selection": "optimistic",
                        "config": _trial_settings(r),
                        "error": r.get("error"),
                    },
                }
            )
        return rows + self._confirmed_rows(system, confirm_dataset)

    def _confirmed_rows(self, system: str, dataset: str) -> list[dict[str, Any]]:
        """The chosen trial's value on the confirmation queries (none when no trial was chosen)."""
        best = self.best or {}
        value = best.get("confirmed_objective")
        if value is None:
            return []
        return [
            {
                "system": system,
                "dataset": dataset,
                "measure": TUNE_MEASURE,
                "value": float(value),
                "ci_low": best.get("confirmed_ci_low"),
                "ci_high": best.get("confirmed_ci_high"),
                "boot_mean": best.get("confirmed_mean"),
                "n_queries": best.get("confirmed_n_queries"),
                "n_resamples": self.bootstrap.n_resamples,
                "seed": self.bootstrap.seed,
                "sample_size": self.bootstrap.sample_size or best.get("confirmed_n_queries"),
                "extra": {"trial_id": best.get("trial_id"), "selection": "confirmed", "config": _trial_settings(best)},
            }
        ]


def _trial_settings(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's ``config/<name>`` columns as ``{name: value}``."""
    return {k.split("/", 1)[1]: v for k, v in row.items() if k.startswith("config/")}


def summarise_trial(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A trial's row fields from its per-epoch reports: all of them from its best epoch by the
    selection ``objective`` (value and CI from one epoch), plus ``best_objective`` = that value;
    empty when no epoch was reported."""
    scored = [h for h in history if h.get("objective") is not None and np.isfinite(h["objective"])]
    if not scored:
        return {key: None for key in (*_REPORTED, "best_objective")}
    top = max(scored, key=lambda h: float(h["objective"]))
    out = {key: _plain(top.get(key)) for key in _REPORTED}
    out["best_objective"] = float(top["objective"])
    return out


def _plain(value: Any) -> Any:
    """A NumPy scalar from Tune's table as the Python number it holds (rows are stored as JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def choose_best(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The row with the largest selection ``best_objective`` (ties: the first), with
    ``config/epochs`` set to the epoch that won (``trial_epochs`` keeps the trial's own) and the
    honest value on the confirmation queries: ``confirmed_objective`` = ``confirmed_ci_low``,
    ``confirmed_ci_high``, ``confirmed_mean``, ``confirmed_n_queries``. ``best_objective`` stays
    the optimistic selection value, labelled so by ``selection_value``."""
    scored = [r for r in rows if r.get("best_objective") is not None]
    if not scored:
        return None
    best = dict(max(scored, key=lambda r: float(r["best_objective"])))
    if best.get("epoch") is not None:
        best["trial_epochs"] = best.get("config/epochs")
        best["config/epochs"] = int(best["epoch"])
    best["confirmed_objective"] = best["confirmed_ci_low"] = best.get("confirm_ci_low")
    best["confirmed_ci_high"] = best.get("confirm_ci_high")
    best["confirmed_mean"] = best.get("confirm_mean")
    best["confirmed_n_queries"] = best.get("confirm_n_queries")
    best["selection_value"] = "optimistic: the largest of the trials' selection lower bounds"
    return best


def _history(result: Any) -> list[dict[str, Any]]:
    """A Tune result's per-epoch reports (its last one when Tune kept no table)."""
    df = result.metrics_dataframe
    if df is not None and "objective" in getattr(df, "columns", ()):
        return df.to_dict("records")
    return [dict(result.metrics or {})] if result.metrics else []


def trial_rows(grid: Any, measure: str) -> list[dict[str, Any]]:
    """One row per trial: status, config and :func:`summarise_trial` of its reports."""
    rows = []
    for r in grid:
        metrics = dict(r.metrics or {})
        config = dict(r.config or {})
        iterations = metrics.get("training_iteration")
        epochs = int(config.get("epochs", 0) or 0)
        status = "error" if r.error else ("complete" if epochs and iterations == epochs else "stopped")
        row: dict[str, Any] = {
            "trial_id": metrics.get("trial_id"),
            "status": status,
            "iterations": iterations,
            "measure": measure,
        }
        row.update({f"config/{k}": v for k, v in sorted(config.items())})
        row.update(summarise_trial(_history(r)))
        row["error"] = None if r.error is None else str(r.error)[:500]
        rows.append(row)
    rows.sort(key=lambda x: str(x["trial_id"]))
    return rows
