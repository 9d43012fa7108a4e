"""Offline question generators (inverse cloze, synthetic-domain templates) and reply parsing."""

from __future__ import annotations

import pytest

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.questions import (
    InverseClozeGenerator,
    cut_spans,
    parse_questions,
    positive_text,
)
from adaptlab.adapt.prep.templates import SyntheticTemplateGenerator, synthetic_raw_corpus
from adaptlab.data.synthetic import synthetic_documents
from adaptlab.errors import ConfigError

TEXT = (
    "The pipeline crosses three rivers in the north. Each crossing uses a drilled tunnel "
    "under the bed. Fish habitat is monitored for two years after construction."
)
CHUNK = Chunk("doc#c0", "doc", 0, TEXT, 0, len(TEXT), 40)


def test_inverse_cloze_removes_the_query_sentence():
    qs = InverseClozeGenerator(n_per_chunk=1, seed=0).generate([CHUNK])
    assert len(qs) == 1
    q = qs[0]
    assert q.id == "doc#c0#q0" and q.chunk_id == "doc#c0" and q.generator == "ict"
    assert q.text in TEXT and q.text.endswith(".")
    s, e = q.removed
    assert TEXT[s:e] == q.text
    pos = positive_text(q, CHUNK)
    assert q.text not in pos and len(pos.split(". ")) == 2


def test_inverse_cloze_is_deterministic_per_chunk():
    gen = InverseClozeGenerator(n_per_chunk=2, seed=3)
    other = Chunk("x#c0", "x", 0, "Short one here now. Another short sentence here.", 0, 10, 9)
    alone = gen.generate([CHUNK])
    assert gen.generate([other, CHUNK])[2:] == alone  # independent of the other chunks
    assert len({q.text for q in alone}) == 2
    # every seed picks eligible sentences only; too-short chunks yield nothing
    one_sentence = Chunk("y#c0", "y", 0, "Only one sentence is here.", 0, 10, 7)
    assert InverseClozeGenerator().generate([one_sentence]) == []
    with pytest.raises(ConfigError):
        InverseClozeGenerator(n_per_chunk=0)


def test_cut_spans_merges_whitespace():
    assert cut_spans("A b. C d. E f.", [(5, 9)]) == "A b. E f."
    assert cut_spans("A b. C d. E f.", [(0, 4), (10, 14)]) == "C d."


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"questions": ["Q1?", "Q2?"], "answers": ["A1", "A2"]}', [("Q1?", "A1"), ("Q2?", "A2")]),
        ('```json\n{"queries": ["Q1?"], "answers": []}\n```', [("Q1?", "")]),
        ('Here you go: [{"question": "Q1?", "answer": "A"}, {"query": "Q2?"}]', [("Q1?", "A"), ("Q2?", "")]),
        ('["Q1?", "q1?", " "]', [("Q1?", "")]),
        ('{"questions": [], "answers": []}', []),
        ("- What is it?\n* Why?\nQ3: Where?\nnot a question", [("What is it?", ""), ("Why?", ""), ("Where?", "")]),
    ],
)
def test_parse_questions(reply, expected):
    assert parse_questions(reply) == expected


def test_template_generator_on_the_synthetic_domain():
    docs = synthetic_documents(4, seed=1)
    corpus = synthetic_raw_corpus(docs)
    assert [d.id for d in corpus] == [d.id for d in docs]
    facts = docs[0].facts
    text = " ".join(f.sentence for f in facts[:3])
    chunk = Chunk(f"{docs[0].id}#c0", docs[0].id, 0, text, 0, len(text), 50)
    gen = SyntheticTemplateGenerator(docs, n_per_chunk=2, seed=0, jargon_rate=0.5)
    qs = gen.generate([chunk])
    assert len(qs) == 2 and all(q.generator == "template:synthetic" for q in qs)
    asked = {f.id: f for f in facts[:3]}
    for q in qs:
        assert any(q.text in f.questions and q.answer == f.value for f in asked.values())
        assert q.removed is None and positive_text(q, chunk) == text
    assert gen.generate([chunk]) == qs
