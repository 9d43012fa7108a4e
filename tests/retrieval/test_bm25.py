"""BM25 search (adaptlab.retrieval.lexical): scores equal the formula computed by hand, the
ranking follows trec_eval's tie rule, the records' similarity columns are BM25 scores, bad options
are one clear error, a study evaluates ``ref = "bm25"`` beside a dense model with paired tests,
and on BEIR SciFact its nDCG@10 (pytrec_eval) is within 0.02 of Pyserini's flat-index BM25."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.retrieval.lexical import BM25Settings, bm25_records

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "data" / "beir_scifact"
PLAIN = BM25Settings(k1=1.2, b=0.75, stemmer="none", stopwords="none")

DOCS = {
    "d1": "apple banana apple",
    "d2": "banana cherry",
    "d3": "cherry cherry cherry date",
    "d4": "banana cherry",
    "d5": "elder",
}


def _lucene(query: str, docs: dict[str, str], k1: float, b: float) -> dict[str, float]:
    """BM25 as Lucene (8+) scores it, written out from Robertson & Zaragoza (2009) without bm25s:
    Lucene's idf, and no (k1 + 1) factor in the numerator (a constant that cannot change a ranking)."""
    toks = {d: t.split() for d, t in docs.items()}
    n, avgdl = len(toks), sum(len(t) for t in toks.values()) / len(toks)
    out = {}
    for d, t in toks.items():
        s = 0.0
        for term in query.split():
            df = sum(term in u for u in toks.values())
            tf = t.count(term)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf / (tf + k1 * (1 - b + b * len(t) / avgdl))
        out[d] = s
    return out


def test_scores_ranking_and_similarity_columns_by_hand():
    qrels = {"q1": {"d1": 1}, "q2": {"d5": 1}, "q3": {"d2": 1, "d4": 1}}
    queries = {"q1": "apple cherry", "q2": "zebra", "q3": "banana cherry"}
    rec = bm25_records(
        list(queries),
        list(queries.values()),
        list(DOCS),
        list(DOCS.values()),
        qrels,
        settings=PLAIN,
        system="bm25",
        dataset="toy",
        k=3,
        seed=7,
    )
    for i, (q, text) in enumerate(queries.items()):
        want = _lucene(text, DOCS, 1.2, 0.75)
        ranked = sorted(want, key=lambda d: (-round(want[d], 5), [-ord(c) for c in d]))[:3]
        assert rec.topk_ids[i] == ranked, q
        np.testing.assert_allclose(rec.topk_scores[i], [want[d] for d in ranked], rtol=1e-5)
        gold = max(want[d] for d in qrels[q])
        assert rec.sim_gold[i] == pytest.approx(gold, rel=1e-5)
        assert rec.sim_random[i] == pytest.approx(want[rec.random_ids[i]], rel=1e-5, abs=1e-7)
    # q2 matches nothing: every document scores 0 and the tie is cut by id descending
    assert rec.topk_ids[1] == ["d5", "d4", "d3"] and rec.gold_rank[1] == 1
    # q3: d2 and d4 are identical texts, so tied: d4 (larger id) first
    assert rec.topk_ids[2][:2] == ["d4", "d2"] and rec.gold_rank[2] == 1
    assert rec.meta["similarity"] == "BM25 score" and "k1=1.2" in rec.meta["bm25"]


def test_the_same_draw_of_random_documents_as_the_dense_path():
    from adaptlab.retrieval.build import build_records

    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    emb = np.eye(5, dtype=np.float32)
    dense = build_records(
        ["q1", "q2"], emb[:2], list(DOCS), emb, qrels, system="x", dataset="t", k=2, seed=3, backend="numpy"
    )
    lex = bm25_records(
        ["q1", "q2"],
        ["apple", "banana"],
        list(DOCS),
        list(DOCS.values()),
        qrels,
        settings=PLAIN,
        system="y",
        dataset="t",
        k=2,
        seed=3,
    )
    assert lex.random_ids == dense.random_ids


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"k1": -1}, "'k1': expected a number >= 0"),
        ({"b": 2}, r"'b': expected a number in \[0.0, 1.0\]"),
        ({"method": "okapi"}, "'method': expected one of lucene"),
        ({"stemmer": "klingon"}, "'stemmer': expected 'none' or one of"),
        ({"stopwords": "fr"}, "'stopwords': expected 'en' or 'none'"),
        ({"k": 3}, "option 'k' is unknown"),
    ],
)
def test_bad_options_are_one_clear_error(options, match):
    with pytest.raises(ConfigError, match=match):
        BM25Settings.from_options(options)


