"""Smoke test of benchmarks/bench_search.py at a tiny size."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_search.py"


def test_bench_search_runs_small(capsys) -> None:
    spec = importlib.util.spec_from_file_location("bench_search", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(["--docs", "2000", "--queries", "20", "--dim", "16", "--k", "10", "--repeat", "1", "--doc-ids"])
    assert res["same_topk_set"] == 1.0
    assert res["ours_s"] > 0 and res["faiss_s"] > 0
    out = capsys.readouterr().out
    assert "ratio to faiss search only" in out and "bandwidth bound" in out
