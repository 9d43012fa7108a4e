"""Domain adaptation: adaptation data (documents -> chunks -> nested scales -> synthetic
questions -> hard negatives -> triplets and held-out evaluation sets), training (PT, FT, PT-FT,
merged; Ray jobs; Ray Tune sweeps) and the scale study that ties them together.

Names load lazily from their modules, so ``import adaptlab.adapt`` stays light (no torch).
The data side: :mod:`~adaptlab.adapt.corpus`, :mod:`~adaptlab.adapt.chunking`,
:mod:`~adaptlab.adapt.scales`, :mod:`~adaptlab.adapt.questions`, :mod:`~adaptlab.adapt.llm`,
:mod:`~adaptlab.adapt.templates`, :mod:`~adaptlab.adapt.negatives`,
:mod:`~adaptlab.adapt.splits`, :mod:`~adaptlab.adapt.triplets`, :mod:`~adaptlab.adapt.evalset`,
:mod:`~adaptlab.adapt.prepare`. Training: :mod:`~adaptlab.adapt.train_pt`,
:mod:`~adaptlab.adapt.train_ft`, :mod:`~adaptlab.adapt.merge`, :mod:`~adaptlab.adapt.artifacts`,
:mod:`~adaptlab.adapt.jobs`, :mod:`~adaptlab.adapt.tune`. The scale study: :mod:`~adaptlab.adapt.study`
(its settings: :mod:`~adaptlab.adapt.study_config`; its figures: :mod:`~adaptlab.adapt.scale_curves`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "AdaptJob": "jobs",
    "AdaptSettings": "study_config",
    "AdaptationData": "prepare",
    "Artifact": "artifacts",
    "ChatClient": "llm",
    "Chunk": "chunking",
    "CleanOptions": "corpus",
    "DataScale": "scales",
    "DocumentSplits": "splits",
    "FTConfig": "train_ft",
    "HardNegatives": "negatives",
    "InverseClozeGenerator": "questions",
    "LLMError": "llm",
    "LLMQuestionGenerator": "questions",
    "PTConfig": "train_pt",
    "ResponseCache": "llm",
    "ScaleCurve": "scale_curves",
    "ScaleStudyOutcome": "study",
    "SweepResult": "tune",
    "SyntheticQuestion": "questions",
    "SyntheticTemplateGenerator": "templates",
    "Triplet": "triplets",
    "TripletProvenance": "triplets",
    "TuneSettings": "study_config",
    "VARIANTS": "jobs",
    "build_scales": "scales",
    "build_triplets": "triplets",
    "chunk_documents": "chunking",
    "clean_text": "corpus",
    "corpus_from_dataset": "corpus",
    "heldout_dataset": "evalset",
    "load_documents": "corpus",
    "merge_models": "merge",
    "merge_state_dicts": "merge",
    "mine_hard_negatives": "negatives",
    "open_artifact": "artifacts",
    "parse_adapt_section": "study_config",
    "parse_system_name": "scale_curves",
    "parse_tune_section": "study_config",
    "plot_scale_curves": "scale_curves",
    "prepare_adaptation_data": "prepare",
    "read_triplets": "triplets",
    "run_adaptation_jobs": "jobs",
    "run_scale_study": "study",
    "scale_curves": "scale_curves",
    "split_documents": "splits",
    "system_name": "study",
    "train_ft": "train_ft",
    "train_pt": "train_pt",
    "train_variant": "jobs",
    "tune_adaptation": "tune",
    "write_triplets": "triplets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'adaptlab.adapt' has no attribute {name!r}")
    return getattr(importlib.import_module(f"adaptlab.adapt.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
