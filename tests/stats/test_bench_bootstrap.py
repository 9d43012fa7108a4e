"""Smoke test: the bootstrap benchmark runs end to end at a tiny size."""

from __future__ import annotations

import math

import pytest

from benchmarks import bench_bootstrap as mod


def test_benchmark_runs_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    res = mod.main(["--queries", "800", "--systems", "4", "--resamples", "200", "--repeat", "1", "--n-jobs", "1"])
    out = capsys.readouterr().out
    assert "6 paired CIs" in out and "ratio" in out
    assert res["ours_wall"] > 0 and res["scipy_wall"] > 0 and res["ratio_wall"] > 0
    vals = mod.make_ndcg10(50, 3, seed=1)
    allowed = {0.0} | {1 / math.log2(r + 1) for r in range(1, 11)}
    assert vals.shape == (3, 50) and set(vals.ravel()) <= allowed
