"""Embedding backends and precisions (adaptlab.models.inference, issue 32): the exact path (fp32 on
any backend) gives torch's vectors, reduced precision (bf16, int8) differs a little and is named so,
exports are made once from the local folder and cached, and settings are validated."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.models.inference import SUPPORTED, Inference, check_native, export_folder, precision_name
from adaptlab.runtime import hardware
from adaptlab.runtime.hardware import bf16_support

TEXTS = [
    "the cat sat on the mat",
    "a quick brown fox jumps over the lazy dog " * 4,
    "x",
    "proteins fold into shapes that decide what they do",
    "retrieval with dense vectors",
]


def _available(backend: str) -> bool:
    module = {"onnx": "onnxruntime", "openvino": "openvino", "torch": "torch"}[backend]
    return importlib.util.find_spec(module) is not None and (
        backend == "torch" or importlib.util.find_spec("optimum") is not None
    )


_SLOW = {("onnx", "fp32"), ("openvino", "fp32")}  # the exports (and OpenVINO's import): 10-30 s under load
COMBOS = [
    pytest.param(b, p, marks=[pytest.mark.slow] if (b, p) in _SLOW else [])
    for b, ps in SUPPORTED.items()
    for p in ps
    if (b, p) != ("torch", "fp32")
]


def test_settings_are_validated_with_the_valid_values():
    with pytest.raises(ConfigError, match="embedding backend 'tpu': expected one of auto, torch, onnx, openvino"):
        Inference("tpu")
    with pytest.raises(ConfigError, match="precision 'fp16': expected one of fp32, bf16, int8"):
        Inference("torch", "fp16")
    with pytest.raises(
        ConfigError,
        match="'int8' is not available on the 'torch' embedding backend; available: "
        "torch: fp32, bf16; onnx: fp32, int8; openvino: fp32, bf16, int8",
    ):
        Inference("torch", "int8")
    assert Inference().options() == {} and Inference().is_default
    assert Inference("onnx").options() == {"embedding_backend": "onnx", "precision": "fp32"}
    assert Inference.of({"embedding_backend": "", "precision": "bf16"}) == Inference("torch", "bf16")


def test_reduced_precision_shows_in_the_name():
    assert precision_name("minilm", "bf16") == "minilm-bf16"
    assert precision_name("minilm", "int8") == "minilm-int8"
    assert precision_name("minilm-INT8-fast", "int8") == "minilm-INT8-fast"
    assert precision_name("minilm", "fp32") == "minilm"


def test_export_folders_are_keyed_by_backend_precision_and_revision(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path))
    a = export_folder(Inference("onnx"), "sha256:aa")
    assert a.parent == tmp_path / "exported" and a.name.startswith("onnx-")
    assert (
        len(
            {
                a,
                export_folder(Inference("onnx", "int8"), "sha256:aa"),
                export_folder(Inference("openvino"), "sha256:aa"),
                export_folder(Inference("onnx"), "sha256:bb"),
                export_folder(Inference("openvino", "int8"), "sha256:aa"),
            }
        )
        == 5
    )
    # an int8 OpenVINO export is also keyed by its calibration text
    calibrated = export_folder(Inference("openvino", "int8"), "sha256:aa")
    monkeypatch.setattr("adaptlab.models.inference.CALIBRATION_TEXTS", 64)
    assert export_folder(Inference("openvino", "int8"), "sha256:aa") != calibrated
    # bf16 on OpenVINO is a runtime hint on the same exported graph
    assert export_folder(Inference("openvino", "bf16"), "sha256:aa") == export_folder(
        Inference("openvino"), "sha256:aa"
    )


@pytest.fixture(scope="module")
def torch_vectors(tiny_model):
    from adaptlab.models import load_encoder

    return load_encoder(str(tiny_model), device="cpu").encode_documents(TEXTS)


@pytest.mark.parametrize("backend, precision", COMBOS)
def test_every_backend_and_precision_gives_unit_float32_vectors(
    tiny_model, module_cache_home, torch_vectors, backend, precision, capfd
):
    if not _available(backend):
        pytest.skip(f"{backend} is not installed (pip install 'adaptlab[fast]')")
    from adaptlab.models import load_encoder

    if precision == "bf16" and not bf16_support("cpu").native:  # this CPU: refused, never fp32 under a bf16 name
        with pytest.raises(ConfigError, match="so it would not compute bfloat16"):
            load_encoder(str(tiny_model), device="cpu", embedding_backend=backend, precision=precision)
        return
    enc = load_encoder(str(tiny_model), device="cpu", embedding_backend=backend, precision=precision)
    assert "Could not infer whether the model" not in capfd.readouterr().err  # Optimum's offline probe, silenced
    out = enc.encode_documents(TEXTS)
    assert out.dtype == np.float32 and np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert enc.provenance()["options"] == {"embedding_backend": backend, "precision": precision}
    assert enc.path == tiny_model  # provenance names the model folder, not the export
    diff = float(np.abs(out - torch_vectors).max())
    cosine = float((out * torch_vectors).sum(axis=1).min())
    if precision == "fp32":  # the exact path
        assert diff < 1e-5, diff
    else:  # reduced: close, but not the same vectors
        assert 1e-6 < diff < 0.05 and cosine > 0.99, (diff, cosine)


AVX2_ONLY = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})


@pytest.mark.parametrize("backend", ["torch", "openvino"])
def test_bf16_is_refused_on_a_cpu_without_native_bfloat16(tiny_model, monkeypatch, backend):
    """On an AVX2-only CPU, OpenVINO's bf16 hint computes fp32: the request is refused in one line
    naming what is missing, before any model loads (nothing is stored under a -bf16 name)."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2_ONLY)
    from adaptlab.models import load_encoder

    with pytest.raises(ConfigError) as caught:
        load_encoder(str(tiny_model), device="cpu", embedding_backend=backend, precision="bf16")
    message = str(caught.value)
    assert "\n" not in message and "lacks AVX512-BF16 and AMX-BF16 (it has avx2)" in message, message
    check_native(Inference("openvino", "int8"), "cpu")  # int8 is int8 arithmetic on AVX2: allowed
    check_native(Inference(backend), "cpu")


