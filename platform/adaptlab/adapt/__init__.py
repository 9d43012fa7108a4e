"""Domain adaptation, the stage between data and evaluation.

Two subpackages, each a chain of pure steps:

- :mod:`adaptlab.adapt.prep`: raw documents -> cleaned chunks -> nested data scales ->
  synthetic questions -> hard negatives -> document splits -> triplets and held-out evaluation
  sets (:func:`~adaptlab.adapt.prep.prepare.prepare_adaptation_data` runs the chain).
- :mod:`adaptlab.adapt.train`: PT, FT, PT-FT and merged models as content-addressed
  safetensors artifacts, Ray training jobs, Ray Tune sweeps.

The scale study that ties adaptation to evaluation is orchestrated by :mod:`adaptlab.study`.
Names load lazily from their modules, so ``import adaptlab.adapt`` stays light (no torch).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "AdaptJob": "train.jobs",
    "AdaptationData": "prep.prepare",
    "Artifact": "train.artifacts",
    "ChatClient": "prep.llm",
    "Chunk": "prep.chunking",
    "DataScale": "prep.scales",
    "DocumentSplits": "prep.splits",
    "FTConfig": "train.ft",
    "HardNegatives": "prep.negatives",
    "InverseClozeGenerator": "prep.questions",
    "LLMError": "prep.llm",
    "LLMQuestionGenerator": "prep.questions",
    "PTConfig": "train.pt",
    "ResponseCache": "prep.llm",
    "SweepConfig": "train.sweep_config",
    "SweepResult": "train.tune",
    "SyntheticQuestion": "prep.questions",
    "SyntheticTemplateGenerator": "prep.templates",
    "Triplet": "prep.triplets",
    "TrainingResourceError": "train.memory",
    "TripletProvenance": "prep.triplets",
    "VARIANTS": "train.jobs",
    "build_scales": "prep.scales",
    "build_triplets": "prep.triplets",
    "chunk_documents": "prep.chunking",
    "heldout_dataset": "prep.evalset",
    "merge_models": "train.merge",
    "merge_state_dicts": "train.merge",
    "mine_hard_negatives": "prep.negatives",
    "open_artifact": "train.artifacts",
    "prepare_adaptation_data": "prep.prepare",
    "read_triplets": "prep.triplets",
    "run_adaptation_jobs": "train.jobs",
    "split_documents": "prep.splits",
    "train_ft": "train.ft",
    "train_pt": "train.pt",
    "train_variant": "train.jobs",
    "tune_adaptation": "train.tune",
    "write_triplets": "prep.triplets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'adaptlab.adapt' has no attribute {name!r}")
    return getattr(importlib.import_module(f"adaptlab.adapt.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
