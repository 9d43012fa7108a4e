"""Chunking with the real all-MiniLM-L6-v2 tokenizer: token limit, whole sentences, stable ids."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from adaptlab.adapt.prep.chunking import (
    Chunk,
    chunk_document,
    chunk_documents,
    chunks_by_document,
    read_chunks,
    write_chunks,
)
from adaptlab.data.dataset import Document
from adaptlab.data.text import split_sentences
from adaptlab.errors import ConfigError, DataError

TOPICS = [
    "wetland permits",
    "noise from pile driving",
    "caribou migration",
    "groundwater wells",
    "cultural resources",
    "air quality monitoring",
    "traffic on the haul road",
]


def _doc(n_sentences: int, doc_id: str = "d1") -> Document:
    sentences = [
        f"Section {i} of the statement discusses {TOPICS[i % len(TOPICS)]} near site {i}." for i in range(n_sentences)
    ]
    return Document(doc_id, " ".join(sentences))


def _n_tokens(tok, text: str) -> int:
    return len(tok(text)["input_ids"])


def test_chunks_respect_limit_and_keep_sentences_whole(minilm_tokenizer):
    doc = _doc(120)
    chunks = chunk_document(doc, minilm_tokenizer, max_tokens=64)
    assert len(chunks) > 5
    starts = {s for s, _ in split_sentences(doc.text)}
    ends = {e for _, e in split_sentences(doc.text)}
    for i, c in enumerate(chunks):
        assert c.id == f"d1#c{i}" and c.index == i and c.doc_id == "d1"
        assert c.text == doc.text[c.start : c.end]
        assert c.start in starts and c.end in ends  # boundaries are sentence boundaries
        assert c.n_tokens == _n_tokens(minilm_tokenizer, c.text) <= 64
        assert not c.split_sentence
    # greedy: adding the next sentence would have broken the limit
    for a, b in zip(chunks, chunks[1:]):
        first_next = next((s, e) for s, e in split_sentences(doc.text) if s == b.start)
        assert _n_tokens(minilm_tokenizer, doc.text[a.start : first_next[1]]) > 64
    # every sentence is in exactly one chunk, in order
    joined = " ".join(c.text for c in chunks)
    assert joined == doc.text


def test_default_limit_is_256_tokens_with_special_tokens(minilm_tokenizer):
    chunks = chunk_document(_doc(200), minilm_tokenizer)
    assert max(c.n_tokens for c in chunks) <= 256
    assert max(c.n_tokens for c in chunks) > 200  # chunks are packed, not one per sentence
    without = chunk_document(_doc(200), minilm_tokenizer, count_special_tokens=False)
    assert all(len(minilm_tokenizer(c.text, add_special_tokens=False)["input_ids"]) <= 256 for c in without)


def test_overlong_sentence_is_split_by_tokens_and_flagged(minilm_tokenizer, caplog):
    long_sentence = "The " + " and ".join(f"parcel {i}" for i in range(60)) + " were surveyed."
    doc = Document("d2", f"A short opening sentence. {long_sentence} A closing sentence.")
    with caplog.at_level(logging.WARNING, logger="adaptlab.adapt.prep.chunking"):
        chunks = chunk_document(doc, minilm_tokenizer, max_tokens=32)
    flagged = [c for c in chunks if c.split_sentence]
    assert len(flagged) >= 3
    assert chunks[0].text == "A short opening sentence." and not chunks[0].split_sentence
    assert chunks[-1].text == "A closing sentence." and not chunks[-1].split_sentence
    assert all(_n_tokens(minilm_tokenizer, c.text) <= 32 for c in chunks)
    assert all(c.text == doc.text[c.start : c.end] for c in chunks)
    # the windows cover the long sentence, in order, without overlap
    assert flagged[0].start == doc.text.index("The ")
    assert flagged[-1].end == doc.text.index("surveyed.") + len("surveyed.")
    assert all(a.end <= b.start for a, b in zip(flagged, flagged[1:]))
    assert "exceed the chunk limit" in caplog.text and "'d2'" in caplog.text


def test_chunk_documents_is_stable_and_skips_empty(minilm_tokenizer, caplog):
    docs = [_doc(30, "a"), Document("empty", "   "), _doc(5, "b")]
    first = chunk_documents(docs, minilm_tokenizer, max_tokens=64)
    again = chunk_documents(docs, minilm_tokenizer, max_tokens=64)
    assert first == again
    grouped = chunks_by_document(first)
    assert list(grouped) == ["a", "b"]
    assert "have no sentences and yield no chunk: 'empty'" in caplog.text


def test_limit_validation(minilm_tokenizer):
    with pytest.raises(ConfigError, match="max_tokens"):
        chunk_document(_doc(2), minilm_tokenizer, max_tokens=4)
    with pytest.raises(ConfigError, match="tokenizer"):
        chunk_document(_doc(2), object())


def test_chunks_parquet_round_trip(tmp_path):
    chunks = [Chunk("d#c0", "d", 0, "One. Two.", 0, 9, 6), Chunk("d#c1", "d", 1, "Three", 10, 15, 3, True)]
    path = write_chunks(tmp_path / "c.parquet", chunks, {"max_tokens": "256"})
    assert read_chunks(path) == chunks
    with pytest.raises(DataError, match="cannot read"):
        read_chunks(tmp_path / "missing.parquet")


SCIFACT = Path("/work/shared/data/beir_scifact/corpus.jsonl")


@pytest.mark.skipif(not SCIFACT.is_file(), reason="shared SciFact data not present")
def test_real_abstracts_fit_the_limit(minilm_tokenizer):
    from adaptlab.data.documents import load_documents

    docs = load_documents(SCIFACT, clean=False)[:150]
    chunks = chunk_documents(docs, minilm_tokenizer)
    assert {c.doc_id for c in chunks} == {d.id for d in docs}
    assert all(_n_tokens(minilm_tokenizer, c.text) <= 256 for c in chunks)
    texts = {d.id: d.text for d in docs}
    assert all(texts[c.doc_id][c.start : c.end] == c.text for c in chunks)
