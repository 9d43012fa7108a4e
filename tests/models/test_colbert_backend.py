"""The ColBERT (late interaction) backend: a tiny random BERT turned into an untrained ColBERT,
token-level encoding, MaxSim, and agreement with RAGatouille's own in-memory search."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("colbert", reason="ColBERT needs colbert-ai (pip install ragatouille==0.0.9)")

from adaptlab.errors import ConfigError  # noqa: E402
from adaptlab.models import load_encoder, pick_backend, resolve_model  # noqa: E402
from adaptlab.models.colbert import TokenVectors, is_colbert_checkpoint, maxsim  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DOCS = [
    "The antenna tilt controls the coverage footprint of the radio cell.",
    "A handover moves an active call from one base station to another.",
    "Spectrum refarming reuses old frequency bands for newer radio access.",
    "Latency is the delay between sending a packet and receiving the reply.",
    "Beamforming steers the radio energy towards the user equipment.",
    "Power control lowers transmit power when the signal is strong enough.",
    "Paging wakes idle devices when data arrives for them.",
    "Carrier aggregation combines several bands into one wider channel.",
]
QUERIES = ["What does antenna tilt control?", "How are idle devices woken up?", "combine bands"]


@pytest.fixture(scope="module")
def tiny_bert(tiny_model):
    return tiny_model.parent / (tiny_model.name + "-hf")  # the session's plain BERT (tests/conftest.py)


@pytest.fixture(scope="module")
def tiny_colbert(tiny_bert, tmp_path_factory):
    init = tmp_path_factory.mktemp("colbert-init")
    with pytest.warns(UserWarning, match="UNTRAINED"):
        return load_encoder(
            str(tiny_bert), backend="colbert", from_bert=True, init_dir=str(init), doc_maxlen=48, dim=16, device="cpu"
        )


def test_plain_bert_is_refused_without_from_bert(tiny_bert):
    with pytest.raises(ConfigError, match="from_bert"):
        load_encoder(str(tiny_bert), backend="colbert")


def test_untrained_colbert_is_recorded_and_detected(tiny_colbert):
    assert tiny_colbert.interaction == "late" and tiny_colbert.backend == "colbert"
    assert tiny_colbert.options["untrained_projection"] is True
    assert tiny_colbert.dim == 16 and tiny_colbert.doc_maxlen == 48
    assert is_colbert_checkpoint(tiny_colbert.path)
    assert pick_backend(resolve_model(str(tiny_colbert.path))) == "colbert"
    assert tiny_colbert.provenance()["interaction"] == "late"


def test_token_vectors(tiny_colbert):
    q = tiny_colbert.encode_query_tokens(QUERIES)
    d = tiny_colbert.encode_document_tokens(DOCS)
    assert len(q) == 3 and set(q.lengths.tolist()) == {tiny_colbert.query_maxlen}
    assert len(d) == len(DOCS) and (d.lengths > 3).all() and (d.lengths <= 48).all()
    np.testing.assert_allclose(np.linalg.norm(d.vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(q.vectors, axis=1), 1.0, atol=1e-5)
    with pytest.raises(NotImplementedError, match="MaxSim"):
        tiny_colbert.encode_documents(DOCS)


def test_maxsim_by_hand():
    docs = TokenVectors.from_list([np.array([[1.0, 0], [0, 1.0]]), np.array([[0.6, 0.8]]), np.zeros((0, 2))], 2)
    q = np.array([[1.0, 0], [0.6, 0.8]], np.float32)
    # doc 0: max(1, 0) + max(0.6, 0.8) = 1.8; doc 1: 0.6 + 1.0 = 1.6; empty doc: -inf
    np.testing.assert_allclose(maxsim(q, docs), [1.8, 1.6, -np.inf], rtol=1e-6)


def test_maxsim_ranking_equals_ragatouille(tiny_colbert):
    """Acceptance: exact MaxSim search ranks the documents as RAGatouille's search_encoded_docs does."""
    from ragatouille import RAGPretrainedModel

    from adaptlab.retrieval.late import late_search, maxsim_scores

    scores = maxsim_scores(tiny_colbert.encode_query_tokens(QUERIES), tiny_colbert.encode_document_tokens(DOCS))
    top_s, top_i = late_search(scores, len(DOCS), doc_ids=[f"d{i}" for i in range(len(DOCS))])
    rag = RAGPretrainedModel.from_pretrained(str(tiny_colbert.path), verbose=0)
    rag.encode(DOCS, max_document_length=tiny_colbert.doc_maxlen, verbose=False)
    results = rag.search_encoded_docs(QUERIES, k=len(DOCS))
    for i, hits in enumerate(results):
        assert [h["result_index"] for h in hits] == top_i[i].tolist()
        np.testing.assert_allclose(top_s[i], [h["score"] for h in hits], rtol=1e-5, atol=1e-5)
