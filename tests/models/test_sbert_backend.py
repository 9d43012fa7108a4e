"""The sentence-transformers backend with the real all-MiniLM-L6-v2 weights."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.models import load_encoder, weights_sha256

TEXTS = ["A cell is the basic unit of life.", "Cars drive on roads.", "What is a cell?"]


def test_minilm_matches_sentence_transformers(minilm, minilm_path):
    from sentence_transformers import SentenceTransformer

    ref = SentenceTransformer(str(minilm_path), device="cpu").encode(TEXTS, normalize_embeddings=True)
    out = minilm.encode_documents(TEXTS, batch_size=2)
    assert out.shape == (3, 384) and out.dtype == np.float32 and minilm.dim == 384
    np.testing.assert_allclose(out, ref, atol=1e-5)
    np.testing.assert_allclose(minilm.encode_queries(TEXTS), out, atol=1e-5)  # no prompts in this model


def test_minilm_ranks_the_relevant_sentence_first(minilm):
    s = minilm.score(["What is a cell?"], TEXTS[:2])
    assert s[0, 0] > s[0, 1] + 0.3


def test_minilm_provenance(minilm, minilm_path):
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.revision == weights_sha256(minilm_path)
    assert minilm.provenance()["backend"] == "sentence-transformers"


def test_query_instruction_is_prepended_to_queries_only(minilm_path):
    enc = load_encoder("minilm", device="cpu", query_instruction="query: ", max_seq_length=128)
    assert enc.model.max_seq_length == 128
    np.testing.assert_allclose(enc.encode_queries(TEXTS[:1]), enc.encode_documents(["query: " + TEXTS[0]]), atol=1e-5)
    assert not np.allclose(enc.encode_queries(TEXTS[:1]), enc.encode_documents(TEXTS[:1]), atol=1e-3)


def test_trust_remote_code_is_off_unless_explicitly_true():
    from adaptlab.models.sbert import trust_remote_code

    assert trust_remote_code({}, "st") is False
    assert trust_remote_code({"trust_remote_code": True}, "st") is True
    with pytest.raises(ConfigError, match="true or false"):
        trust_remote_code({"trust_remote_code": "true"}, "st")


def test_broken_local_model_is_a_config_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"tried local directory .*"):
        load_encoder(str(tmp_path), backend="sentence-transformers", device="cpu")
