"""Triplets: building from questions and negatives, Parquet round trip, provenance, fingerprint."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.questions import SyntheticQuestion
from adaptlab.adapt.prep.triplets import (
    Triplet,
    TripletProvenance,
    build_triplets,
    read_triplets,
    triplets_fingerprint,
    write_triplets,
)
from adaptlab.errors import ConfigError, DataError

TEXT = "First sentence here. Second sentence here."
CHUNKS = [
    Chunk("a#c0", "a", 0, TEXT, 0, len(TEXT), 10),
    Chunk("b#c0", "b", 0, "Other chunk text.", 0, 17, 6),
    Chunk("c#c0", "c", 0, "Third chunk text.", 0, 17, 6),
]
QUESTIONS = [
    SyntheticQuestion("a#c0#q0", "First sentence here.", "a#c0", "a", "ict", removed=(0, 20)),
    SyntheticQuestion("b#c0#q0", "What is other?", "b#c0", "b", "ict"),
]
PROV = TripletProvenance(base_model="minilm", scale="docs10", seed=3, generator="ict", extra={"n_negatives": 2})


def _triplets():
    return build_triplets(QUESTIONS, CHUNKS, {"a#c0#q0": ["b#c0", "c#c0"], "b#c0#q0": ["c#c0"]})


def test_build_triplets_uses_positive_text_and_negative_texts():
    t = _triplets()
    assert t[0] == Triplet(
        "a#c0#q0",
        "First sentence here.",
        "a#c0",
        "Second sentence here.",
        ("b#c0", "c#c0"),
        ("Other chunk text.", "Third chunk text."),
        "a",
    )
    assert t[1].positive == "Other chunk text." and t[1].negatives == ("Third chunk text.",)
    with pytest.raises(ConfigError, match="no negatives"):
        build_triplets(QUESTIONS, CHUNKS, {})
    with pytest.raises(ConfigError, match="not among the chunks"):
        build_triplets(QUESTIONS[:1], CHUNKS, {"a#c0#q0": ["zz#c0"]})


def test_parquet_round_trip_with_provenance(tmp_path):
    triplets = _triplets()
    stored = write_triplets(tmp_path / "t" / "train.parquet", triplets, PROV)
    assert stored.fingerprint == triplets_fingerprint(triplets) and len(stored.fingerprint) == 16
    back, prov = read_triplets(tmp_path / "t" / "train.parquet")
    assert back == triplets
    assert prov == stored
    assert (prov.base_model, prov.scale, prov.seed, prov.generator, prov.split) == (
        "minilm",
        "docs10",
        3,
        "ict",
        "train",
    )
    assert prov.extra == {"n_negatives": 2}
    table = pq.read_table(tmp_path / "t" / "train.parquet")
    assert table.column_names == ["query_id", "query", "positive_id", "positive", "negative_ids", "negatives", "doc_id"]


def test_fingerprint_is_order_free_and_content_sensitive(tmp_path):
    t = _triplets()
    assert triplets_fingerprint(t) == triplets_fingerprint(list(reversed(t)))
    changed = [t[0], replace(t[1], query="What else?")]
    assert triplets_fingerprint(changed) != triplets_fingerprint(t)


def test_tampered_or_foreign_files_are_rejected(tmp_path):
    path = tmp_path / "train.parquet"
    write_triplets(path, _triplets(), PROV)
    table = pq.read_table(path)
    edited = table.set_column(1, "query", pa.array(["x", "y"]))
    pq.write_table(edited, path)
    with pytest.raises(DataError, match="fingerprint"):
        read_triplets(path)
    assert len(read_triplets(path, verify=False)[0]) == 2
    pq.write_table(table.replace_schema_metadata({}), path)
    with pytest.raises(DataError, match="no adaptlab provenance"):
        read_triplets(path)
