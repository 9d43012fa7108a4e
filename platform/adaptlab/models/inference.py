"""How a sentence-transformers model runs on the CPU: its inference backend and numeric precision.

The backends are sentence-transformers' own (``SentenceTransformer(..., backend=...)``):

- ``"torch"``: PyTorch (the default);
- ``"onnx"``: ONNX Runtime through Optimum (``pip install "adaptlab[fast]"``);
- ``"openvino"``: OpenVINO through optimum-intel (the same extra);
- ``"auto"``: a setting, not a backend: the first backend of :func:`auto_order` that offers the
  precision and whose packages are installed (:func:`resolve_backend`), so fp32 runs on OpenVINO
  with the fast extra and on torch without it. It is resolved when an :class:`Inference` is made, so the
  cache keys, export folders and provenance always name the backend that computed the vectors.

The precisions:

- ``"fp32"``: the exact path, on any backend. Embeddings agree with torch's to ~1e-7 and
  retrieval metrics to 1e-4 (tests/models/test_inference.py, benchmarks/bench_backends.py). OpenVINO
  runs with ``INFERENCE_PRECISION_HINT = "f32"``: its CPU plugin would otherwise compute in bf16 on
  CPUs with AMX or AVX512-BF16, a reduced precision under an exact name.
- ``"bf16"`` (torch, openvino): weights and activations in bfloat16 (8-bit mantissa), fast on
  CPUs with AVX512-BF16 or AMX; torch converts the model with ``model.to(torch.bfloat16)``.
- ``"int8"`` (onnx): dynamic quantization (Jacob et al., "Quantization and Training of Neural
  Networks for Efficient Integer-Arithmetic-Only Inference", CVPR 2018, sec. 2): int8 weights
  per channel, activations quantized per call from their observed range, through ONNX Runtime's
  ``quantize_dynamic`` with Optimum's :data:`QUANTIZATION` preset.
- ``"int8"`` (openvino): static quantization (Jacob et al. 2018, sec. 2 and 3): int8 weights and
  activations, each activation's scale fixed once from its range on calibration text, through
  NNCF's ``nncf.quantize`` for transformers (OpenVINO's own post-training quantizer; the
  operations it leaves in float run in f32). The calibration text is generated prose
  (:mod:`adaptlab.models.calibration`), the same on every node and for every corpus.

The embeddings leave every path as float32 and the :class:`~adaptlab.models.base.Encoder`
L2-normalises them in float32. Reduced precision (bf16, int8) changes the vectors, so it is never
a silent substitute: the study layer names such a system with its precision
(:func:`precision_name`) and the embedding cache key carries backend and precision
(:meth:`Inference.options`).

ONNX and OpenVINO models are exported once from the local model folder (never from a hub) into
``cache_home()/exported/<backend>[-int8]-<revision>`` (:func:`adaptlab.storage.env.cache_home`),
written under a temporary name and published by rename, and loaded from there afterwards.
Thread counts follow torch's (``torch.get_num_threads()``, which the Ray actor sets from the CPUs
it declares), so a backend never takes more cores than its actor was given.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError, extra_installed, missing_extra
from adaptlab.models.calibration import calibration_texts
from adaptlab.runtime import hardware
from adaptlab.runtime.hardware import bf16_support
from adaptlab.storage.env import cache_home

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "AUTO",
    "auto_order",
    "BACKEND_SETTINGS",
    "DEFAULT_BACKEND",
    "EMBEDDING_BACKENDS",
    "EXACT_PRECISION",
    "PRECISIONS",
    "QUANTIZATION",
    "SUPPORTED",
    "Inference",
    "backend_installed",
    "check_native",
    "load_sentence_transformer",
    "precision_name",
    "require_backend",
    "resolve_backend",
    "resolved_options",
]

EMBEDDING_BACKENDS = ("torch", "onnx", "openvino")
"""sentence-transformers' inference backends."""
AUTO = "auto"
BACKEND_SETTINGS = (AUTO, *EMBEDDING_BACKENDS)
"""What a study file or ``load_encoder``'s ``embedding_backend`` may say."""
EXACT_ORDER = ("openvino", "torch", "onnx")
"""``"auto"``'s preference at fp32 (and bf16), fastest first on the CPUs measured
(docs/performance.md): OpenVINO fp32 1.0-1.3x torch's speed with torch's metrics; ONNX Runtime's
fp32 graph was slower than torch (0.7-1.0x), and torch is always installed, so it is never picked."""
INT8_ORDER_VNNI = ("openvino", "onnx")
"""At int8 on a CPU with VNNI (AVX512-VNNI or AVX-VNNI): OpenVINO's static int8 (3.1x torch fp32
on AVX-512 with VNNI) before ONNX Runtime's dynamic int8."""
INT8_ORDER = ("onnx", "openvino")
"""At int8 without VNNI (AVX2 only): ONNX Runtime's dynamic int8 (1.5-1.7x torch fp32) before
OpenVINO's static int8, which ran at or below torch fp32's speed there."""
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})
_BACKEND_MODULES = {"onnx": ("optimum.onnxruntime", "onnxruntime"), "openvino": ("optimum.intel", "openvino")}
"""The packages each non-torch backend needs (the ``fast`` extra)."""
PRECISIONS = ("fp32", "bf16", "int8")
"""Numeric precisions; only fp32 is exact."""
DEFAULT_BACKEND = "torch"
EXACT_PRECISION = "fp32"
SUPPORTED = {
    "torch": ("fp32", "bf16"),
    "onnx": ("fp32", "int8"),
    "openvino": ("fp32", "bf16", "int8"),
}
"""The precisions each backend offers here."""
QUANTIZATION = "avx512_vnni"
"""Optimum's dynamic-quantization preset for ``onnx`` int8 (unsigned 8-bit activations, signed
per-channel weights, no reduced range). One fixed preset, so int8 vectors do not depend on the CPU
that first exported the model; ONNX Runtime runs it on any x86-64 CPU (fastest with VNNI)."""
ONNX_LEVEL = "O2"
"""Optimum's offline graph optimisation of every ONNX export: O2 fuses attention, LayerNorm, GELU
and the bias additions (exact GELU; O3 would approximate it): the same function in fewer, larger
kernels (embeddings within ~1e-6 of torch's, benchmarks/bench_backends.py). int8 quantizes the plain
graph, which ONNX Runtime's quantizer reads (it cannot read the fused contrib operators)."""
CALIBRATION_TEXTS = 256
"""How many generated paragraphs calibrate an OpenVINO int8 model (each up to the model's
max_seq_length tokens)."""
OPTIONS = ("embedding_backend", "precision")
"""The encoder option names (load_encoder keywords and the embedding cache's options)."""
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inference:
    """A backend and a precision, validated: ``Inference("onnx", "int8")``; ``Inference("auto")``
    holds the backend ``"auto"`` resolves to here (:func:`resolve_backend`).

    >>> Inference("onnx", "int8").options()
    {'embedding_backend': 'onnx', 'precision': 'int8'}
    >>> Inference().options(), Inference("openvino").exact
    ({}, True)
    """

    backend: str = DEFAULT_BACKEND
    precision: str = EXACT_PRECISION

    def __post_init__(self) -> None:
        if self.backend not in BACKEND_SETTINGS:
            raise ConfigError(f"embedding backend {self.backend!r}: expected one of {', '.join(BACKEND_SETTINGS)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}")
        if self.backend == AUTO:  # the backend that will compute, never "auto", in keys and provenance
            object.__setattr__(self, "backend", resolve_backend(self.precision))
        if self.precision not in SUPPORTED[self.backend]:
            offers = "; ".join(f"{b}: {', '.join(p)}" for b, p in SUPPORTED.items())
            raise ConfigError(
                f"precision {self.precision!r} is not available on the {self.backend!r} embedding "
                f"backend; available: {offers}"
            )

    @property
    def exact(self) -> bool:
        """fp32: the same vectors as torch's up to float rounding."""
        return self.precision == EXACT_PRECISION

    @property
    def is_default(self) -> bool:
        return self.backend == DEFAULT_BACKEND and self.exact

    def options(self) -> dict[str, str]:
        """The encoder options for this setting: none for torch fp32 (so the cache keys of
        embeddings made before these options existed stay valid), else both."""
        return {} if self.is_default else {"embedding_backend": self.backend, "precision": self.precision}

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Inference:
        """The setting given by ``embedding_backend`` / ``precision`` in encoder ``options``;
        missing or empty values take the defaults."""
        return cls(
            str(options.get("embedding_backend") or DEFAULT_BACKEND), str(options.get("precision") or EXACT_PRECISION)
        )


