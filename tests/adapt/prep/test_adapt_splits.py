"""Train / validation / test splits by document."""

from __future__ import annotations

import pytest

from adaptlab.adapt.prep.questions import SyntheticQuestion
from adaptlab.adapt.prep.splits import split_by_document, split_documents
from adaptlab.errors import ConfigError


def _questions(n_docs: int = 20, per_doc: int = 4) -> list[SyntheticQuestion]:
    return [
        SyntheticQuestion(f"doc{d:02d}#c{j}#q0", f"question {d} {j}", f"doc{d:02d}#c{j}", f"doc{d:02d}", "t")
        for d in range(n_docs)
        for j in range(per_doc)
    ]


def test_splits_are_disjoint_by_document_and_cover_everything():
    qs = _questions()
    parts, splits = split_by_document(qs, (0.7, 0.15, 0.15), seed=3)
    assert (len(splits.train), len(splits.validation), len(splits.test)) == (14, 3, 3)
    docs = {name: {q.doc_id for q in parts[name]} for name in parts}
    assert not docs["train"] & docs["test"] and not docs["train"] & docs["validation"]
    assert not docs["validation"] & docs["test"]
    assert sum(len(v) for v in parts.values()) == len(qs)
    assert {q.id for v in parts.values() for q in v} == {q.id for q in qs}
    assert splits.split_of("doc00") in ("train", "validation", "test")
    assert splits.split_of("nope") is None


def test_splits_are_seeded():
    ids = [f"d{i}" for i in range(30)]
    assert split_documents(ids, seed=1) == split_documents(list(reversed(ids)), seed=1)
    assert split_documents(ids, seed=1).test != split_documents(ids, seed=2).test


def test_small_document_counts():
    s = split_documents(["a", "b", "c"], (0.8, 0.1, 0.1))
    assert (len(s.train), len(s.validation), len(s.test)) == (1, 1, 1)
    s = split_documents(["a", "b"], (0.8, 0.1, 0.1))
    assert len(s.train) == 1 and len(s.test) == 1 and s.validation == ()
    s = split_documents(["a"], {"train": 0.9, "test": 0.1})
    assert s.train == ("a",)
    s = split_documents([f"d{i}" for i in range(10)], {"train": 0.9, "validation": 0.1})
    assert (len(s.train), len(s.validation), len(s.test)) == (9, 1, 0)


@pytest.mark.parametrize("fractions", [(0.5, 0.5, 0.5), (0.0, 0.5, 0.5), (0.9, 0.1), {"train": 0.9, "dev": 0.1}])
def test_bad_fractions(fractions):
    with pytest.raises(ConfigError, match="fractions"):
        split_documents(["a", "b"], fractions)
