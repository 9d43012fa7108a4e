"""Fixtures of the hostile-input corpus; the helpers live in robustness/hostile.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustness.hostile import QRELS, RUN, STUDY, build_store


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("robust") / "store"
    build_store(root).close()
    return root


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """A scratch folder (the current directory) with a valid qrels, run and study file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ADAPTLAB_PROGRESS", "0")
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    (tmp_path / "study.toml").write_text(STUDY)
    return tmp_path
