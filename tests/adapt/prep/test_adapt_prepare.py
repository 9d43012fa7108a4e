"""The adaptation-data stage end to end on the synthetic domain (real tokenizer, fake embedder)."""

from __future__ import annotations

import json

import pytest

from adaptlab.adapt.prep.prepare import PrepSettings, prepare_adaptation_data
from adaptlab.adapt.prep.questions import InverseClozeGenerator
from adaptlab.adapt.prep.templates import SyntheticTemplateGenerator, synthetic_raw_corpus
from adaptlab.adapt.prep.triplets import read_triplets
from adaptlab.data.beir import load_beir
from adaptlab.data.synthetic import synthetic_documents


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_documents(30, seed=4)


def test_prepare_on_the_synthetic_domain(synthetic, minilm_tokenizer, bow_embedder, tmp_path):
    corpus = synthetic_raw_corpus(synthetic)
    gen = SyntheticTemplateGenerator(synthetic, n_per_chunk=2, seed=1)
    data = prepare_adaptation_data(
        corpus,
        minilm_tokenizer,
        gen,
        bow_embedder,
        PrepSettings(
            sizes=(4, 12, "all"),
            fraction=0.5,
            seed=2,
            test_fraction=0.2,
            validation_fraction=0.25,
            max_tokens=48,
            n_negatives=3,
        ),
        out_dir=tmp_path,
        base_model="bow",
    )
    test_docs = set(data.test_documents)
    assert len(test_docs) == 6
    scales = [s.scale for s in data.scales]
    assert [s.n_documents for s in scales] == [4, 12, 24]
    for small, big in zip(scales, scales[1:]):
        assert set(small.doc_ids) <= set(big.doc_ids) and set(small.chunk_ids) <= set(big.chunk_ids)
    for s in data.scales:
        assert not test_docs & set(s.scale.doc_ids)
        train_docs = set(s.splits.train)
        for t in s.triplets["train"]:
            assert t.doc_id in train_docs
            assert all(n.split("#")[0] in train_docs for n in t.negative_ids)  # no leak
            assert t.positive_id not in t.negative_ids and 1 <= len(t.negative_ids) <= 3
        full = sum(len(t.negative_ids) == 3 for t in s.triplets["train"])
        assert full > 0.8 * len(s.triplets["train"])
        for t in s.triplets.get("validation", []):
            assert t.doc_id in set(s.splits.validation)
            assert all(n.split("#")[0] in set(s.scale.doc_ids) for n in t.negative_ids)
    # the held-out set: questions from test documents only, corpus = their chunks
    heldout = data.heldout
    assert heldout.n_queries == len(data.test_questions) > 0
    assert {cid.split("#")[0] for cid in heldout.corpus} == test_docs
    assert all(next(iter(j)).split("#")[0] in test_docs for j in heldout.qrels.values())
    # files
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["scales"]["docs24"]["documents"] == 24
    triplets, prov = read_triplets(tmp_path / "docs12" / "train.parquet")
    assert triplets == data.scales[1].triplets["train"]
    assert (prov.base_model, prov.scale, prov.seed, prov.generator) == ("bow", "docs12", 2, "template:synthetic")
    assert prov.extra["n_negatives"] == 3
    assert prov.extra["heldout_fingerprint"] == heldout.fingerprint()
    assert load_beir(tmp_path / "heldout").fingerprint() == heldout.fingerprint()
    assert (tmp_path / "chunks.parquet").is_file()
    # embeddings are memoised across scales: each distinct text is embedded once per kind
    n_texts = bow_embedder.texts
    n_questions = sum(len(v) for s in data.scales for v in s.questions.values())
    assert n_texts <= len(data.chunks) + n_questions
    rerun = prepare_adaptation_data(
        corpus,
        minilm_tokenizer,
        gen,
        bow_embedder,
        PrepSettings(
            sizes=(4, 12, "all"),
            fraction=0.5,
            seed=2,
            test_fraction=0.2,
            validation_fraction=0.25,
            max_tokens=48,
            n_negatives=3,
        ),
    )
    assert bow_embedder.texts - n_texts == n_texts  # same work again, no more
    assert rerun.summary()["heldout_fingerprint"] == summary["heldout_fingerprint"]
    assert rerun.scales[2].triplets == data.scales[2].triplets


def test_prepare_with_inverse_cloze(synthetic, minilm_tokenizer, bow_embedder):
    data = prepare_adaptation_data(
        synthetic_raw_corpus(synthetic),
        minilm_tokenizer,
        InverseClozeGenerator(seed=0),
        bow_embedder,
        PrepSettings(sizes=(10,), fraction=0.3, seed=0, max_tokens=64, n_negatives=2),
    )
    triplets = data.scales[0].triplets["train"]
    assert triplets and all(t.query not in t.positive for t in triplets)
    assert all(q.text not in data.heldout.corpus[q.chunk_id].text for q in data.test_questions)
