"""One cache-folder rule (issue 31): embeddings, ColBERT token vectors and start checkpoints, and
adapted models staged or materialised from a URI all land under ``storage.env.cache_home()``,
which honours ``$XDG_CACHE_HOME`` and expands ``~``. Before, the artifact cache was computed on
its own (``$ADAPTLAB_CACHE`` or ``~/.cache/adaptlab``) and landed in another tree."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptlab.adapt.train.artifacts import artifact_cache_dir, materialize_artifact
from adaptlab.adapt.train.writer import ArtifactWriter
from adaptlab.embedding.cache import EmbeddingCache
from adaptlab.models.colbert import _cache_root as colbert_init_root


def _commit(writer: ArtifactWriter) -> None:
    """Stand-in for training: one file in the model folder, then the commit (which publishes)."""
    with writer.lock():
        writer.prepare()
        writer.model_dir.mkdir(parents=True)
        (writer.model_dir / "config.json").write_text('{"hidden": 4}')
    writer.commit(training={"loss": 0.5})


def test_embeddings_colbert_and_adapted_models_share_the_xdg_root(tmp_path: Path, monkeypatch) -> None:
    for var in ("ADAPTLAB_CACHE", "ADAPTLAB_EMBEDDING_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg")  # as a user writes it in a shell profile
    root = tmp_path / "home" / "xdg" / "adaptlab"

    cache = EmbeddingCache.resolve()
    assert cache is not None and cache.root == root
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    cache.folder("embeddings").save("dense.npy", vectors)
    cache.folder("tokens").save("colbert.npy", vectors[:1])  # ColBERT token vectors
    assert colbert_init_root(None) == root / "colbert-init"  # ColBERT start checkpoints

    shared = f"file://{tmp_path}/shared/artifacts"
    writer = ArtifactWriter(shared, label="tiny", variant="ft", scale=10, inputs={"n": 1})
    _commit(writer)
    assert artifact_cache_dir() == root / "artifacts"
    assert writer.final_dir == root / "artifacts" / "tiny" / writer.name  # staged here
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg-node-b")  # another node's cache: materialised there
    local = materialize_artifact(writer.uri)
    assert local == tmp_path / "home" / "xdg-node-b" / "adaptlab" / "artifacts" / "tiny" / writer.name

    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert found == [
        "artifacts/tiny/" + writer.name + "/manifest.json",
        "artifacts/tiny/" + writer.name + "/model/config.json",
        "embeddings/dense.npy",
        "tokens/colbert.npy",
    ]
    assert not (tmp_path / "home" / ".cache").exists() and not Path("~").exists()
