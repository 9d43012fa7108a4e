"""The vocabulary of model variants and system names, defined once for every layer above.

A scale study evaluates *variants* of a base model at several data *scales* (number of
training-scale documents) and stores each under a *system name*:

=================  =====================================================  ==================
variant            what it is                                             system name
=================  =====================================================  ==================
``base``           the bi-encoder as is                                   ``minilm-base``
``pt``             continued pre-training (MLM) on the domain's chunks    ``minilm-pt-s10``
``ft``             contrastive fine-tuning on the scale's triplets        ``minilm-ft-s100``
``pt-ft``          FT starting from the PT model                          ``minilm-pt-ft-s10``
``merged``         weight average of FT (or PT-FT) and the base           ``minilm-merged-s700``
``colbert-base``   the ColBERT model as is (late interaction)             ``colbert-base``
``colbert-ft``     that ColBERT fine-tuned on the same triplets           ``colbert-ft-s100``
``reference``      another ``[[models]]`` entry of a scale study          its own name
``model``          a ``[[models]]`` entry of a plain (non-adapting) study its own name
=================  =====================================================  ==================

The prefix of a system name (``minilm``, ``colbert``) is the family's *label*; a ColBERT
variant's name is its family's variant suffix (``base``, ``ft``) under the ColBERT label, so
:func:`parse_system_name` reads ``colbert-ft-s100`` as label ``colbert``, variant ``ft``.
"""

from __future__ import annotations

import re

from adaptlab.errors import ConfigError

__all__ = [
    "BASE",
    "BI_ENCODER_BACKEND",
    "BI_ENCODER_VARIANTS",
    "BM25_REF",
    "COLBERT_BACKEND",
    "COLBERT_BASE",
    "COLBERT_FT",
    "COLBERT_LABEL",
    "COLBERT_VARIANTS",
    "FT",
    "MERGED",
    "MERGE_SOURCES",
    "MODEL",
    "PT",
    "PT_FT",
    "REFERENCE",
    "TRAINED_VARIANTS",
    "TUNABLE_VARIANTS",
    "UNTRAINED_VARIANTS",
    "curve_order",
    "family_variant",
    "is_base",
    "is_colbert",
    "is_trained",
    "parse_system_name",
    "system_name",
]

BASE = "base"
"""The unadapted bi-encoder (also the suffix of every family's base system name)."""
PT = "pt"
"""Continued pre-training (masked language modelling) on the domain's chunks."""
FT = "ft"
"""Contrastive fine-tuning on the scale's (question, positive, hard negatives) triplets."""
PT_FT = "pt-ft"
"""Fine-tuning that starts from the PT model."""
MERGED = "merged"
"""A weight average of a fine-tuned model (:data:`MERGE_SOURCES`) and the base."""
COLBERT_BASE = "colbert-base"
"""The ColBERT (late interaction) model as is: an untrained one when built from a plain BERT."""
COLBERT_FT = "colbert-ft"
"""The ColBERT model fine-tuned on the same triplets as :data:`FT`."""
REFERENCE = "reference"
"""Another ``[[models]]`` entry of a scale study, evaluated beside the variants."""
MODEL = "model"
"""A ``[[models]]`` entry of a plain study (no ``[adapt]`` section)."""

BI_ENCODER_VARIANTS: tuple[str, ...] = (BASE, PT, FT, PT_FT, MERGED)
"""Bi-encoder variants a scale study evaluates by default, in report order."""
COLBERT_VARIANTS: tuple[str, ...] = (COLBERT_BASE, COLBERT_FT)
"""ColBERT variants, opt-in through ``[adapt].variants``."""
TRAINED_VARIANTS: tuple[str, ...] = (PT, FT, PT_FT, MERGED, COLBERT_FT)
"""Variants that train an artifact at every data scale."""
UNTRAINED_VARIANTS: tuple[str, ...] = (BASE, COLBERT_BASE, REFERENCE, MODEL)
"""Variants evaluated as they are (no training, no data scale)."""
TUNABLE_VARIANTS: tuple[str, ...] = (FT, PT_FT)
"""Variants a Ray Tune sweep can fine-tune (``[tune].variant``)."""
MERGE_SOURCES: tuple[str, ...] = (FT, PT_FT)
"""Variants a merged model may average with the base (``[adapt].merge_source``)."""

COLBERT_BACKEND = "colbert"
"""The embedding backend (:data:`adaptlab.models.BACKENDS`) of the ColBERT variants."""
COLBERT_LABEL = "colbert"
"""The default system-name prefix of the ColBERT family (``[adapt.colbert].name``)."""
BM25_REF = "bm25"
"""The reference (``[[models]]`` ``ref``) of the lexical BM25 system, searched by
:mod:`adaptlab.retrieval.lexical` instead of being embedded; also its :class:`ModelRef` backend."""
BI_ENCODER_BACKEND = "sentence-transformers"
"""The embedding backend of the trained bi-encoder variants."""

_FAMILY_SUFFIX: dict[str, str] = {COLBERT_BASE: BASE, COLBERT_FT: FT}
_CURVE_ORDER: dict[str, int] = {PT: 0, FT: 1, PT_FT: 2, MERGED: 3}
_NAME = re.compile(rf"^(?P<label>.+?)-(?:(?P<base>{BASE})|(?P<variant>{PT_FT}|{PT}|{FT}|{MERGED})-s(?P<n>\d+))$")


def is_colbert(variant: str) -> bool:
    """True for a ColBERT (late interaction) variant."""
    return variant in COLBERT_VARIANTS


def is_trained(variant: str) -> bool:
    """True for a variant that trains an artifact at every data scale."""
    return variant in TRAINED_VARIANTS


def is_base(variant: str) -> bool:
    """True for a family's untrained base (``base`` or ``colbert-base``)."""
    return variant in (BASE, COLBERT_BASE)


def family_variant(variant: str) -> str:
    """The variant's suffix under its family's label: ``colbert-ft`` -> ``ft``,
    ``colbert-base`` -> ``base``; a bi-encoder variant is its own suffix."""
    return _FAMILY_SUFFIX.get(variant, variant)


def system_name(label: str, variant: str, n_documents: int | None = None) -> str:
    """The store's system name: ``f"{label}-base"`` or ``f"{label}-{variant}-s{n_documents}"``
    (``variant`` a family suffix: :func:`family_variant` of a ColBERT variant)."""
    if variant == BASE:
        return f"{label}-{BASE}"
    if n_documents is None:
        raise ConfigError(f"system_name: variant {variant!r} needs the data scale (number of documents)")
    return f"{label}-{variant}-s{int(n_documents)}"


def parse_system_name(name: str) -> tuple[str, str, int | None] | None:
    """``(label, variant, n_documents)`` of a scale-study system name, or None for another name.

    ``"minilm-pt-ft-s10"`` -> ``("minilm", "pt-ft", 10)``; ``"minilm-base"`` ->
    ``("minilm", "base", None)``.
    """
    m = _NAME.match(name)
    if m is None:
        return None
    if m.group("base"):
        return m.group("label"), BASE, None
    return m.group("label"), m.group("variant"), int(m.group("n"))


def curve_order(variant: str) -> int:
    """Sort key of a trained bi-encoder variant in curves and tables (pt, ft, pt-ft, merged;
    anything else after them)."""
    return _CURVE_ORDER.get(variant, 9)  # after every known variant
