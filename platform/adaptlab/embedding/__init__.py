"""Embedding at scale: a Ray Data actor pool, one model per actor (``embed_texts``)."""

from __future__ import annotations

from adaptlab.embedding.actor import EmbedBatch, EncoderFactory
from adaptlab.embedding.pipeline import EmbeddingRun, embed_texts, embed_texts_detailed, plan_blocks

__all__ = ["EmbedBatch", "EmbeddingRun", "EncoderFactory", "embed_texts", "embed_texts_detailed", "plan_blocks"]
