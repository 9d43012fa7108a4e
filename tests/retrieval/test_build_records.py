"""build_records: gold rank, gold and random similarities, seeds, trec_eval agreement."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError, DataError
from adaptlab.retrieval.build import build_records
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.settings import SearchSettings


def _v(*a: float) -> list[float]:
    return list(a)


# Corpus on the unit circle; queries q1 = (1, 0), q2 = (0, 1), q3 = (0.6, 0.8).
DOC_IDS = ["d1", "d2", "d3", "d4"]
DOC_EMB = np.array([_v(1, 0), _v(0.6, 0.8), _v(0, 1), _v(0.8, 0.6)], dtype=np.float32)
QUERY_IDS = ["q1", "q2", "q3"]
QUERY_EMB = np.array([_v(1, 0), _v(0, 1), _v(0.6, 0.8)], dtype=np.float32)
QRELS = {
    "q1": {"d3": 1, "d1": 0},  # gold d3 has score 0 for q1: ranked last
    "q2": {"d2": 2, "d4": 1},  # golds d2 (0.8, rank 2) and d4 (0.6, rank 3)
    # q3: no judgement at all
    "qX": {"d1": 1},  # a query that is not embedded: ignored
}


@pytest.fixture(scope="module")
def rec() -> PerQueryRecords:
    return build_records(QUERY_IDS, QUERY_EMB, DOC_IDS, DOC_EMB, QRELS, system="toy", dataset="circle", k=2, seed=3)


def test_topk_and_gold(rec: PerQueryRecords) -> None:
    assert rec.system == "toy" and rec.dataset == "circle" and rec.k == 2
    # q1 scores: d1 1, d4 .8, d2 .6, d3 0;  q2: d3 1, d2 .8, d4 .6, d1 0;  q3: d2 1, d4 .96, d3 .8, d1 .6
    assert rec.topk_ids == [["d1", "d4"], ["d3", "d2"], ["d2", "d4"]]
    np.testing.assert_allclose(rec.topk_scores, [[1, 0.8], [1, 0.8], [1, 0.96]], rtol=1e-6)
    assert rec.gold_ids == [["d3"], ["d2", "d4"], []]
    assert rec.gold_rank.tolist() == [0, 2, 0]
    assert rec.gold_rank.dtype == np.int32


def test_sim_gold_is_computed_even_when_not_retrieved(rec: PerQueryRecords) -> None:
    assert rec.sim_gold[0] == 0.0  # d3 is outside q1's top-2 but its similarity is known
    assert rec.sim_gold[1] == rec.topk_scores[1, 1]  # the best gold (d2, 0.8), same canonical score
    assert np.isnan(rec.sim_gold[2])  # no gold document


def test_sim_random_matches_random_ids_and_seed(rec: PerQueryRecords) -> None:
    pos = {d: i for i, d in enumerate(DOC_IDS)}
    expect = np.random.default_rng(3).integers(0, 4, size=3)
    assert rec.random_ids == [DOC_IDS[i] for i in expect]
    for qi, rid in enumerate(rec.random_ids):
        assert rec.sim_random[qi] == pytest.approx(float(QUERY_EMB[qi] @ DOC_EMB[pos[rid]]), abs=1e-7)
    again = build_records(QUERY_IDS, QUERY_EMB, DOC_IDS, DOC_EMB, QRELS, system="toy", dataset="circle", k=2, seed=3)
    assert again.random_ids == rec.random_ids
    np.testing.assert_array_equal(again.sim_random, rec.sim_random)


def test_other_seed_draws_other_documents() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 4)).astype(np.float32)
    y = rng.standard_normal((100, 4)).astype(np.float32)
    ids = [f"d{i}" for i in range(100)]
    a = build_records([f"q{i}" for i in range(50)], x, ids, y, {}, system="s", dataset="d", k=3, seed=1)
    b = build_records([f"q{i}" for i in range(50)], x, ids, y, {}, system="s", dataset="d", k=3, seed=2)
    assert a.random_ids != b.random_ids
    assert a.topk_ids == b.topk_ids
    assert (a.gold_rank == 0).all() and np.isnan(a.sim_gold).all()


def test_ties_in_gold_rank_follow_trec_eval() -> None:
    """A gold document inside a tie: our gold_rank and pytrec_eval's reciprocal rank agree."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ids = ["10", "9", "100", "2"]
    y = np.array([_v(1, 0), _v(1, 0), _v(1, 0), _v(0.6, 0.8)], dtype=np.float32)
    x = np.array([_v(1, 0)] * 3, dtype=np.float32)
    qrels = {"a": {"10": 1}, "b": {"100": 1}, "c": {"9": 1}}
    rec = build_records(["a", "b", "c"], x, ids, y, qrels, system="s", dataset="d", k=4)
    assert rec.topk_ids[0] == ["9", "100", "10", "2"]
    assert rec.gold_rank.tolist() == [3, 2, 1]
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(rec.to_run())
    assert [rr[q]["recip_rank"] for q in "abc"] == pytest.approx([1 / 3, 1 / 2, 1])


