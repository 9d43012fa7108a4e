"""A model-free encoder: signed feature hashing of lowercase word tokens.

For each token ``t`` of a text (``\\w+`` after lowercasing), ``h = blake2b(t, 8 bytes)``
gives a bucket ``h mod dim`` and a sign from bit 63 of ``h``; the embedding is the sum of
the signed one-hot buckets, L2-normalised (Weinberger et al., "Feature Hashing for Large
Scale Multitask Learning", ICML 2009). Cosine similarity then approximates the cosine of
bag-of-words count vectors.

It is deterministic across processes and machines (no Python ``hash``), needs no weights
and is fast: it serves smoke runs, tests of the Ray pipeline, and a lexical floor for
comparisons. Queries and documents are encoded alike. Reference: ``hash`` or ``hash:DIM``.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.models.base import Encoder, TextKind, clean_options

if TYPE_CHECKING:
    from adaptlab.models.ref import ModelRef

__all__ = ["HASH_REVISION", "HashingEncoder"]

HASH_REVISION = "hash-v1"
"""Revision of the hashing scheme; bump it if the token rule or the hash changes."""

_TOKEN = re.compile(r"\w+")
_OPTIONS = ("dim", "query_instruction", "document_instruction", "max_seq_length", "trust_remote_code")


def _bucket(token: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) == 0 else -1.0)


class HashingEncoder(Encoder):
    """Signed feature hashing into ``dim`` buckets (default 256)."""

    backend = "hash"

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 2:
            raise ConfigError(f"hash encoder: dim must be an integer >= 2, got {dim!r}")
        super().__init__("adaptlab/hash", int(dim), revision=HASH_REVISION, options={"dim": int(dim)})
        self._cache: dict[str, tuple[int, float]] = {}

    @classmethod
    def load(cls, model: ModelRef, *, device: str | None = None, **options: Any) -> HashingEncoder:
        """Backend loader; options: ``dim`` (instructions etc. are accepted and ignored)."""
        opts = clean_options({**model.options, **options}, _OPTIONS, "hash")
        return cls(int(opts.get("dim", 256)))

    def _encode(self, texts: list[str], kind: TextKind, batch_size: int) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        cache = self._cache
        for i, text in enumerate(texts):
            row = out[i]
            for tok in _TOKEN.findall(text.lower()):
                b = cache.get(tok)
                if b is None:
                    b = cache[tok] = _bucket(tok, self.dim)
                row[b[0]] += b[1]
        return out
