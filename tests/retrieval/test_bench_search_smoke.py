"""Smoke test of benchmarks.bench_search at a tiny size."""

from __future__ import annotations

from benchmarks import bench_search


def test_bench_search_runs_small(capsys) -> None:
    res = bench_search.main(
        ["--docs", "2000", "--queries", "20", "--dim", "16", "--k", "10", "--repeat", "1", "--doc-ids"]
    )
    assert res["same_topk_set"] == 1.0
    assert res["ours_s"] > 0 and res["faiss_s"] > 0
    out = capsys.readouterr().out
    assert "ratio to faiss search only" in out and "bandwidth bound" in out
