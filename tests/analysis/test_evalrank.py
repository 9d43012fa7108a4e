import json

import numpy as np
import pytest

from adaptlab.analysis import evalrank, evalrank_ranks, load_pairs
from adaptlab.errors import ConfigError, DataError


def _angles(*deg):
    r = np.radians(deg)
    return np.stack([np.cos(r), np.sin(r)], axis=1)


def test_ranks_by_hand():
    pool = _angles(0, 10, 20, 90)
    pairs = np.array([[0, 2], [0, 1], [3, 0]])
    # from c0: c1 (cos 10) > c2 (cos 20) > c3 ; from c3: c2 > c1 > c0
    np.testing.assert_array_equal(evalrank_ranks(pool, pairs), [2, 1, 3])


def test_ties_follow_the_id_descending_rule():
    pool = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    np.testing.assert_array_equal(evalrank_ranks(pool, np.array([[0, 1], [0, 2]])), [2, 1])


def test_mrr_hits_with_ci():
    pool = _angles(0, 10, 20, 90)
    r = evalrank(pool, np.array([[0, 2], [0, 1], [3, 0]]), ks=(1, 2), n_resamples=200, seed=0)
    assert r.mrr == pytest.approx((1 / 2 + 1 + 1 / 3) / 3)
    assert r.hits(1) == pytest.approx(1 / 3) and r.hits(2) == pytest.approx(2 / 3)
    lo, hi = r.values["evalrank_mrr"][2:]
    assert lo <= r.mrr <= hi
    rows = r.to_metric_rows()
    assert [x["measure"] for x in rows] == ["evalrank_mrr", "evalrank_hits@1", "evalrank_hits@2"]
    assert rows[0]["n_queries"] == 3


def test_load_pairs_csv_jsonl_and_background(tmp_path):
    csv_path = tmp_path / "p.csv"
    csv_path.write_text("a,b,score\nthe cat,a cat,5\nthe dog,the cat,4\n", encoding="utf-8")
    pool = load_pairs(csv_path, columns=("a", "b"), symmetric=True, background=["a fish", "the dog"])
    assert pool.texts == ["the cat", "a cat", "the dog", "a fish"]
    np.testing.assert_array_equal(pool.pairs, [[0, 1], [1, 0], [2, 0], [0, 2]])
    jl = tmp_path / "p.jsonl"
    jl.write_text("\n".join(json.dumps({"q": q, "p": p}) for q, p in [("x", "y"), ("y", "z")]) + "\n", encoding="utf-8")
    assert len(load_pairs(jl, columns=("q", "p"))) == 2


def test_loader_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence1,sentence2\nok,fine\nonly,\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.csv:3"):
        load_pairs(bad)
    jl = tmp_path / "bad.jsonl"
    jl.write_text('{"sentence1": "a", "sentence2": "b"}\n{oops\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl:2"):
        load_pairs(jl)
    with pytest.raises(DataError, match="missing column 'x'"):
        load_pairs(bad, columns=("x", "sentence2"))
    with pytest.raises(ConfigError, match="suffix"):
        load_pairs(tmp_path / "p.txt")
    with pytest.raises(ConfigError, match="query is excluded"):
        evalrank_ranks(np.eye(3), np.array([[1, 1]]))


def test_symmetric_pairs_are_resampled_as_whole_pairs(tmp_path):
    from adaptlab.analysis.evalrank import load_pairs as _load
    from adaptlab.stats import resample_indices

    rng = np.random.default_rng(0)
    n = 60
    lines = ["a,b"] + [f"t{i}a,t{i}b" for i in range(n)]
    path = tmp_path / "pairs.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pool = _load(path, columns=("a", "b"), symmetric=True)
    assert pool.groups.tolist() == [i // 2 for i in range(2 * n)]
    # texts of a pair are close to each other; reversed pairs get correlated ranks
    base = rng.normal(size=(n, 8))
    emb = np.empty((2 * n, 8))
    emb[0::2] = base
    emb[1::2] = base + rng.normal(scale=rng.uniform(0.2, 2.0, size=(n, 1)), size=(n, 8))
    res = evalrank(emb, pool, n_resamples=400, seed=3)
    # by hand: group means of the reciprocal ranks, resampled as units (equal group sizes)
    rr = (1.0 / res.ranks).reshape(n, 2).mean(axis=1)
    idx = resample_indices(n, n_resamples=400, seed=3)
    boot = rr[idx].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    assert res.values["evalrank_mrr"][2] == pytest.approx(lo) and res.values["evalrank_mrr"][3] == pytest.approx(hi)
    indep = evalrank(emb, pool.pairs, n_resamples=400, seed=3)
    assert indep.mrr == pytest.approx(res.mrr)
    width = lambda r: r.values["evalrank_mrr"][3] - r.values["evalrank_mrr"][2]  # noqa: E731
    assert width(res) > width(indep)  # independent resampling understated the CI
