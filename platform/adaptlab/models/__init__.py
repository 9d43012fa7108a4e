"""Encoders: the :class:`Encoder` interface, model references and backends.

``load_encoder("minilm")`` returns an encoder whose ``encode_queries`` / ``encode_documents``
give L2-normalised float32 ``[n, d]`` arrays and whose ``revision`` identifies the weights.
Importing this package does not import torch; backends load on first use.
"""

from __future__ import annotations

from adaptlab.models.base import BACKENDS, Encoder, TextKind, l2_normalize, register_backend
from adaptlab.models.hashing import HashingEncoder
from adaptlab.models.instructions import BGE_QUERY_INSTRUCTION, LLM_EMBEDDER_INSTRUCTIONS
from adaptlab.models.load import EncoderSpec, check_backend_packages, load_encoder, pick_backend
from adaptlab.models.resolve import (
    MODEL_ALIASES,
    ModelRef,
    hub_reachable,
    model_revision,
    resolve_model,
    weights_sha256,
)

__all__ = [
    "BACKENDS",
    "BGE_QUERY_INSTRUCTION",
    "Encoder",
    "EncoderSpec",
    "HashingEncoder",
    "LLM_EMBEDDER_INSTRUCTIONS",
    "MODEL_ALIASES",
    "ModelRef",
    "TextKind",
    "check_backend_packages",
    "hub_reachable",
    "l2_normalize",
    "load_encoder",
    "model_revision",
    "pick_backend",
    "register_backend",
    "resolve_model",
    "weights_sha256",
]
