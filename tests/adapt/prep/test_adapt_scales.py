"""Nested data scales and per-document chunk sampling."""

from __future__ import annotations

import pytest

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.scales import build_scales, document_order, sample_chunks, sample_size
from adaptlab.errors import ConfigError


def _chunks(n_docs: int = 30) -> list[Chunk]:
    """Document k has 1 + (k % 12) chunks."""
    out = []
    for k in range(n_docs):
        for i in range(1 + k % 12):
            out.append(Chunk(f"doc{k:02d}#c{i}", f"doc{k:02d}", i, f"text {k} {i}", 0, 1, 3))
    return out


@pytest.mark.parametrize(
    ("m", "fraction", "k"),
    [
        (1, 0.3, 1),
        (2, 0.3, 1),
        (3, 0.3, 1),
        (5, 0.3, 2),
        (10, 0.3, 3),
        (11, 0.3, 3),
        (12, 0.3, 4),
        (4, 1.0, 4),
        (7, 0.01, 1),
    ],
)
def test_sample_size(m, fraction, k):
    assert sample_size(m, fraction) == k


def test_scales_are_nested_and_every_document_contributes():
    chunks = _chunks(30)
    scales = build_scales(chunks, (3, 10, "all"), fraction=0.3, seed=7)
    assert [s.n_documents for s in scales] == [3, 10, 30]
    assert [s.name for s in scales] == ["docs3", "docs10", "docs30"]
    for small, big in zip(scales, scales[1:]):
        assert big.doc_ids[: small.n_documents] == small.doc_ids
        assert set(small.chunk_ids) <= set(big.chunk_ids)
    by_doc = {}
    for cid in scales[-1].chunk_ids:
        by_doc.setdefault(cid.split("#")[0], []).append(cid)
    assert set(by_doc) == {f"doc{k:02d}" for k in range(30)}  # at least one chunk each
    for doc, cids in by_doc.items():
        m = 1 + int(doc[3:]) % 12
        assert len(cids) == sample_size(m, 0.3)
        assert len(set(cids)) == len(cids)
        assert cids == sorted(cids, key=lambda c: int(c.split("#c")[1]))  # chunk order


def test_scales_are_deterministic_and_depend_on_seed():
    chunks = _chunks(30)
    assert build_scales(chunks, (5, 20), seed=1) == build_scales(chunks, (5, 20), seed=1)
    one, two = build_scales(chunks, (5, 20), seed=1), build_scales(chunks, (5, 20), seed=2)
    assert one[0].doc_ids != two[0].doc_ids
    assert document_order(["b", "a", "c", "a"], 3) == document_order(["c", "b", "a"], 3)


def test_document_sample_does_not_depend_on_other_documents():
    chunks = _chunks(30)
    doc = [c for c in chunks if c.doc_id == "doc11"]
    picked = sample_chunks(doc, 0.3, seed=5)
    scales = build_scales(chunks, ("all",), seed=5)
    assert [c.id for c in picked] == [c for c in scales[0].chunk_ids if c.startswith("doc11#")]
    fewer = build_scales([c for c in chunks if c.doc_id in {"doc11", "doc03"}], ("all",), seed=5)
    assert [c for c in fewer[0].chunk_ids if c.startswith("doc11#")] == [c.id for c in picked]


def test_excluded_documents_and_scale_helpers():
    chunks = _chunks(10)
    scales = build_scales(chunks, ("all",), exclude_documents={"doc00", "doc01"}, fraction=1.0)
    assert scales[0].n_documents == 8 and "doc00" not in scales[0].doc_ids
    assert len(scales[0].chunks(chunks)) == len(scales[0].all_chunks(chunks))  # fraction 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sizes": (5, 50)}, "only 10 documents"),
        ({"sizes": (5, 5)}, "strictly increasing"),
        ({"sizes": (0,)}, "positive count of documents"),
        ({"sizes": ()}, "at least one scale"),
        ({"fraction": 0.0}, "fraction"),
        ({"seed": -1}, "seed"),
    ],
)
def test_scale_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        build_scales(_chunks(10), **kwargs)
