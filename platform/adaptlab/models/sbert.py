"""sentence-transformers bi-encoders (Reimers & Gurevych, "Sentence-BERT", EMNLP 2019).

The model's own pipeline (transformer, pooling, optional dense/normalise modules) gives the
sentence vector; we L2-normalise it. Queries go through ``encode_query`` and documents
through ``encode_document``, so prompts saved with the model (``"query"``/``"document"``)
apply; an explicit ``query_instruction`` / ``document_instruction`` (or an llm-embedder
``task``) replaces them. Texts longer than ``max_seq_length`` tokens (the model's setting,
256 for all-MiniLM-L6-v2, unless the option overrides it) are truncated.

Options: ``query_instruction``, ``document_instruction``, ``task``, ``max_seq_length``,
``trust_remote_code`` (False unless explicitly True), ``model_kwargs`` (passed to
transformers; ``use_safetensors=True`` is set when the directory has safetensors weights),
``embedding_backend`` (``"torch"``, ``"onnx"``, ``"openvino"``) and ``precision`` (``"fp32"``,
``"bf16"``, ``"int8"``): how the model runs (:mod:`adaptlab.models.inference`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.models.base import Encoder, TextKind, clean_options, describe_ref, resolve_device, short_error
from adaptlab.models.inference import OPTIONS as INFERENCE_OPTIONS
from adaptlab.models.inference import Inference, load_sentence_transformer, resolved_options
from adaptlab.models.instructions import INSTRUCTION_OPTIONS, resolve_instructions
from adaptlab.models.load import go_offline
from adaptlab.models.ref import hub_cache_snapshot, snapshot_revision
from adaptlab.models.weights import weights_sha256

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from adaptlab.models.ref import ModelRef

__all__ = ["SentenceTransformerEncoder"]

_OPTIONS = (*INSTRUCTION_OPTIONS, *INFERENCE_OPTIONS, "max_seq_length", "model_kwargs", "trust_remote_code")


def prepare_local_load(model: ModelRef) -> dict[str, Any]:
    """Offline mode for local weights; ``use_safetensors`` when the directory has them."""
    kwargs: dict[str, Any] = {}
    if model.path is not None:
        go_offline()
        if any(model.path.glob("*.safetensors")):
            kwargs["use_safetensors"] = True
    return kwargs


def trust_remote_code(opts: dict[str, Any], backend: str) -> bool:
    """True only for an explicit boolean True."""
    value = opts.get("trust_remote_code", False)
    if not isinstance(value, bool):
        raise ConfigError(f"{backend}: option trust_remote_code must be true or false, got {value!r}")
    return value


class SentenceTransformerEncoder(Encoder):
    """A :class:`sentence_transformers.SentenceTransformer` behind the :class:`Encoder` interface."""

    backend = "sentence-transformers"

    def __init__(
        self,
        st_model: SentenceTransformer,
        *,
        model_id: str,
        path: Any = None,
        revision: str | None = None,
        query_instruction: str | None = None,
        document_instruction: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        get_dim = getattr(st_model, "get_embedding_dimension", None) or st_model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:  # some modules do not declare it: measure once
            dim = int(st_model.encode(["dimension probe"], convert_to_numpy=True).shape[1])
        super().__init__(model_id, int(dim), path=path, revision=revision, options=options)
        self.model = st_model
        self.query_instruction = query_instruction
        self.document_instruction = document_instruction

    @classmethod
    def load(cls, model: ModelRef, *, device: str | None = None, **options: Any) -> SentenceTransformerEncoder:
        """Backend loader (see the module docstring for the options)."""
        opts = clean_options({**model.options, **options}, _OPTIONS, cls.backend)
        query_instruction, document_instruction = resolve_instructions(opts)
        model_kwargs = {**prepare_local_load(model), **dict(opts.get("model_kwargs") or {})}
        dev = resolve_device(device)
        source = model.path if model.path is not None else model.model_id
        try:
            st_model = load_sentence_transformer(
                source,
                Inference.of(opts),
                revision=lambda: model.revision or weights_sha256(source),  # the folder exported (onnx, openvino)
                device=dev,
                trust_remote_code=trust_remote_code(opts, cls.backend),
                cache_folder=model.cache_dir,
                local_files_only=model.path is not None,
                model_kwargs=model_kwargs or None,
            )
        except (OSError, ValueError, KeyError) as e:
            raise ConfigError(
                f"cannot load sentence-transformers model: tried {describe_ref(model)} "
                f"(reference {model.ref!r}): {short_error(e)}"
            ) from e
        if "max_seq_length" in opts:
            st_model.max_seq_length = int(opts["max_seq_length"])
        path, revision = model.path, model.revision
        if path is None:  # downloaded just now: find the snapshot for provenance
            path = hub_cache_snapshot(model.model_id, model.cache_dir)
            revision = snapshot_revision(path) if path is not None else None
        return cls(
            st_model,
            model_id=model.model_id,
            path=path,
            revision=revision,
            query_instruction=query_instruction,
            document_instruction=document_instruction,
            options=resolved_options({k: v for k, v in opts.items() if k != "model_kwargs"}),  # "auto" resolved
        )

    def _encode(self, texts: list[str], kind: TextKind, batch_size: int) -> np.ndarray:
        prompt = self.query_instruction if kind == "query" else self.document_instruction
        fn = self.model.encode_query if kind == "query" else self.model.encode_document
        kwargs: dict[str, Any] = {
            "batch_size": batch_size,
            "show_progress_bar": False,
            "convert_to_numpy": True,
            "normalize_embeddings": True,
        }
        if prompt:
            kwargs["prompt"] = prompt
        return np.asarray(fn(texts, **kwargs), dtype=np.float32)
