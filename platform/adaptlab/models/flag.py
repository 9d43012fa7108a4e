"""FlagEmbedding encoders: BGE and llm-embedder (``FlagEmbedding.FlagModel``).

The sentence vector is the final hidden state of the ``[CLS]`` token (``pooling="cls"``,
BGE's choice) or the attention-masked mean of all token states (``pooling="mean"``),
L2-normalised. Queries get ``query_instruction`` prepended, documents
``document_instruction`` (BGE English: :data:`~adaptlab.models.instructions.BGE_QUERY_INSTRUCTION`
on queries, nothing on documents; llm-embedder: the pair of its ``task``, see
:mod:`adaptlab.models.instructions`). The ``bge-*`` and ``llm-embedder`` aliases set these;
for any other reference (a local fine-tuned checkpoint, for instance) pass them as options,
or they are empty.

Options: ``query_instruction``, ``document_instruction``, ``task``, ``pooling`` (``cls`` |
``mean``), ``max_seq_length`` (both sides, default 512), ``query_max_length``,
``use_fp16`` (default: True on CUDA, False on CPU -- FlagModel would otherwise load fp16
weights and upcast them on CPU, losing precision), ``trust_remote_code`` (False unless
explicitly True).
"""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError, require_extra
from adaptlab.models.base import Encoder, TextKind, clean_options, describe_ref, resolve_device, short_error
from adaptlab.models.instructions import INSTRUCTION_OPTIONS, resolve_instructions
from adaptlab.models.ref import hub_cache_snapshot, snapshot_revision
from adaptlab.models.sbert import prepare_local_load, trust_remote_code

if TYPE_CHECKING:
    from adaptlab.models.ref import ModelRef

__all__ = ["FlagEncoder"]

_OPTIONS = (*INSTRUCTION_OPTIONS, "max_seq_length", "pooling", "query_max_length", "trust_remote_code", "use_fp16")


class FlagEncoder(Encoder):
    """A ``FlagEmbedding.FlagModel`` behind the :class:`Encoder` interface."""

    backend = "flag"

    def __init__(
        self,
        flag_model: Any,
        *,
        model_id: str,
        dim: int,
        path: Any = None,
        revision: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(model_id, dim, path=path, revision=revision, options=options)
        self.model = flag_model

    @classmethod
    def load(cls, model: ModelRef, *, device: str | None = None, **options: Any) -> FlagEncoder:
        """Backend loader (see the module docstring for the options)."""
        opts = clean_options({**model.options, **options}, _OPTIONS, cls.backend)
        query_instruction, document_instruction = resolve_instructions(opts)
        pooling = opts.get("pooling", "cls")
        if pooling not in ("cls", "mean"):
            raise ConfigError(f"flag: option pooling must be 'cls' or 'mean', got {pooling!r}")
        dev = resolve_device(device)
        use_fp16 = opts.get("use_fp16", dev.startswith("cuda"))
        if not isinstance(use_fp16, bool):
            raise ConfigError(f"flag: option use_fp16 must be true or false, got {use_fp16!r}")
        max_len = int(opts.get("max_seq_length", 512))
        prepare_local_load(model)
        extra: dict[str, Any] = {}
        if document_instruction:
            extra["passage_instruction_for_retrieval"] = document_instruction
            extra["passage_instruction_format"] = "{}{}"
        require_extra("FlagEmbedding", "flag", "FlagEmbedding models (bge-*, llm-embedder)")
        try:
            from FlagEmbedding import FlagModel  # deferred: imports torch and transformers

            flag_model = FlagModel(
                str(model.path) if model.path is not None else model.model_id,
                normalize_embeddings=True,
                use_fp16=use_fp16,
                query_instruction_for_retrieval=query_instruction,
                query_instruction_format="{}{}",
                devices=dev,
                pooling_method=pooling,
                trust_remote_code=trust_remote_code(opts, cls.backend),
                cache_dir=model.cache_dir,
                query_max_length=int(opts.get("query_max_length", max_len)),
                passage_max_length=max_len,
                convert_to_numpy=True,
                **extra,
            )
        except (OSError, ValueError, KeyError) as e:
            raise ConfigError(
                f"cannot load FlagEmbedding model: tried {describe_ref(model)} "
                f"(reference {model.ref!r}): {short_error(e)}"
            ) from e
        dim = int(getattr(flag_model.model.config, "hidden_size", 0)) or int(
            np.asarray(flag_model.encode_corpus(["dimension probe"])).shape[-1]
        )
        path, revision = model.path, model.revision
        if path is None:
            path = hub_cache_snapshot(model.model_id, model.cache_dir)
            revision = snapshot_revision(path) if path is not None else None
        recorded = {
            **opts,
            "pooling": pooling,
            "use_fp16": use_fp16,
            "query_instruction": query_instruction,
            "document_instruction": document_instruction,
        }
        return cls(
            flag_model,
            model_id=model.model_id,
            dim=dim,
            path=path,
            revision=revision,
            options={k: v for k, v in recorded.items() if v is not None},
        )

    def _encode(self, texts: list[str], kind: TextKind, batch_size: int) -> np.ndarray:
        fn = self.model.encode_queries if kind == "query" else self.model.encode_corpus
        # FlagEmbedding draws tqdm bars on stderr for every call with >= batch_size texts.
        with contextlib.redirect_stderr(io.StringIO()):
            out = fn(texts, batch_size=batch_size, convert_to_numpy=True)
        out = np.asarray(out, dtype=np.float32)
        return out.reshape(len(texts), -1)
