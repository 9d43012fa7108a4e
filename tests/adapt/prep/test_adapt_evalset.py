"""Held-out questions as an evaluation Dataset, and its BEIR folder."""

from __future__ import annotations

import pytest

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.evalset import heldout_dataset
from adaptlab.adapt.prep.questions import SyntheticQuestion
from adaptlab.data.beir import load_beir, write_beir
from adaptlab.errors import ConfigError

A = "Alpha one is here. Alpha two is here. Alpha three is here."
CHUNKS = [
    Chunk("a#c0", "a", 0, A, 0, len(A), 20),
    Chunk("a#c1", "a", 1, "Alpha four is here.", 60, 79, 7),
    Chunk("b#c0", "b", 0, "Beta one is here.", 0, 17, 7),
]
ICT = [
    SyntheticQuestion("a#c0#q0", "Alpha one is here.", "a#c0", "a", "ict", removed=(0, 18)),
    SyntheticQuestion("a#c0#q1", "Alpha three is here.", "a#c0", "a", "ict", removed=(38, 58)),
]


def test_documents_corpus_and_qrels():
    ds = heldout_dataset(ICT, CHUNKS, name="t")
    assert sorted(ds.corpus) == ["a#c0", "a#c1"]  # every chunk of document a, not b
    assert ds.qrels == {"a#c0#q0": {"a#c0": 1}, "a#c0#q1": {"a#c0": 1}}
    assert ds.queries["a#c0#q1"] == "Alpha three is here."
    # both query sentences are cut from the positive, so no query finds its own copy
    assert ds.corpus["a#c0"].text == "Alpha two is here."
    assert ds.meta["corpus"] == "documents" and ds.meta["generators"] == ["ict"]
    assert ds.judged_queries() == ["a#c0#q0", "a#c0#q1"]
    wider = heldout_dataset(ICT, CHUNKS, documents=["a", "b"])
    assert sorted(wider.corpus) == ["a#c0", "a#c1", "b#c0"]


def test_all_corpus_and_llm_questions():
    q = SyntheticQuestion("b#c0#q0", "What is beta?", "b#c0", "b", "llm:m")
    ds = heldout_dataset([q], CHUNKS, corpus="all")
    assert sorted(ds.corpus) == ["a#c0", "a#c1", "b#c0"]
    assert ds.corpus["a#c0"].text == A and ds.corpus["b#c0"].text == "Beta one is here."


def test_errors():
    with pytest.raises(ConfigError, match="corpus="):
        heldout_dataset(ICT, CHUNKS, corpus="scale")
    with pytest.raises(ConfigError, match="no questions"):
        heldout_dataset([], CHUNKS)
    lost = SyntheticQuestion("z#q0", "Q?", "z#c0", "z", "t")
    with pytest.raises(ConfigError, match="not among the chunks"):
        heldout_dataset([lost], CHUNKS)


def test_beir_round_trip(tmp_path):
    ds = heldout_dataset(ICT, CHUNKS, name="heldout")
    write_beir(ds, tmp_path / "heldout")
    back = load_beir(tmp_path / "heldout", "test", name="heldout")
    assert back.fingerprint() == ds.fingerprint()
