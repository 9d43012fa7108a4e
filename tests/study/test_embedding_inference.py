"""The study keys of issue 32's faster embedding: ``[embedding].backend`` / ``precision`` and each
``[[models]]`` entry's ``embedding_backend`` / ``precision`` are validated with the file and key,
reach the encoder, keep retrieval metrics exact on the fp32 path, name reduced-precision systems,
and are part of the embedding cache key."""

from __future__ import annotations

import pytest

from adaptlab import load_study
from adaptlab.errors import ConfigError
from adaptlab.models import inference

BASE = (
    '[study]\nname = "x"\nstore = ""\n[[datasets]]\nspec = "synthetic:n_documents=5,seed=0"\n'
    '[[models]]\nref = "minilm"\n'
)


def _load(tmp_path, text):
    path = tmp_path / "study.toml"
    path.write_text(text)
    return load_study(path)


@pytest.mark.parametrize(
    "extra, needle",
    [
        (
            '[embedding]\nbackend = "tpu"\n',
            "[embedding].backend: expected one of 'auto', 'torch', 'onnx', 'openvino', got 'tpu'",
        ),
        (
            '[embedding]\nprecision = "fp16"\n',
            "[embedding].precision: expected one of 'fp32', 'bf16', 'int8', got 'fp16'",
        ),
        (
            '[embedding]\nprecision = "int8"\n',
            "[embedding]: precision 'int8' is not available on the 'torch' embedding "
            "backend; available: torch: fp32, bf16; onnx: fp32, int8; "
            "openvino: fp32, bf16, int8",
        ),
    ],
)
def test_embedding_keys_fail_at_load_naming_file_and_key(tmp_path, extra, needle):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, BASE + extra)
    assert str(tmp_path / "study.toml") in str(err.value) and needle in str(err.value)


def test_an_entry_key_names_the_entry(tmp_path):
    with pytest.raises(ConfigError, match=r"models\[0\]\.precision: expected one of '', 'fp32', 'bf16', 'int8'"):
        _load(tmp_path, BASE + 'precision = "half"\n')
    with pytest.raises(
        ConfigError,
        match=r"models\[0\]: precision 'bf16' is not available on the 'onnx'.*"
        r"the entry's keys, else \[embedding\]'s",
    ):
        _load(tmp_path, BASE + 'embedding_backend = "onnx"\n[embedding]\nprecision = "bf16"\n')


def test_reduced_precision_systems_are_named_with_it(tmp_path):
    study = _load(
        tmp_path,
        BASE + '[[models]]\nname = "fast-int8"\nref = "minilm"\nembedding_backend = "onnx"\n'
        'precision = "int8"\n[[models]]\nname = "exact-onnx"\nref = "minilm"\nembedding_backend = "onnx"\n'
        'precision = "fp32"\n[[models]]\nname = "ov"\nref = "minilm"\nembedding_backend = "openvino"\n'
        'precision = "int8"\n[embedding]\nprecision = "bf16"\n[evaluation]\nbaseline = "minilm"\n',
    )
    assert [m.name for m in study.models] == ["minilm-bf16", "fast-int8", "exact-onnx", "ov-int8"]
    assert study.evaluation.baseline == "minilm-bf16"  # the baseline follows its entry
    assert [study.inference(m).options() for m in study.models] == [
        {"embedding_backend": "torch", "precision": "bf16"},
        {"embedding_backend": "onnx", "precision": "int8"},
        {"embedding_backend": "onnx", "precision": "fp32"},
        {"embedding_backend": "openvino", "precision": "int8"},
    ]
    assert [m.name for m in study.with_overrides(models=["minilm"]).models] == ["minilm-bf16"]
    with pytest.raises(ConfigError, match="two entries are named 'minilm-bf16' once reduced precisions are shown"):
        _load(tmp_path, BASE + '[[models]]\nname = "minilm-bf16"\nref = "minilm"\n[embedding]\nprecision = "bf16"\n')