def resolved_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` whose ``embedding_backend`` is ``"auto"`` with it and ``precision`` replaced by
    what they resolve to (:meth:`Inference.of`, :meth:`Inference.options`): the backend that
    computes, or no key at all for torch fp32 (the key of embeddings made before ``"auto"``
    existed). Other options are returned as they are. Cache keys and provenance are made from
    these, so they never say ``"auto"``.

    >>> resolved_options({"embedding_backend": "torch", "max_seq_length": 64})
    {'embedding_backend': 'torch', 'max_seq_length': 64}
    """
    if options.get("embedding_backend") != AUTO:
        return dict(options)
    rest = {k: v for k, v in options.items() if k not in OPTIONS}
    return {**rest, **Inference.of(options).options()}


def backend_installed(backend: str) -> bool:
    """Whether ``backend``'s packages can be found (nothing is imported; torch always can)."""
    return all(extra_installed(m) for m in _BACKEND_MODULES.get(backend, ()))


def auto_order(precision: str = EXACT_PRECISION) -> tuple[str, ...]:
    """``"auto"``'s backends at ``precision``, fastest first on this CPU: :data:`INT8_ORDER_VNNI`
    or :data:`INT8_ORDER` at int8 (by the CPU's flags, :func:`adaptlab.runtime.hardware.cpu_flags`),
    else :data:`EXACT_ORDER`; only those that offer the precision."""
    order: tuple[str, ...]
    if precision == "int8":
        order = INT8_ORDER_VNNI if hardware.cpu_flags() & VNNI_FLAGS else INT8_ORDER
    else:
        order = EXACT_ORDER
    return tuple(b for b in order if precision in SUPPORTED[b])


def resolve_backend(precision: str = EXACT_PRECISION) -> str:
    """The backend ``"auto"`` stands for at ``precision``: the first of :func:`auto_order` that
    is installed; when none is (int8 without the fast extra), the first, whose load then names the
    extra to install.

    At fp32 every backend is exact (retrieval metrics equal to torch fp32's within 1e-4,
    ``benchmarks/bench_backends.py``), so ``"auto"`` changes the speed, not the results.

    >>> resolve_backend("bf16") in ("openvino", "torch")
    True
    """
    order = auto_order(precision)
    return next((b for b in order if backend_installed(b)), order[0])


def precision_name(name: str, precision: str) -> str:
    """A system name that shows a reduced precision: ``name`` when it contains it (or the precision
    is fp32), else ``f"{name}-{precision}"``.

    >>> precision_name("minilm", "bf16"), precision_name("minilm-int8-onnx", "int8"), precision_name("m", "fp32")
    ('minilm-bf16', 'minilm-int8-onnx', 'm')
    """
    if precision == EXACT_PRECISION or precision in name.lower():
        return name
    return f"{name}-{precision}"


def load_sentence_transformer(
    source: str | Path, inference: Inference, *, revision: Callable[[], str], device: str, **kwargs: Any
) -> SentenceTransformer:
    """A ``SentenceTransformer`` of ``source`` (a model folder, or a hub id on torch) running with
    ``inference``; ``kwargs`` go to its constructor. ``revision()`` identifies the weights in the
    export cache (called only for onnx and openvino)."""
    from sentence_transformers import SentenceTransformer  # deferred: imports torch

    check_native(inference, device)
    if inference.backend == "torch":
        model = SentenceTransformer(str(source), device=device, **kwargs)
        if inference.precision == "bf16":
            import torch

            model.to(torch.bfloat16)
        return model
    require_backend(inference.backend)
    if not Path(source).is_dir():
        raise ConfigError(
            f"embedding backend {inference.backend!r} exports the model from its local folder; "
            f"{str(source)!r} is not one (download the model first)"
        )
    _quiet_export_probe()
    folder, file_name = _exported(source, inference, revision(), device, kwargs)
    model_kwargs = {**(kwargs.pop("model_kwargs", None) or {}), **_runtime_kwargs(inference, file_name)}
    model_kwargs.pop("use_safetensors", None)  # the exported folder holds no torch weights
    return SentenceTransformer(
        str(folder), device=device, backend=inference.backend, model_kwargs=model_kwargs, **kwargs
    )


def check_native(inference: Inference, device: str) -> None:
    """Refuse a reduced precision that ``device`` would not compute at that precision: bf16 needs
    AVX512-BF16 or AMX on a CPU (:func:`adaptlab.runtime.hardware.bf16_support`). Without them
    OpenVINO silently computes fp32 and torch emulates, so a system named ``-bf16`` would not be
    what its name says. int8 runs as int8 arithmetic on any x86-64 CPU (VNNI only makes it faster)."""
    if inference.precision != "bf16":
        return
    support = bf16_support(device)
    if not support.native:
        raise ConfigError(
            f"precision 'bf16' on the {inference.backend!r} embedding backend: {support.reason}, "
            "so it would not compute bfloat16; use precision = 'fp32' (exact) or 'int8'"
        )


def _drop_export_probe(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Could not infer whether the model was already converted")


def _quiet_export_probe() -> None:
    """Silence Optimum's warning that it could not look up a local folder in the hub cache.

    Offline (or with ``local_files_only``) Optimum looks for an exported model under the hub
    cache's layout, fails on a plain folder and warns, then loads the folder as told (the export
    decision sentence-transformers made stands). Every load of an exported model, in every actor,
    printed it."""
    for name in ("optimum.onnxruntime.modeling", "optimum.intel.openvino.modeling_base"):
        logger = logging.getLogger(name)
        if _drop_export_probe not in logger.filters:
            logger.addFilter(_drop_export_probe)


def require_backend(backend: str) -> None:
    """One line naming the fast extra when the backend's packages are missing
    (sentence-transformers raises a bare Exception)."""
    for module in _BACKEND_MODULES.get(backend, ()):
        if not extra_installed(module):
            raise missing_extra(
                f"{'ONNX' if backend == 'onnx' else 'OpenVINO'} embedding backends",
                "fast",
                f"{module} is not installed",
            )


def _threads() -> int:
    import torch

    return max(1, int(torch.get_num_threads()))


def _runtime_kwargs(inference: Inference, file_name: str) -> dict[str, Any]:
    """Thread count (torch's) and precision settings of the ONNX Runtime or OpenVINO session."""
    if inference.backend == "onnx":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = _threads()
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy waits on a shared CPU
        return {"file_name": file_name, "session_options": so, "provider": "CPUExecutionProvider"}
    hint = "bf16" if inference.precision == "bf16" else "f32"
    return {"ov_config": {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": str(_threads())}}


def export_folder(inference: Inference, revision: str) -> Path:
    """Where the export of a model revision for ``inference`` lives in the local cache."""
    kind = {
        ("onnx", "fp32"): f"onnx-{ONNX_LEVEL}",
        ("onnx", "int8"): "onnx-int8",
        ("openvino", "int8"): "openvino-int8",
    }.get((inference.backend, inference.precision), inference.backend)
    key = revision
    if (inference.backend, inference.precision) == ("openvino", "int8"):  # and the text it was calibrated on
        key += "\n" + _calibration_digest(CALIBRATION_TEXTS)
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return cache_home() / "exported" / f"{kind}-{digest}"


@functools.lru_cache(maxsize=4)
def _calibration_digest(n: int) -> str:
    """sha256 of the ``n`` calibration paragraphs: generated once per process, not on every load
    (~15 ms each)."""
    return hashlib.sha256("\n".join(calibration_texts(n)).encode()).hexdigest()


def _exported(
    source: str | Path, inference: Inference, revision: str, device: str, kwargs: Mapping[str, Any]
) -> tuple[Path, str]:
    """``(folder, file name)`` of the exported model, exporting it first when it is not cached."""
    folder = export_folder(inference, revision)
    if inference.backend == "openvino":
        file_name = "openvino/openvino_model.xml"
    elif inference.precision == "int8":
        file_name = f"onnx/model_qint8_{QUANTIZATION}.onnx"
    else:
        file_name = f"onnx/model_{ONNX_LEVEL}.onnx"
    if not (folder / file_name).is_file():
        _publish(folder, lambda tmp: _export(source, inference, revision, device, kwargs, tmp))
    return folder, file_name


def _publish(folder: Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` into a hidden sibling folder, then rename it to ``folder`` (a concurrent
    writer that published first wins; its copy is the same export)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(tmp)
        try:
            os.replace(tmp, folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _export(
    source: str | Path, inference: Inference, revision: str, device: str, kwargs: Mapping[str, Any], out: Path
) -> None:
    """Export ``source`` for the backend into ``out`` (int8: quantize the cached fp32 export of the
    same backend)."""
    from sentence_transformers import SentenceTransformer

    if inference.backend == "openvino" and inference.precision == "int8":
        fp32, _ = _exported(source, Inference("openvino"), revision, device, kwargs)
        shutil.copytree(fp32, out)
        _quantize_openvino(out / "openvino" / "openvino_model.xml", device)
        return
    if inference.precision == "int8":
        from sentence_transformers import export_dynamic_quantized_onnx_model

        fp32, _ = _exported(source, Inference("onnx"), revision, device, kwargs)
        shutil.copytree(fp32, out)  # quantize the plain graph (ONNX Runtime's quantizer cannot read the fused one)
        model = SentenceTransformer(
            str(out), device=device, backend="onnx", model_kwargs={"file_name": "onnx/model.onnx"}
        )
        export_dynamic_quantized_onnx_model(model, QUANTIZATION, str(out))
        return
    _log.info("exporting %s to %s (once; cached in %s)", source, inference.backend, out.parent)
    model_kwargs = {k: v for k, v in (kwargs.get("model_kwargs") or {}).items() if k != "use_safetensors"}
    model = SentenceTransformer(
        str(source),
        device=device,
        backend=inference.backend,
        model_kwargs={**model_kwargs, "export": True},
        trust_remote_code=bool(kwargs.get("trust_remote_code", False)),
        local_files_only=True,
    )
    model.save_pretrained(str(out))
    if inference.backend == "onnx":  # the graph the sessions load: fused by Optimum at ONNX_LEVEL
        from sentence_transformers import export_optimized_onnx_model

        export_optimized_onnx_model(model, ONNX_LEVEL, str(out))


def _quantize_openvino(xml: Path, device: str) -> None:
    """Replace the OpenVINO model at ``xml`` by its static int8 quantization, calibrated on
    :data:`CALIBRATION_TEXTS` generated paragraphs tokenized as the model tokenizes its inputs."""
    import nncf
    import openvino as ov
    from sentence_transformers import SentenceTransformer

    _log.info("quantizing %s to int8 (once; %d calibration texts)", xml.parent.parent, CALIBRATION_TEXTS)
    folder = xml.parent.parent
    st = SentenceTransformer(
        str(folder), device=device, backend="openvino", model_kwargs={"ov_config": {"INFERENCE_PRECISION_HINT": "f32"}}
    )
    model = ov.Core().read_model(str(xml))
    names = [port.get_any_name() for port in model.inputs]
    texts = calibration_texts(CALIBRATION_TEXTS)
    tokenize = getattr(st, "preprocess", None) or st.tokenize  # sentence-transformers >= 5.5 names it preprocess
    batches = [
        {k: v.numpy() for k, v in tokenize(texts[i : i + 8]).items() if k in names} for i in range(0, len(texts), 8)
    ]
    nncf.set_log_level(logging.ERROR)  # its bit-width tables and progress bars
    quantized = nncf.quantize(
        model, nncf.Dataset(batches), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(texts)
    )
    staged = xml.parent / "int8"
    ov.save_model(quantized, str(staged / xml.name))
    del model, quantized, st  # release the fp32 weights before their files are replaced
    for part in (xml, xml.with_suffix(".bin")):
        os.replace(staged / part.name, part)
    staged.rmdir()