def test_bf16_is_allowed_where_the_cpu_computes_it(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2_ONLY | {"avx512f", "avx512_bf16"})
    check_native(Inference("openvino", "bf16"), "cpu")
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2_ONLY | {"amx_bf16", "amx_tile"})
    check_native(Inference("torch", "bf16"), "cpu")


def test_an_export_is_made_once_and_reused(tiny_model, module_cache_home, monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("optimum.onnxruntime")
    from adaptlab.models import inference, load_encoder

    load_encoder(str(tiny_model), device="cpu", embedding_backend="onnx")  # exported here or by the test above
    folders = sorted(p.name for p in (module_cache_home / "exported").iterdir())
    assert any(f.startswith("onnx-") for f in folders) and not any(f.startswith(".") for f in folders)

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(inference, "_export", no_export)
    enc = load_encoder(str(tiny_model), device="cpu", embedding_backend="onnx")
    assert enc.encode_queries(["a question"]).shape == (1, enc.dim)


def test_a_missing_backend_package_is_one_clear_error(monkeypatch):
    from adaptlab.models import inference

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("optimum") else real(name, *a)
    )
    with pytest.raises(
        ConfigError,
        match=r"^ONNX embedding backends need the fast extra: pip install "
        r"'adaptlab\[fast\]' \(optimum.onnxruntime is not installed\)$",
    ):
        inference.require_backend("onnx")


# ----------------------------------------------------------------------------- backend = "auto"


