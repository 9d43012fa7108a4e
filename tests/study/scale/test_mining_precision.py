"""``[adapt].mining_precision``: the hard-negative miner's encoder at a reduced precision, as a
named option. fp32 (the default) leaves the adaptation data's key and the runs' configuration as
they were; int8 mines with the same model quantized (the fast extra) and keys the data apart."""

from __future__ import annotations

import pytest

from adaptlab.errors import ConfigError
from adaptlab.models.inference import Inference, backend_installed, resolve_backend
from adaptlab.study import parse_adapt_section

MODELS = [{"name": "minilm", "ref": "minilm"}]
CORPUS = "synthetic:n_documents=20,seed=0"


def _settings(study_factory, tmp_path, **adapt):
    study = study_factory({"corpus": CORPUS, **adapt}, models=MODELS)
    return study, parse_adapt_section(study, store=tmp_path)


def test_fp32_is_the_default_and_changes_no_key(study_factory, tmp_path):
    _, default = _settings(study_factory, tmp_path)
    _, explicit = _settings(study_factory, tmp_path, mining_precision="fp32")
    assert default.mining_precision == "fp32" and default.mining_inference().is_default
    assert default.data_key() == explicit.data_key()
    assert "mining_precision" not in default.as_dict()  # the runs' config of a fp32 study is unchanged


def test_a_bad_value_is_one_line_naming_the_key(study_factory, tmp_path):
    with pytest.raises(ConfigError, match=r"\[adapt\]\.mining_precision: expected one of 'fp32', 'int8', got 'int4'"):
        _settings(study_factory, tmp_path, mining_precision="int4")


def test_int8_without_the_fast_extra_is_refused_before_any_work(study_factory, tmp_path, monkeypatch):
    from test_extras import _missing  # the suite's missing-extra helper

    _missing(monkeypatch, "optimum", "onnxruntime", "openvino")
    with pytest.raises(ConfigError) as caught:
        _settings(study_factory, tmp_path, mining_precision="int8")
    message = str(caught.value)
    assert "\n" not in message and "[adapt].mining_precision: " in message
    assert "need the fast extra: pip install 'adaptlab[fast]'" in message


def test_int8_mines_on_the_fastest_int8_backend_and_keys_the_data_apart(study_factory, tmp_path):
    if not backend_installed(resolve_backend("int8")):
        pytest.skip("no int8 backend installed (pip install 'adaptlab[fast]')")
    from adaptlab.study.inputs import model_embedder

    study, fp32 = _settings(study_factory, tmp_path)
    _, int8 = _settings(study_factory, tmp_path, mining_precision="int8")
    assert int8.mining_inference() == Inference(resolve_backend("int8"), "int8")
    assert int8.data_key() != fp32.data_key() and int8.as_dict()["mining_precision"] == "int8"
    miner = model_embedder(int8.base_section, study, None, inference=int8.mining_inference())
    exact = model_embedder(fp32.base_section, study, None, inference=fp32.mining_inference())
    assert miner.options["precision"] == "int8" and "precision" not in exact.options
    texts = ["a chunk of text"]
    assert miner.cache_key(texts, "document") != exact.cache_key(texts, "document")


def test_the_adaptation_mines_with_the_chosen_encoder(study_factory, tmp_path, monkeypatch):
    """The study's preparation hands the miner the int8 encoder (and names it in the triplets'
    provenance); the fp32 default hands it torch fp32, as before the option existed."""
    from adaptlab.study import adaptation

    seen = []

    def capture(documents, tokenizer, generator, embed, settings, *, out_dir, base_model):
        seen.append((dict(embed.options), base_model))
        raise RuntimeError("stop after the hand-over")

    monkeypatch.setattr(adaptation, "prepare_adaptation_data", capture)
    monkeypatch.setattr(adaptation, "_tokenizer", lambda ref: None)
    study, fp32 = _settings(study_factory, tmp_path)
    with pytest.raises(RuntimeError, match="hand-over"):
        adaptation._prepare(study, fp32, None)
    options, miner = seen[-1]
    assert miner == "minilm" and "precision" not in options and "embedding_backend" not in options  # torch fp32
    if backend_installed(resolve_backend("int8")):
        _, int8 = _settings(study_factory, tmp_path, mining_precision="int8")
        with pytest.raises(RuntimeError, match="hand-over"):
            adaptation._prepare(study, int8, None)
        backend = resolve_backend("int8")
        assert seen[-1][0]["embedding_backend"] == backend and seen[-1][0]["precision"] == "int8"
        assert seen[-1][1] == f"minilm ({backend} int8)"
