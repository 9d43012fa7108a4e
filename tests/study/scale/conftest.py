"""Shared fixtures for the scale-study tests: one torch thread and a study builder (the tiny
random-init encoder is the session's ``tiny_model`` of tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tiny_models import one_torch_thread  # noqa: F401 (autouse fixture)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_study(
    adapt: dict[str, Any],
    *,
    tune: dict[str, Any] | None = None,
    models: list[dict[str, Any]],
    datasets: list[dict[str, Any]] | None = None,
    metrics: list[str] | None = None,
    n_resamples: int = 200,
    name: str = "scale-test",
    base_dir: Path | None = None,
    analysis: dict[str, Any] | None = None,
):
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
