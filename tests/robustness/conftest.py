"""Fixtures of the hostile-input corpus; the helpers live in robustness/hostile.py."""

from __future__ import annotations

import subprocess
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


@pytest.fixture
def tiny_disk(tmp_path) -> Path:
    """A 64 KiB tmpfs (root only; skipped where mounting is not allowed), unmounted after the test,
    lazily when a handle is still open (else the mount outlives the test and pytest's clean-up
    fails)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, timeout=20
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=20).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=20)