def test_a_model_of_another_kind_refuses_a_backend_before_any_work(tmp_path):
    from adaptlab.study.inputs import check_inputs

    lexical = _load(
        tmp_path, BASE + '[[models]]\nref = "bm25"\n[[models]]\nref = "hash:16"\n[embedding]\nprecision = "bf16"\n'
    )  # [embedding]'s settings are for sentence-transformers models
    assert [m.name for m in lexical.models] == ["minilm-bf16", "bm25", "16"]
    study = _load(tmp_path, BASE.replace('ref = "minilm"', 'ref = "hash:16"\nembedding_backend = "onnx"'))
    with pytest.raises(
        ConfigError,
        match=r"entry 1 \('16'\): embedding_backend 'onnx' and precision 'fp32' apply to "
        r"sentence-transformers models; this is a 'hash' model",
    ):
        check_inputs(study)


def _reduced() -> tuple[str, str]:
    """The reduced precision this CPU computes natively: torch bf16 with AVX512-BF16 or AMX, else
    ONNX Runtime's int8 (bf16 is refused where it would be emulated)."""
    from adaptlab.runtime.hardware import bf16_support

    return ("torch", "bf16") if bf16_support("cpu").native else ("onnx", "int8")


def _study_text(model, cache) -> str:
    backend, precision = _reduced()
    return STUDY.format(model=model, cache=cache, reduced_backend=backend, reduced=precision)


STUDY = """
[study]
name = "inference"
store = ""
[[datasets]]
name = "synthetic"
spec = "synthetic:n_documents=4,seed=3"
[[models]]
name = "tiny"
ref = "{model}"
[[models]]
name = "tiny-onnx"
ref = "{model}"
embedding_backend = "onnx"
[[models]]
name = "tiny-reduced"
ref = "{model}"
embedding_backend = "{reduced_backend}"
precision = "{reduced}"
[evaluation]
metrics = ["acc@1", "ndcg@10", "mrr@10", "recall@100"]
baseline = "tiny"
[bootstrap]
n_resamples = 200
[embedding]
use_ray = false
cache = "{cache}"
"""


@pytest.mark.slow  # the tiny model's ONNX export and three systems: ~4 s quiet, 12 s at load 8
def test_each_key_reaches_the_encoder_and_fp32_onnx_keeps_the_metrics(
    tiny_model, module_cache_home, tmp_path, monkeypatch
):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("optimum.onnxruntime")
    from adaptlab.models import sbert
    from adaptlab.study import run_study

    seen = []
    real = inference.load_sentence_transformer

    def spy(source, setting, **kwargs):
        seen.append((setting.backend, setting.precision))
        return real(source, setting, **kwargs)

    monkeypatch.setattr(sbert, "load_sentence_transformer", spy)  # where the encoder calls it
    reduced = _reduced()
    study = _load(tmp_path, _study_text(tiny_model, tmp_path / "cache"))
    assert [m.name for m in study.models] == ["tiny", "tiny-onnx", f"tiny-reduced-{reduced[1]}"]
    outcome = run_study(study)
    assert seen == [("torch", "fp32"), ("onnx", "fp32"), reduced]
    summary = outcome.datasets[0].summary
    for measure in summary.measures:  # the exact path: every metric within 1e-4 of torch's
        exact, onnx = summary.systems["tiny"][measure].value, summary.systems["tiny-onnx"][measure].value
        assert abs(exact - onnx) <= 1e-4, (measure, exact, onnx)
    compared = {(p.a, p.b) for p in summary.pairs}
    assert (f"tiny-reduced-{reduced[1]}", "tiny") in compared  # reduced precision: a named system with paired tests


