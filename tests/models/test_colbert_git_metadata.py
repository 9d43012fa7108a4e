"""colbert-ai writes the git branch of the current folder into every checkpoint and failed with
GitPython's TypeError on a detached HEAD (a CI checkout, a worktree of a commit): building a
ColBERT from there must work and record no git fields."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_colbert_is_built_inside_a_detached_head_checkout(tiny_model, tmp_path, monkeypatch):
    pytest.importorskip("colbert")
    from adaptlab.models.colbert import colbert_from_bert, is_colbert_checkpoint

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True, timeout=60)
    subprocess.run([*git, "checkout", "-q", "--detach"], check=True, timeout=60)
    monkeypatch.chdir(repo)
    out = colbert_from_bert(
        tiny_model.parent / (tiny_model.name + "-hf"), tmp_path / "ckpt", dim=16, seed=0, doc_maxlen=32, query_maxlen=16
    )
    assert is_colbert_checkpoint(out)
    meta = json.loads((out / "artifact.metadata").read_text())["meta"]
    assert "git_branch" not in meta and meta["hostname"]
