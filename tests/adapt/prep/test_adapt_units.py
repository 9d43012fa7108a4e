"""Page provenance of chunks, scales and splits by documents / pages / chunks, and one warning
for many over-long sentences."""

from __future__ import annotations

import logging

import pytest

from adaptlab.adapt.prep.chunking import chunk_documents, read_chunks, write_chunks
from adaptlab.adapt.prep.prepare import PrepSettings, prepare_adaptation_data
from adaptlab.adapt.prep.questions import InverseClozeGenerator
from adaptlab.data.dataset import Document
from adaptlab.data.documents import PagedDocument, clean_pages
from adaptlab.data.pdf import parse_page_ref
from adaptlab.errors import ConfigError

TOPICS = ["wetland", "groundwater", "noise", "traffic", "habitat", "emissions", "cultural", "soil"]


def _paged(doc_id: str, n_pages: int, k: int = 0) -> PagedDocument:
    pages = [
        "\n".join(
            f"Section {p}.{s} of this statement covers the {TOPICS[(p + s + k) % len(TOPICS)]} "
            f"survey number {k * 1000 + p * 10 + s} carried out at site {doc_id}{p} last spring."
            for s in range(8)
        )
        for p in range(1, n_pages + 1)
    ]
    text, starts = clean_pages("\f".join(pages))
    return PagedDocument(doc_id, text, page_starts=starts)


def test_chunks_carry_pages_in_fields_ids_and_parquet(minilm_tokenizer, tmp_path):
    doc = _paged("eis", 6)
    chunks = chunk_documents([doc], minilm_tokenizer, max_tokens=64)
    assert len(chunks) > 6
    for c in chunks:
        assert 1 <= c.first_page <= c.last_page <= 6
        ref = parse_page_ref(c.id)
        assert ref is not None and (ref.document, ref.first_page, ref.last_page) == ("eis", c.first_page, c.last_page)
        assert doc.page_at(c.start) == c.first_page
    assert {c.first_page for c in chunks} == set(range(1, 7))
    path = write_chunks(tmp_path / "c.parquet", chunks)
    assert read_chunks(path) == chunks
    plain = chunk_documents([Document("t", "One sentence. Two sentence.")], minilm_tokenizer)
    assert plain[0].first_page is None and plain[0].id == "t#c0"


def test_many_overlong_sentences_give_one_warning(minilm_tokenizer, caplog, tmp_path):
    long_sentence = "Table " + " ".join(f"item{i} value" for i in range(40)) + "."
    docs = [Document(f"d{j}", " ".join([long_sentence] * 10)) for j in range(5)]
    details = tmp_path / "overlong.tsv"
    with caplog.at_level(logging.WARNING, logger="adaptlab.adapt.prep.chunking"):
        chunks = chunk_documents(docs, minilm_tokenizer, max_tokens=32, details_path=details)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith("50 over-long sentence(s) in 5 document(s)")
    assert str(details) in warnings[0].getMessage()
    assert len(details.read_text().splitlines()) == 51
    assert any(c.split_sentence for c in chunks)


def _prepare(docs, tok, bow_embedder, unit, sizes, **kw):
    return prepare_adaptation_data(
        docs,
        tok,
        InverseClozeGenerator(1, seed=0),
        bow_embedder,
        PrepSettings(
            sizes=sizes,
            fraction=0.5,
            seed=0,
            test_fraction=0.25,
            validation_fraction=0.0,
            max_tokens=64,
            n_negatives=2,
            duplicate_threshold=None,
            margin=None,
            unit=unit,
            **kw,
        ),
        base_model="bow",
    )


@pytest.mark.parametrize("unit", ["pages", "chunks"])
def test_two_long_documents_scale_by_unit_and_never_share_a_unit(minilm_tokenizer, bow_embedder, unit):
    docs = [_paged("a", 8, 0), _paged("b", 8, 1)]
    sizes = (2, 4, 8) if unit == "pages" else (4, 8, 16)
    data = _prepare(docs, minilm_tokenizer, bow_embedder, unit, sizes)
    assert [s.scale.name for s in data.scales] == [f"{unit}{n}" for n in sizes]
    assert data.summary()["unit"] == unit
    test_units = set(data.test_documents)
    if unit == "pages":
        assert all("@p" in u for u in test_units)
    held_chunks = set(data.heldout.corpus)
    for s in data.scales:
        assert s.scale.size == len(s.scale.doc_ids)
        assert not test_units & set(s.scale.doc_ids)
        train_chunks = {c.id for c in s.splits.select(data.chunks, "train")}
        assert train_chunks and not train_chunks & held_chunks
        for q in s.questions["train"]:
            assert q.chunk_id not in held_chunks
        # nested scales
    assert set(data.scales[0].scale.chunk_ids) <= set(data.scales[-1].scale.chunk_ids)
    # both documents contribute to the largest scale
    assert {c.split("#")[0] for c in data.scales[-1].scale.chunk_ids} == {"a", "b"}
    # held-out ids carry pages into the dataset (and thus the per-query records)
    assert all(parse_page_ref(cid) is not None for cid in data.heldout.corpus)


def test_pages_unit_needs_paged_documents(minilm_tokenizer, bow_embedder):
    docs = [Document(f"d{i}", "A sentence here. Another one there.") for i in range(4)]
    with pytest.raises(ConfigError, match='unit = "pages": no document has pages'):
        _prepare(docs, minilm_tokenizer, bow_embedder, "pages", (1,))
    with pytest.raises(ConfigError, match="unit='lines'"):
        _prepare(docs, minilm_tokenizer, bow_embedder, "lines", (1,))


def test_document_scale_error_suggests_units(minilm_tokenizer, bow_embedder):
    docs = [_paged("a", 3, 0), _paged("b", 3, 1)]
    with pytest.raises(ConfigError, match=r'\[adapt\]\.unit = "pages"'):
        _prepare(docs, minilm_tokenizer, bow_embedder, "documents", (2,))
