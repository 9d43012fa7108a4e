"""Embedding at scale: warm Ray actor pools, one model per actor (``embed_texts``; pools are
kept per model until ``release_pools()`` or the ``embedding_pools()`` context ends), and the
content-hash embedding cache (``Embedder``). Importing this package does not import ray or torch.
"""

from __future__ import annotations

from adaptlab.embedding.actor import EmbedBatch, EncoderFactory
from adaptlab.embedding.cache import LOCAL_BELOW, Embedder, EmbeddingCache, texts_hash
from adaptlab.embedding.pipeline import EmbeddingRun, embed_texts, embed_texts_detailed, plan_blocks
from adaptlab.embedding.placement import ClusterCapacityError, PoolPlacement
from adaptlab.embedding.pool import EncoderPool, active_pools, embedding_pools, release_pools
from adaptlab.embedding.settings import EmbedSettings

__all__ = [
    "LOCAL_BELOW",
    "ClusterCapacityError",
    "EmbedBatch",
    "EmbedSettings",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingRun",
    "EncoderFactory",
    "EncoderPool",
    "PoolPlacement",
    "active_pools",
    "embed_texts",
    "embed_texts_detailed",
    "embedding_pools",
    "plan_blocks",
    "release_pools",
    "texts_hash",
]