def test_changing_backend_or_precision_misses_the_embedding_cache(tiny_model, module_cache_home, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("optimum.onnxruntime")
    from adaptlab.study.inputs import embedding_cache, model_embedder

    study = _load(tmp_path, _study_text(tiny_model, tmp_path / "cache"))
    cache = embedding_cache(study)
    texts = ["one document", "another document about proteins"]
    base = model_embedder(study.models[0], study, cache)
    base(texts, "document")
    assert base.from_cache == 0
    for section in study.models[1:]:  # another backend, another precision: a miss each
        other = model_embedder(section, study, cache)
        other(texts, "document")
        assert other.from_cache == 0, section.name
    again = model_embedder(study.models[0], study, cache)
    again(texts, "document")
    assert again.from_cache == len(texts)
    exact = model_embedder(study.models[2], study, cache, exact=True)  # the mining embedder: torch fp32
    assert exact.cache_key(texts, "document") == base.cache_key(texts, "document")


AUTO_STUDY = """
[study]
name = "auto"
store = "{store}"
[[datasets]]
name = "synthetic"
spec = "synthetic:n_documents=4,seed=3"
[[models]]
name = "tiny"
ref = "{model}"
[[models]]
name = "tiny-torch"
ref = "{model}"
embedding_backend = "torch"
[evaluation]
metrics = ["acc@1", "ndcg@10", "mrr@10"]
baseline = "tiny-torch"
[bootstrap]
n_resamples = 200
[embedding]
backend = "auto"
use_ray = false
cache = "{cache}"
"""


def test_auto_without_the_fast_extra_is_torch_with_torch_cache_keys(tiny_model, tmp_path, monkeypatch):
    """The fast extra missing (simulated with the suite's helper): "auto" is torch fp32, the same
    system name and the same cache key as torch's, so nothing is embedded twice."""
    from adaptlab.study.inputs import embedding_cache, model_embedder
    from test_extras import _missing

    _missing(monkeypatch, "optimum", "onnxruntime", "openvino")
    study = _load(tmp_path, AUTO_STUDY.format(model=tiny_model, cache=tmp_path / "cache", store=""))
    auto, torch = study.models
    assert auto.name == "tiny" and study.inference(auto) == inference.Inference("torch")
    cache = embedding_cache(study)
    texts = ["one document", "another document about proteins"]
    assert model_embedder(auto, study, cache).cache_key(texts, "document") == model_embedder(
        torch, study, cache
    ).cache_key(texts, "document")


def test_auto_runs_the_fastest_exact_backend_records_it_and_keeps_the_metrics(tiny_model, module_cache_home, tmp_path):
    """With the fast extra, "auto" embeds on OpenVINO fp32: its own cache key, every metric within
    1e-4 of torch fp32, and each run's config names the backend that computed its vectors."""
    if not inference.backend_installed("openvino"):
        pytest.skip("OpenVINO is not installed (pip install 'adaptlab[fast]')")
    import json

    from adaptlab import results
    from adaptlab.study import run_study

    store = tmp_path / "store"
    study = _load(tmp_path, AUTO_STUDY.format(model=tiny_model, cache=tmp_path / "cache", store=store))
    assert study.inference(study.models[0]) == inference.Inference("openvino")
    outcome = run_study(study)
    summary = outcome.datasets[0].summary
    for measure in summary.measures:
        exact, auto = summary.systems["tiny-torch"][measure].value, summary.systems["tiny"][measure].value
        assert abs(exact - auto) <= 1e-4, (measure, exact, auto)
    configs = {r["system"]: json.loads(r["config"]) for r in results.open(store).runs().to_pylist()}
    assert {s: c["embedding_backends"][s] for s, c in configs.items()} == {
        "tiny": "openvino fp32",
        "tiny-torch": "torch fp32",
    }


def test_a_study_on_torch_alone_records_no_backend(tiny_model, tmp_path):
    """No "auto" and nothing but torch fp32: the runs' configuration is what it was before
    backends were recorded (so are the run ids keyed on it)."""
    from adaptlab.study.inputs import embedding_backends, embedding_cache, model_embedder

    text = AUTO_STUDY.format(model=tiny_model, cache=tmp_path / "cache", store="").replace('backend = "auto"\n', "")
    study = _load(tmp_path, text)
    cache = embedding_cache(study)
    assert embedding_backends(study, {m.name: model_embedder(m, study, cache) for m in study.models}) == {}