def _hide_fast_extra(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    from test_extras import _missing  # the suite's missing-extra helper (tests/test_extras.py)

    _missing(monkeypatch, *(modules or ("optimum", "onnxruntime", "openvino")))


def test_auto_is_torch_without_the_fast_extra(monkeypatch):
    """Without the extra, "auto" is torch fp32 itself: no encoder options, so the cache keys of
    embeddings made on torch stay the same; a reduced precision only the extra offers names it."""
    from adaptlab.models import inference

    _hide_fast_extra(monkeypatch)
    assert Inference("auto") == Inference("torch") and Inference("auto").options() == {}
    assert Inference.of({"embedding_backend": "auto"}).is_default
    assert Inference("auto", "bf16").backend == "torch"
    int8 = Inference("auto", "int8").backend  # the first that would offer int8 here: its load names the extra
    assert int8 == inference.auto_order("int8")[0]
    with pytest.raises(ConfigError, match=r"embedding backends need the fast extra: pip install 'adaptlab\[fast\]'"):
        inference.require_backend(int8)


def test_auto_is_the_fastest_exact_backend_installed(monkeypatch):
    """With the extra, "auto" is OpenVINO at fp32, recorded under its own name in the encoder
    options (the cache key); without OpenVINO it is torch (ONNX Runtime's fp32 was slower)."""
    from adaptlab.models.inference import auto_order, backend_installed

    if not backend_installed("openvino"):
        pytest.skip("OpenVINO is not installed (pip install 'adaptlab[fast]')")
    assert auto_order("fp32") == ("openvino", "torch", "onnx")
    assert Inference("auto") == Inference("openvino")
    assert Inference("auto").options() == {"embedding_backend": "openvino", "precision": "fp32"}
    _hide_fast_extra(monkeypatch, "openvino", "optimum.intel")
    assert Inference("auto").backend == "torch"


def test_auto_int8_follows_the_cpu(monkeypatch):
    """int8: OpenVINO's static quantization where the CPU has VNNI, ONNX Runtime's dynamic one on
    AVX2 alone (where OpenVINO's int8 was no faster than torch fp32)."""
    from adaptlab.models.inference import auto_order

    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2_ONLY)
    assert auto_order("int8") == ("onnx", "openvino")
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2_ONLY | {"avx512f", "avx512_vnni"})
    assert auto_order("int8") == ("openvino", "onnx")
    monkeypatch.setattr(hardware, "cpu_flags", lambda: AVX2_ONLY | {"avx_vnni"})
    assert auto_order("int8")[0] == "openvino" and auto_order("bf16") == ("openvino", "torch")


def _ndcg10(q: np.ndarray, d: np.ndarray, qrels: dict[str, dict[str, int]]) -> np.ndarray:
    from adaptlab.metrics import evaluate

    scores = q @ d.T
    run = {f"q{i}": {f"d{j}": float(s) for j, s in enumerate(row)} for i, row in enumerate(scores)}
    return evaluate(qrels, run, ["ndcg@10"]).values["ndcg@10"]


def test_auto_gives_torch_fp32_metrics_and_says_which_backend_ran(tiny_model, module_cache_home, torch_vectors):
    """The exact fast path: whatever "auto" resolves to here, nDCG@10 on a small retrieval equals
    torch fp32's within 1e-4 and the encoder's provenance names the backend that computed."""
    from adaptlab.models import load_encoder
    from adaptlab.models.inference import resolve_backend

    rng = np.random.default_rng(0)
    words = "cell protein gene tumor blood liver virus drug dose trial network query corpus model data".split()
    docs = [" ".join(rng.choice(words, size=12)) for _ in range(40)]
    queries = [" ".join(d.split()[:4]) for d in docs[:15]]
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(15)}
    torch_enc = load_encoder(str(tiny_model), device="cpu")
    auto_enc = load_encoder(str(tiny_model), device="cpu", embedding_backend="auto")
    backend = resolve_backend("fp32")
    assert auto_enc.provenance()["options"] == (
        {} if backend == "torch" else {"embedding_backend": backend, "precision": "fp32"}
    )
    want = _ndcg10(torch_enc.encode_queries(queries), torch_enc.encode_documents(docs), qrels)
    got = _ndcg10(auto_enc.encode_queries(queries), auto_enc.encode_documents(docs), qrels)
    assert 0.0 < want.mean() < 1.0  # a retrieval with something to get wrong
    assert np.abs(got - want).max() <= 1e-4, (backend, got, want)
