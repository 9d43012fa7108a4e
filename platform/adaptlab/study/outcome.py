"""What a study run produces: the evaluated systems, one outcome per dataset, and the study's
outcome (with what the adaptation stage produced, for a study with ``[adapt]``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.adapt.prep.prepare import AdaptationData
from adaptlab.adapt.train.tune import SweepResult
from adaptlab.analysis.scale_curves import ScaleCurve, scale_curves
from adaptlab.errors import ConfigError
from adaptlab.evaluation import EvaluationSummary
from adaptlab.evaluation.groups import GroupedSummary
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.study.adapt_config import AdaptSettings
from adaptlab.study.schema import ModelSection, StoreURI

__all__ = ["DatasetOutcome", "ScaleStudyOutcome", "StudyOutcome", "SystemInfo"]


@dataclass(frozen=True)
class SystemInfo:
    """One evaluated system: its name and how it is embedded; for an adapted one also its
    variant, data scale and artifact. A plain study's systems are its ``[[models]]`` entries
    (variant ``"model"``); the scale study's ``"reference"`` systems are its other models."""

    name: str
    variant: str
    n_documents: int | None
    section: ModelSection
    artifact_key: str = ""
    artifact_path: str = ""
    reused: bool = False
    training: dict[str, Any] = field(default_factory=dict)
    """An adapted system's training summary (its artifact manifest's ``"training"``: steps,
    epochs asked and run, schedule, first/last loss, relative weight change, check warnings)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the runs table's ``config.systems``; ``training`` only for an adapted one)."""
        out: dict[str, Any] = {
            "variant": self.variant,
            "n_documents": self.n_documents,
            "model_ref": self.section.ref,
            "artifact_key": self.artifact_key,
            "artifact_path": self.artifact_path,
            "reused": self.reused,
        }
        if self.training:
            out["training"] = dict(self.training)
        return out


@dataclass
class DatasetOutcome:
    """The evaluation of every system on one dataset."""

    dataset: str
    summary: EvaluationSummary
    records: dict[str, PerQueryRecords] = field(default_factory=dict)
    run_ids: dict[str, str] = field(default_factory=dict)
    groups: list[GroupedSummary] = field(default_factory=list)
    """The per-group results of each grouping column of the dataset (``group_by``)."""


@dataclass
class StudyOutcome:
    """Every dataset's outcome, in evaluation order, and the store they went to (or None)."""

    study: str
    store: Path | StoreURI | None
    datasets: list[DatasetOutcome]


@dataclass
class ScaleStudyOutcome(StudyOutcome):
    """:class:`StudyOutcome` plus what the adaptation stage produced."""

    settings: AdaptSettings | None = None
    systems: dict[str, SystemInfo] = field(default_factory=dict)
    data: AdaptationData | None = None
    sweep: SweepResult | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def curves(self, measure: str, dataset: str | None = None) -> list[ScaleCurve]:
        """:func:`adaptlab.analysis.scale_curves.scale_curves` of ``measure`` on ``dataset``
        (default: the held-out questions): each variant against the data scale, with CIs and
        paired gains over the base model."""
        name = dataset or (self.settings.heldout_name if self.settings is not None else "heldout")
        outcome = next((d for d in self.datasets if d.dataset == name), None)
        if outcome is None:
            raise ConfigError(f"no dataset {name!r} in this study; have {', '.join(d.dataset for d in self.datasets)}")
        return scale_curves(outcome.summary, measure)
