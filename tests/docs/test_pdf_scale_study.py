"""benchmarks/pdf_scale_study.py (issue 32's headline study): the figures it adds to its output,
on hand-made manifests, studies and metric rows (the study itself takes 15-20 minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCHMARK = "pdf_scale_study"  # the bench fixture (conftest) imports benchmarks.pdf_scale_study


def _study(work: Path, bench, speed: str) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "study.toml").write_text(bench.study_text(work / "corpus", work / "store", [20, 60], False, speed))


def _manifest(store: Path, name: str, seconds: float, threads: int, optimizer: str | None = None) -> None:
    folder = store / "artifacts" / "minilm" / name
    folder.mkdir(parents=True)
    training = {"seconds": seconds, "steps": 10, "torch_threads": threads}
    if optimizer:
        training["optimizer"] = optimizer
    (folder / "manifest.json").write_text(json.dumps({"training": training}))


def test_options_are_the_adapt_keys_as_written(bench, tmp_path):
    _study(tmp_path, bench, 'precision = "bf16"\n')
    assert bench.adapt_options(tmp_path / "study.toml") == {
        "unit": '"pages"',
        "scales": "[20, 60]",
        "variants": '["base", "ft", "pt-ft"]',
        "max_tokens": "256",
        "precision": '"bf16"',
    }


def test_stage_figures_join_manifests_and_worker_peaks(bench, tmp_path):
    _manifest(tmp_path, "ft-60-0123456789abcdef", 80.5, 2, "adamw-fused")
    _manifest(tmp_path, "pt-20-fedcba9876543210", 40.0, 1)  # written before the optimizer was recorded
    peaks = {
        "adapt:ft:ft/minilm/scale=60": 2_900_000_000,
        "adapt:pt:pt-ft/minilm/scale=20": 1_500_000_000,
        "adapt:ft:pt-ft/minilm/scale=20": 3_100_000_000,
    }
    assert bench.stage_figures(tmp_path, peaks) == {
        "ft-60": {"seconds": 80.5, "steps": 10, "torch_threads": 2, "optimizer": "adamw-fused", "peak_rss_gb": 2.9},
        "pt-20": {"seconds": 40.0, "steps": 10, "torch_threads": 1, "optimizer": "adamw-loop", "peak_rss_gb": 1.5},
        "pt-ft-20": {"peak_rss_gb": 3.1},  # sampled, its manifest not written yet
    }
    assert (
        bench.STAGE_TITLE.match("ray::adapt:ft:pt-ft/minilm/scale=20\x00").group(1) == "adapt:ft:pt-ft/minilm/scale=20"
    )


def test_a_comparison_names_the_rows_that_moved_and_the_options_that_differ(bench, tmp_path, monkeypatch):
    _study(tmp_path / "a", bench, 'precision = "bf16"\n')
    _study(tmp_path / "b", bench, "")
    rows = {
        "a": {("d", "ft", "ndcg@10"): 0.50, ("d", "base", "ndcg@10"): 0.40, ("d", "ft", "mrr"): 0.3},
        "b": {("d", "ft", "ndcg@10"): 0.52, ("d", "base", "ndcg@10"): 0.40},
    }
    monkeypatch.setattr(bench, "metric_rows", lambda store: rows[store.parent.name])
    _manifest(tmp_path / "a" / "store", "ft-60-0123456789abcdef", 50.0, 2)
    _manifest(tmp_path / "b" / "store", "ft-60-0123456789abcdef", 80.0, 1)
    _manifest(tmp_path / "a" / "store", "pt-20-fedcba9876543210", 40.0, 1, "adamw-fused")
    _manifest(tmp_path / "b" / "store", "pt-20-fedcba9876543210", 41.0, 1)
    out = bench.compare_runs(tmp_path / "a", tmp_path / "b")
    assert out["rows"] == 2 and out["rows_differing"] == 1
    assert out["max_abs_diff"] == pytest.approx(0.02)
    assert out["options_differing"] == {"precision": ['"bf16"', None]}
    assert out["threads_differing"] == {"ft-60": [2, 1]}
    assert out["optimizer_differing"] == {"pt-20": ["adamw-fused", "adamw-loop"]}


def test_an_against_folder_without_a_run_is_refused_before_the_study(bench, tmp_path):
    """A mistyped --against stops the benchmark at once, not after a 10-minute study whose figures
    the comparison would then lose."""
    with pytest.raises(SystemExit, match=r"--against .*: expected another run's work folder with study.toml and store"):
        bench.check_against(str(tmp_path))
    _study(tmp_path, bench, "")
    (tmp_path / "store").mkdir()
    bench.check_against(str(tmp_path))  # a run's folder passes
    bench.check_against(None)


def test_variants_are_written_as_asked(bench, tmp_path):
    text = bench.study_text(tmp_path / "corpus", tmp_path / "store", [10, 20, 40], False, "", ("base", "ft"))
    (tmp_path / "study.toml").write_text(text)
    assert bench.adapt_options(tmp_path / "study.toml")["variants"] == '["base", "ft"]'
    assert bench.parse_args(["--variants", "base,ft"]).variants == "base,ft"
