"""Domain adaptation: adaptation data (documents -> chunks -> nested scales -> synthetic
questions -> hard negatives -> triplets and held-out evaluation sets) and training.

Names load lazily from their modules, so ``import adaptlab.adapt`` stays light (no torch).
The data side: :mod:`~adaptlab.adapt.corpus`, :mod:`~adaptlab.adapt.chunking`,
:mod:`~adaptlab.adapt.scales`, :mod:`~adaptlab.adapt.questions`, :mod:`~adaptlab.adapt.llm`,
:mod:`~adaptlab.adapt.templates`, :mod:`~adaptlab.adapt.negatives`,
:mod:`~adaptlab.adapt.splits`, :mod:`~adaptlab.adapt.triplets`, :mod:`~adaptlab.adapt.evalset`,
:mod:`~adaptlab.adapt.prepare`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "AdaptationData": "prepare",
    "ChatClient": "llm",
    "Chunk": "chunking",
    "CleanOptions": "corpus",
    "DataScale": "scales",
    "DocumentSplits": "splits",
    "HardNegatives": "negatives",
    "InverseClozeGenerator": "questions",
    "LLMError": "llm",
    "LLMQuestionGenerator": "questions",
    "ResponseCache": "llm",
    "SyntheticQuestion": "questions",
    "SyntheticTemplateGenerator": "templates",
    "Triplet": "triplets",
    "TripletProvenance": "triplets",
    "build_scales": "scales",
    "build_triplets": "triplets",
    "chunk_documents": "chunking",
    "clean_text": "corpus",
    "corpus_from_dataset": "corpus",
    "heldout_dataset": "evalset",
    "load_documents": "corpus",
    "mine_hard_negatives": "negatives",
    "prepare_adaptation_data": "prepare",
    "read_triplets": "triplets",
    "split_documents": "splits",
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
