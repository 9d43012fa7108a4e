"""Hard-negative mining with a tiny deterministic embedder given as a lookup table."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.negatives import as_embed_fn, memoize_embed, mine_hard_negatives
from adaptlab.adapt.prep.questions import SyntheticQuestion
from adaptlab.errors import ConfigError


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _chunk(cid: str) -> Chunk:
    return Chunk(cid, cid.split("#")[0], int(cid.split("#c")[1]), f"text of {cid}", 0, 1, 3)


# 2-d embeddings: query q at angle 0; the positive p at 0.2 rad; candidates by angle.
ANGLES = {
    "a#c0": 0.2,  # the positive chunk itself
    "b#c0": 0.21,  # near-duplicate of the positive (cos with p > 0.95) and scores higher
    "c#c0": -0.35,  # s = 0.939 > s+ - 0.05 = 0.930: inside the margin, a likely false negative
    "d#c0": 0.6,  # s = 0.825: a hard negative
    "e#c0": 0.7,  # s = 0.765
    "f#c0": 0.9,  # s = 0.622
    "g#c0": 1.4,  # s = 0.170
    "h#c0": 0.6,  # ties with d#c0: chunk id descending puts h first
}


class TableEmbedder:
    def __init__(self):
        self.calls = []

    def __call__(self, texts, kind):
        self.calls.append((kind, len(texts)))
        out = []
        for t in texts:
            if t.startswith("QUERY"):
                out.append(_unit([1.0, 0.0]))
            else:
                cid = t.removeprefix("text of ")
                a = ANGLES[cid]
                out.append(_unit([np.cos(a), np.sin(a)]))
        return np.stack(out)


QUESTION = SyntheticQuestion("a#c0#q0", "QUERY about a", "a#c0", "a", "test")
CHUNKS = [_chunk(c) for c in ANGLES]


def test_excludes_positive_near_duplicates_and_margin():
    res = mine_hard_negatives([QUESTION], CHUNKS, TableEmbedder(), n=3)
    assert res.ids["a#c0#q0"] == ["h#c0", "d#c0", "e#c0"]
    assert res.scores["a#c0#q0"] == pytest.approx([np.cos(0.6), np.cos(0.6), np.cos(0.7)], abs=1e-6)
    assert res.positive_scores["a#c0#q0"] == pytest.approx(np.cos(0.2), abs=1e-6)
    assert res.dropped_duplicate == 1 and res.dropped_margin == 1 and res.short == []


def test_rules_can_be_switched_off_and_skip_top():
    res = mine_hard_negatives([QUESTION], CHUNKS, TableEmbedder(), n=3, duplicate_threshold=None, margin=None)
    assert res.ids["a#c0#q0"] == ["b#c0", "c#c0", "h#c0"]  # only the positive itself is excluded
    res = mine_hard_negatives([QUESTION], CHUNKS, TableEmbedder(), n=2, skip_top=2)
    assert res.ids["a#c0#q0"] == ["e#c0", "f#c0"]


def test_small_pool_gives_short_lists_and_pool_restricts_candidates():
    pool = [c for c in CHUNKS if c.id in {"a#c0", "b#c0", "f#c0", "g#c0"}]
    res = mine_hard_negatives([QUESTION], CHUNKS, TableEmbedder(), pool=pool, n=10)
    assert res.ids["a#c0#q0"] == ["f#c0", "g#c0"] and res.short == ["a#c0#q0"]


def test_many_queries_match_a_brute_force_reference(bow_embedder):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    chunks = [
        Chunk(f"d{i // 5}#c{i % 5}", f"d{i // 5}", i % 5, " ".join(rng.choice(words, size=8)), 0, 1, 8)
        for i in range(300)
    ]
    qs = [SyntheticQuestion(f"{c.id}#q0", " ".join(c.text.split()[:3]), c.id, c.doc_id, "t") for c in chunks[::7]]
    res = mine_hard_negatives(qs, chunks, bow_embedder, n=5, margin=0.05, duplicate_threshold=0.9)
    emb = {c.id: bow_embedder([c.text], "document")[0] for c in chunks}
    for q in qs:
        qv = bow_embedder([q.text], "query")[0]
        pv = emb[q.chunk_id]
        ps = float(qv @ pv)
        ranked = sorted(((float(qv @ emb[c.id]), c.id) for c in chunks), key=lambda t: -t[0])
        expect = [cid for s, cid in ranked if cid != q.chunk_id and float(emb[cid] @ pv) <= 0.9 and s <= ps - 0.05][:5]
        got = res.ids[q.id]
        assert len(got) == 5 and q.chunk_id not in got
        assert all(float(emb[c] @ pv) <= 0.9 + 1e-6 for c in got)
        assert all(float(qv @ emb[c]) <= ps - 0.05 + 1e-6 for c in got)
        # the same scores as the brute-force ranking (ids may differ among exact ties)
        assert res.scores[q.id] == pytest.approx([float(qv @ emb[c]) for c in expect], abs=1e-5)
        assert res.scores[q.id] == sorted(res.scores[q.id], reverse=True)


def test_embedder_adapters():
    class Encoder:
        def encode_queries(self, texts):
            return np.ones((len(texts), 2)) * 2

        def encode_documents(self, texts):
            return np.tile([[3.0, 0.0]], (len(texts), 1))

    fn = as_embed_fn(Encoder())
    assert fn(["a"], "query").shape == (1, 2) and fn(["a", "b"], "document")[1, 0] == 3.0
    with pytest.raises(ConfigError, match="expected an embed"):
        as_embed_fn(42)
    inner = TableEmbedder()
    memo = memoize_embed(inner)
    memo(["text of d#c0", "text of e#c0"], "document")
    out = memo(["text of e#c0", "text of d#c0"], "document")
    assert inner.calls == [("document", 2)] and out.shape == (2, 2)


def test_errors():
    with pytest.raises(ConfigError, match="n=0"):
        mine_hard_negatives([QUESTION], CHUNKS, TableEmbedder(), n=0)
    lost = SyntheticQuestion("z#q0", "QUERY", "z#c9", "z", "t")
    with pytest.raises(ConfigError, match="not among the chunks"):
        mine_hard_negatives([lost], CHUNKS, TableEmbedder())
    with pytest.raises(ConfigError, match="pool is empty"):
        mine_hard_negatives([QUESTION], CHUNKS, TableEmbedder(), pool=[])


def test_deep_search_when_the_top_candidates_are_all_filtered():
    # 60 candidates crowd around the positive (all dropped); the negatives lie far below
    angles = {f"n{i:02d}#c0": 0.15 + 0.001 * i for i in range(60)}
    angles |= {"a#c0": 0.2, "x#c0": 1.0, "y#c0": 1.1, "z#c0": 1.2, "w#c0": 1.3}

    class Emb:
        def __call__(self, texts, kind):
            return np.stack(
                [
                    _unit([1.0, 0.0])
                    if t.startswith("QUERY")
                    else _unit([np.cos(angles[t[8:]]), np.sin(angles[t[8:]])])
                    for t in texts
                ]
            )

    chunks = [_chunk(c) for c in angles]
    res = mine_hard_negatives([QUESTION], chunks, Emb(), n=3)
    assert res.ids["a#c0#q0"] == ["x#c0", "y#c0", "z#c0"]
    assert res.dropped_duplicate + res.dropped_margin == 60


def test_model_reference_string_loads_an_encoder():
    # "hash:64" is adaptlab's model-free hashing encoder: exercises load_encoder + the adapter
    chunks = [Chunk(f"d{i}#c0", f"d{i}", 0, f"wetland permit river number {i}", 0, 1, 5) for i in range(20)]
    q = SyntheticQuestion("d0#c0#q0", "wetland permit river", "d0#c0", "d0", "t")
    res = mine_hard_negatives([q], chunks, "hash:64", n=3, margin=None)
    assert len(res.ids[q.id]) == 3 and "d0#c0" not in res.ids[q.id]
    assert res.scores[q.id] == sorted(res.scores[q.id], reverse=True)


def test_ties_across_the_partition_cut_follow_the_id_rule():
    # 80 candidates with the same score: the negatives are the largest ids, whatever the
    # partition kept
    angles = {f"t{i:02d}#c0": 0.8 for i in range(80)} | {"a#c0": 0.2}

    class Emb:
        def __call__(self, texts, kind):
            return np.stack(
                [
                    _unit([1.0, 0.0])
                    if t.startswith("QUERY")
                    else _unit([np.cos(angles[t[8:]]), np.sin(angles[t[8:]])])
                    for t in texts
                ]
            )

    res = mine_hard_negatives([QUESTION], [_chunk(c) for c in angles], Emb(), n=3)
    assert res.ids["a#c0#q0"] == ["t79#c0", "t78#c0", "t77#c0"]


def test_numpy_search_matches_faiss(bow_embedder, monkeypatch):
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(30)]
    chunks = [
        Chunk(f"d{i // 4}#c{i % 4}", f"d{i // 4}", i % 4, " ".join(rng.choice(words, size=6)), 0, 1, 6)
        for i in range(200)
    ]
    qs = [SyntheticQuestion(f"{c.id}#q0", " ".join(c.text.split()[:3]), c.id, c.doc_id, "t") for c in chunks[::5]]
    first = mine_hard_negatives(qs, chunks, bow_embedder, n=4)
    monkeypatch.setitem(sys.modules, "faiss", None)  # now `import faiss` raises ImportError
    second = mine_hard_negatives(qs, chunks, bow_embedder, n=4)
    assert second.ids == first.ids
    for qid in first.scores:
        assert second.scores[qid] == pytest.approx(first.scores[qid], abs=1e-5)