def test_stemming_and_stop_words_reach_the_tokenizer():
    docs, qrels = ["the runners were running", "a run"], {"q": {"a": 1}}
    stemmed = bm25_records(
        ["q"], ["running"], ["a", "b"], docs, qrels, settings=BM25Settings(), system="s", dataset="t", k=2
    )
    plain = bm25_records(["q"], ["running"], ["a", "b"], docs, qrels, settings=PLAIN, system="s", dataset="t", k=2)
    assert stemmed.topk_scores[0].min() > 0  # "run" matches both documents once stemmed
    assert plain.topk_scores[0][1] == 0  # unstemmed: only "running" in document a


def test_a_study_evaluates_bm25_beside_a_dense_model(tmp_path):
    from adaptlab.results import open as open_store
    from adaptlab.study import parse_study, run_study

    spec = {
        "study": {"name": "lex", "store": str(tmp_path / "store")},
        "datasets": [{"name": "syn", "spec": "synthetic:n_documents=8,seed=1"}],
        "models": [
            {"name": "dense", "ref": "hash:64"},
            {"name": "bm25", "ref": "bm25", "options": {"k1": 1.2, "b": 0.75}},
        ],
        "evaluation": {"metrics": ["acc@1", "ndcg@10"], "k": 10, "baseline": "dense"},
        "bootstrap": {"n_resamples": 200},
        "embedding": {"use_ray": False},
        "analysis": {"thresholds": True, "isotropy": True},
    }
    out = run_study(parse_study(spec))
    rec = out.datasets[0].records["bm25"]
    assert rec.meta["similarity"] == "BM25 score" and "k1=1.2 b=0.75" in rec.meta["bm25"]
    store = open_store(tmp_path / "store")
    runs = {r["system"]: r for r in store.runs().to_pylist()}
    assert runs["bm25"]["model_revision"].startswith("bm25s==")
    pairs = store.comparisons(system="bm25").to_pylist()
    assert pairs and all(r["compared_to"] == "dense" and r["p_value"] is not None for r in pairs)
    measures = {r["measure"] for r in store.metrics(system="bm25", kind="all").to_pylist()}
    assert "ndcg@10" in measures and not any(m.startswith("isotropy") for m in measures)  # no document vectors


def test_bm25_cannot_be_the_adapted_base_model(tmp_path):
    from adaptlab.study import load_study
    from adaptlab.study.adapt_config import parse_adapt_section

    (tmp_path / "s.toml").write_text("""
[study]
name = "x"
[[datasets]]
spec = "synthetic:n_documents=8,seed=1"
[[models]]
ref = "bm25"
[adapt]
corpus = "."
scales = [2]
""")
    with pytest.raises(ConfigError, match="base_model: expected a bi-encoder to adapt"):
        parse_adapt_section(load_study(tmp_path / "s.toml"))


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="needs ../shared/data/beir_scifact")
def test_scifact_ndcg10_within_0_02_of_pyserini_flat():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from adaptlab.data import load_dataset
    from adaptlab.metrics import evaluate, parse_measures

    ds = load_dataset(f"beir:{SCIFACT}", split="test")
    judged = ds.judged_queries()
    doc_ids = list(ds.corpus)
    rec = bm25_records(
        judged,
        [ds.queries[q] for q in judged],
        doc_ids,
        [ds.corpus[d].full_text() for d in doc_ids],
        ds.qrels,
        settings=BM25Settings(),
        system="bm25",
        dataset="scifact",
        k=100,
    )
    qrels = {q: dict(ds.qrels[q]) for q in judged}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(rec.to_run())
    ndcg = float(np.mean([v["ndcg_cut_10"] for v in theirs.values()]))
    ours = evaluate(ds.qrels, rec.to_run(), parse_measures(["ndcg@10"]), query_ids=judged)
    assert len(judged) == 300
    assert float(np.mean(ours.values["ndcg@10"])) == pytest.approx(ndcg, abs=1e-6)
    # Pyserini's flat Lucene index (k1 0.9, b 0.4, Porter stemmer): 0.679; bm25s with Snowball: 0.676
    assert abs(ndcg - 0.679) < 0.02, ndcg