def test_arrow_roundtrip(rec: PerQueryRecords) -> None:
    back = PerQueryRecords.from_arrow(rec.to_arrow())
    assert back.topk_ids == rec.topk_ids and back.random_ids == rec.random_ids
    np.testing.assert_array_equal(back.gold_rank, rec.gold_rank)


def test_errors() -> None:
    with pytest.raises(DataError, match="query 'q1' name relevant document 'dZ'"):
        build_records(["q1"], QUERY_EMB[:1], DOC_IDS, DOC_EMB, {"q1": {"dZ": 1}}, system="s", dataset="d")
    with pytest.raises(ConfigError, match="query_ids has 2 ids but query_emb has 3 rows"):
        build_records(["q1", "q2"], QUERY_EMB, DOC_IDS, DOC_EMB, {}, system="s", dataset="d")
    with pytest.raises(ConfigError, match="doc_ids has 3 ids but doc_emb has 4 rows"):
        build_records(QUERY_IDS, QUERY_EMB, DOC_IDS[:3], DOC_EMB, {}, system="s", dataset="d")
    with pytest.raises(ConfigError, match="seed"):
        build_records(QUERY_IDS, QUERY_EMB, DOC_IDS, DOC_EMB, {}, system="s", dataset="d", seed=-1)
    with pytest.raises(ConfigError, match="query_ids is empty"):
        build_records([], np.zeros((0, 2), np.float32), DOC_IDS, DOC_EMB, {}, system="s", dataset="d")


def test_search_settings_whole_or_as_keyword_options_give_the_same_records(rec: PerQueryRecords) -> None:
    whole = build_records(
        QUERY_IDS,
        QUERY_EMB,
        DOC_IDS,
        DOC_EMB,
        QRELS,
        system="toy",
        dataset="circle",
        config=SearchSettings(k=2, seed=3),
    )
    # a keyword option replaces the field of the settings object
    mixed = build_records(
        QUERY_IDS,
        QUERY_EMB,
        DOC_IDS,
        DOC_EMB,
        QRELS,
        system="toy",
        dataset="circle",
        config=SearchSettings(k=4, seed=3),
        k=2,
    )
    for other in (whole, mixed):
        assert other.topk_ids == rec.topk_ids and other.random_ids == rec.random_ids
        np.testing.assert_array_equal(other.topk_scores, rec.topk_scores)
        np.testing.assert_array_equal(other.gold_rank, rec.gold_rank)
        np.testing.assert_array_equal(other.sim_random, rec.sim_random)
        assert other.meta == rec.meta


def test_an_unknown_search_option_names_the_valid_ones() -> None:
    with pytest.raises(
        TypeError, match=r"build_records\(\) got an unexpected keyword argument 'depth'; expected one of .*\bk\b.*seed"
    ):
        build_records(QUERY_IDS, QUERY_EMB, DOC_IDS, DOC_EMB, QRELS, system="s", dataset="d", depth=2)
    with pytest.raises(ConfigError, match="unexpected keyword argument 'depth'"):  # one line in the CLI too
        build_records(QUERY_IDS, QUERY_EMB, DOC_IDS, DOC_EMB, QRELS, system="s", dataset="d", depth=2)
