"""PT, FT, PT-FT and merged variants on a tiny local model: weights change, merged weights follow
the formula exactly, artifacts are reused, saved as safetensors, and a crashed run resumes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

from adaptlab.adapt.train import ft as train_ft_module  # noqa: E402
from adaptlab.adapt.train.ft import (  # noqa: E402
    FTConfig,
    coerce_triplets,
    resolve_prefixes,
    train_ft,
)
from adaptlab.adapt.train.merge import merge_models, merge_state_dicts  # noqa: E402
from adaptlab.adapt.train.pt import PTConfig, train_pt  # noqa: E402
from adaptlab.errors import ConfigError, DataError  # noqa: E402

FT = FTConfig(learning_rate=1e-3, epochs=2, batch_size=4, num_negatives=2, warmup_ratio=0.0, min_steps=0)
PT = PTConfig(learning_rate=1e-3, epochs=1, batch_size=4, warmup_ratio=0.0, min_steps=0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="module")
def ft_artifact(tiny_model, triplets, store):
    return train_ft(tiny_model, triplets, artifact_root=store, config=FT, seed=0, scale=8)


@pytest.fixture(scope="module")
def pt_artifact(tiny_model, chunks, store):
    return train_pt(tiny_model, chunks, artifact_root=store, config=PT, seed=0, scale=8)


def _changed(a: dict, b: dict) -> set[str]:
    return {k for k in a if not torch.equal(a[k], b[k])}


def _no_pickles(directory: Path) -> None:
    files = [p.name for p in directory.rglob("*") if p.is_file()]
    assert "model.safetensors" in files
    assert not [f for f in files if f.endswith((".bin", ".pkl", ".pt", ".pth"))]


def test_ft_changes_weights_and_writes_a_manifest(ft_artifact, tiny_model, triplets, read_weights):
    assert ft_artifact.variant == "ft" and not ft_artifact.reused
    changed = _changed(read_weights(ft_artifact.model_path), read_weights(tiny_model))
    assert any("encoder.layer" in k for k in changed)
    _no_pickles(ft_artifact.path)
    m = json.loads((ft_artifact.path / "manifest.json").read_text())
    assert m["data"] == {"kind": "triplets", "scale": "8", "fingerprint": m["data"]["fingerprint"], "count": 8}
    assert m["hyperparameters"]["scale"] == 20.0 and m["hyperparameters"]["temperature"] == 0.05
    assert m["hyperparameters"]["num_negatives"] == 2 and m["seed"] == 0
    assert set(m["packages"]) >= {"torch", "transformers", "sentence-transformers", "adaptlab"}
    assert m["training"]["steps"] == 4 and m["training"]["resumed_from_step"] == 0
    assert ft_artifact.path.name.startswith("ft-8-")


def test_rerun_with_same_inputs_reuses_without_training(ft_artifact, tiny_model, triplets, store, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("training ran although the artifact exists")

    monkeypatch.setattr(train_ft_module, "fine_tune_model", forbidden)
    again = train_ft(tiny_model, triplets, artifact_root=store, config=FT, seed=0, scale=8)
    assert again.reused and again.path == ft_artifact.path and again.key == ft_artifact.key
    # a changed input is a different artifact (and would train)
    with pytest.raises(AssertionError, match="training ran"):
        train_ft(tiny_model, triplets, artifact_root=store, config=FT, seed=1, scale=8)


def test_pt_trains_the_encoder_and_keeps_pooling_and_normalisation(pt_artifact, tiny_model, read_weights):
    assert pt_artifact.variant == "pt"
    changed = _changed(read_weights(pt_artifact.model_path), read_weights(tiny_model))
    assert any("encoder.layer" in k for k in changed)
    _no_pickles(pt_artifact.path)
    modules = json.loads((pt_artifact.model_path / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert pt_artifact.manifest["training"]["mlm_head"] == "initialised"
    model = pt_artifact.load(device="cpu")
    vecs = model.encode(["antenna tilt", "paging idle devices"], convert_to_numpy=True)
    assert vecs.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_pt_ft_starts_from_pt(pt_artifact, ft_artifact, triplets, store, read_weights):
    art = train_ft(pt_artifact, triplets, artifact_root=store, config=FT, seed=0, scale=8)
    assert art.variant == "pt-ft"
    assert art.manifest["base_model"]["parent_key"] == pt_artifact.key
    assert art.manifest["info"]["root_model"]["hash"] == ft_artifact.manifest["base_model"]["hash"]
    w = read_weights(art.model_path)
    assert _changed(w, read_weights(pt_artifact.model_path))
    assert _changed(w, read_weights(ft_artifact.model_path))


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_merged_weights_equal_the_formula_exactly(ft_artifact, tiny_model, store, read_weights, weight):
    art = merge_models(ft_artifact, tiny_model, weight, artifact_root=store, scale=8)
    assert art.variant == "merged" and art.manifest["hyperparameters"]["merge_weight"] == weight
    merged, adapted, base = (read_weights(p) for p in (art.model_path, ft_artifact.model_path, tiny_model))
    assert set(merged) == set(base)
    for name, value in merged.items():
        expected = weight * adapted[name] + (1.0 - weight) * base[name]
        assert torch.equal(value, expected), name
    _no_pickles(art.path)
    assert merge_models(ft_artifact, tiny_model, weight, artifact_root=store, scale=8).reused


def test_merge_state_dicts_validates():
    a = {"w": torch.ones(2), "ids": torch.arange(3)}
    b = {"w": torch.zeros(2), "ids": torch.arange(3)}
    assert torch.equal(merge_state_dicts(a, b, 0.25)["w"], torch.full((2,), 0.25))
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        merge_state_dicts(a, b, 1.5)
    with pytest.raises(ConfigError, match="shape"):
        merge_state_dicts(a, {"w": torch.zeros(3), "ids": torch.arange(3)}, 0.5)
    with pytest.raises(ConfigError, match="different architectures"):
        merge_state_dicts(a, {"w": torch.zeros(2)}, 0.5)
    with pytest.raises(ConfigError, match="non-float"):
        merge_state_dicts(a, {"w": torch.zeros(2), "ids": torch.arange(1, 4)}, 0.5)


class _Crash(RuntimeError):
    pass


def test_crashed_run_resumes_from_its_checkpoint_and_matches(tiny_model, triplets, tmp_path, read_weights):
    cfg = FTConfig(learning_rate=1e-3, epochs=2, batch_size=4, num_negatives=1)  # 4 steps
    straight = train_ft(tiny_model, triplets, artifact_root=tmp_path / "a", config=cfg, seed=3, checkpoint_every=None)

    def crash_at_2(step):
        if step == 2:
            raise _Crash(step)

    with pytest.raises(_Crash):
        train_ft(
            tiny_model,
            triplets,
            artifact_root=tmp_path / "b",
            config=cfg,
            seed=3,
            checkpoint_every=1,
            on_checkpoint=crash_at_2,
        )
    partial = next((tmp_path / "b").rglob("*.partial"))
    assert json.loads((partial / "checkpoints" / "latest.json").read_text())["step"] == 2
    resumed = train_ft(tiny_model, triplets, artifact_root=tmp_path / "b", config=cfg, seed=3, checkpoint_every=1)
    assert resumed.manifest["training"]["resumed_from_step"] == 2
    assert resumed.key == straight.key
    assert not partial.exists()
    a, b = read_weights(straight.model_path), read_weights(resumed.model_path)
    assert not _changed(a, b)  # bit-identical: data order and dropout depend on (seed, step) only


def test_coerce_triplets_accepts_tables_records_and_objects():
    pa = pytest.importorskip("pyarrow")

    @dataclass
    class T:
        query: str
        positive: str
        negatives: list

    expected = [("q", "p", ("n1", "n2"))]
    table = pa.table({"query": ["q"], "positive": ["p"], "negatives": [["n1", "n2"]]})
    assert coerce_triplets(table) == expected
    assert coerce_triplets([{"query": "q", "positive": "p", "negatives": ["n1", "n2"]}]) == expected
    assert coerce_triplets([T("q", "p", ["n1", "n2"])]) == expected
    assert coerce_triplets([("q", "p", "n1")]) == [("q", "p", ("n1",))]
    with pytest.raises(DataError, match="missing columns"):
        coerce_triplets(pa.table({"query": ["q"]}))
    with pytest.raises(DataError, match="row 0"):
        coerce_triplets([42])
    with pytest.raises(DataError, match="row 0"):
        coerce_triplets([("", "p", [])])
    with pytest.raises(DataError, match="no triplets"):
        coerce_triplets([])


def test_coerce_triplets_reads_the_triplets_parquet_file(tmp_path):
    from adaptlab.adapt.prep.triplets import Triplet, TripletProvenance, write_triplets

    path = tmp_path / "triplets.parquet"
    write_triplets(
        path,
        [Triplet("q1", "q", "c1", "p", ("c2",), ("n",), "doc")],
        TripletProvenance(base_model="minilm", scale="8", seed=0, generator="test"),
    )
    assert coerce_triplets(path) == [("q", "p", ("n",))]
    assert coerce_triplets(str(path)) == [("q", "p", ("n",))]


def test_triplet_without_negatives_is_an_error_when_negatives_are_asked(tiny_model, tmp_path):
    with pytest.raises(DataError, match="no negatives"):
        train_ft(
            tiny_model,
            [("q a", "p a", ()), ("q b", "p b", ())],
            artifact_root=tmp_path,
            config=FTConfig(batch_size=2, num_negatives=1),
        )


def test_prefix_resolution():
    bge = "Represent this sentence for searching relevant passages: "
    assert resolve_prefixes(None, None) == ("", "")
    assert resolve_prefixes("query: ", "passage: ") == ("query: ", "passage: ")
    assert resolve_prefixes("auto", "auto", {"query": "Q: "}, "BAAI/bge-large-en-v1.5") == ("Q: ", "")
    assert resolve_prefixes("auto", "auto", {}, "bge-large-en-v1.5") == (bge, "")  # alias
    assert resolve_prefixes("auto", "auto", {}, "my-bge-large-en-copy") == (bge, "")  # id names a BGE model
    q, d = resolve_prefixes("auto", "auto", {}, "llm-embedder")
    assert q.startswith("Represent this query") and d.startswith("Represent this document")
    assert resolve_prefixes("auto", "auto", {}, "minilm") == ("", "")


def test_config_validation_names_the_key():
    with pytest.raises(ConfigError, match="FTConfig.scale"):
        FTConfig(scale=0)
    with pytest.raises(ConfigError, match="FTConfig.batch_size"):
        FTConfig(batch_size=0)
    with pytest.raises(ConfigError, match="PTConfig.mlm_probability"):
        PTConfig(mlm_probability=1.5)
    with pytest.raises(DataError, match="chunks"):
        train_pt("unused", ["  "], artifact_root="unused")
