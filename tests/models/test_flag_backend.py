"""The FlagEmbedding backend on a tiny random-init BERT (CLS / mean pooling, instructions)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.models import BGE_QUERY_INSTRUCTION, LLM_EMBEDDER_INSTRUCTIONS, load_encoder

pytest.importorskip("FlagEmbedding")

TEXTS = ["what causes anemia?", "Iron deficiency is a common cause of anemia in adults."]


@pytest.fixture(scope="module")
def bge(tiny_bge_dir):
    return load_encoder(str(tiny_bge_dir), backend="flag", device="cpu", query_instruction=BGE_QUERY_INSTRUCTION)


def test_query_instruction_prefix_and_cls_pooling(bge, tiny_bge_reference):
    assert bge.backend == "flag" and bge.dim == 32
    q = bge.encode_queries(TEXTS, batch_size=1)
    d = bge.encode_documents(TEXTS, batch_size=2)
    np.testing.assert_allclose(q, tiny_bge_reference([BGE_QUERY_INSTRUCTION + t for t in TEXTS]), atol=1e-5)
    np.testing.assert_allclose(d, tiny_bge_reference(TEXTS), atol=1e-5)  # no prefix on documents
    assert q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-6)


def test_llm_embedder_task_sets_both_prefixes_and_mean_pooling(tiny_bge_dir, tiny_bge_reference):
    enc = load_encoder(str(tiny_bge_dir), device="cpu", task="qa", pooling="mean")  # auto -> flag (name)
    assert enc.backend == "flag"
    inst = LLM_EMBEDDER_INSTRUCTIONS["qa"]
    np.testing.assert_allclose(
        enc.encode_queries(TEXTS[:1]), tiny_bge_reference([inst["query"] + TEXTS[0]], "mean"), atol=1e-5
    )
    np.testing.assert_allclose(
        enc.encode_documents(TEXTS[1:]), tiny_bge_reference([inst["key"] + TEXTS[1]], "mean"), atol=1e-5
    )
    assert enc.options["document_instruction"] == inst["key"]


def test_revision_is_the_weight_hash_and_local_load_sets_offline(tiny_bge_dir, monkeypatch):
    from adaptlab.models import weights_sha256

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    enc = load_encoder(str(tiny_bge_dir), backend="flag", device="cpu")
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert enc.revision == weights_sha256(tiny_bge_dir)
    prov = enc.provenance()
    assert prov["model_id"] == str(tiny_bge_dir) and prov["revision"] == enc.revision and prov["dim"] == 32


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"task": "summarise"}, "unknown llm-embedder task"),
        ({"pooling": "max"}, "pooling"),
        ({"trust_remote_code": "yes"}, "trust_remote_code"),
        ({"use_fp16": 1}, "use_fp16"),
        ({"normalise": True}, "'normalise'"),
    ],
)
def test_bad_options_name_the_key(tiny_bge_dir, options, match):
    with pytest.raises(ConfigError, match=match):
        load_encoder(str(tiny_bge_dir), backend="flag", device="cpu", **options)
