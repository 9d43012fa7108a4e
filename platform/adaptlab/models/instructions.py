"""Instruction prefixes for instruction-tuned retrieval encoders.

A prefix is prepended verbatim to each text before tokenisation: ``prefix + text``.

- BGE English models (Xiao et al., "C-Pack: Packaged Resources To Advance General Chinese
  Embedding", 2023) put :data:`BGE_QUERY_INSTRUCTION` before queries and nothing before
  passages.
- llm-embedder (Zhang et al., "Retrieve Anything To Augment Large Language Models", 2023)
  has one query prefix and one key (document) prefix per task, :data:`LLM_EMBEDDER_INSTRUCTIONS`.

Options understood by both backends (values ``None`` or ``""`` mean "not set"):
``query_instruction``, ``document_instruction`` (``passage_instruction`` is a synonym) and
``task`` (an llm-embedder task name, which sets both unless they are given explicitly).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adaptlab.errors import ConfigError

__all__ = ["BGE_QUERY_INSTRUCTION", "LLM_EMBEDDER_INSTRUCTIONS", "resolve_instructions"]

BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
"""The query prefix of the English BGE models (bge-*-en, bge-*-en-v1.5)."""

LLM_EMBEDDER_INSTRUCTIONS: dict[str, dict[str, str]] = {
    "qa": {
        "query": "Represent this query for retrieving relevant documents: ",
        "key": "Represent this document for retrieval: ",
    },
    "convsearch": {
        "query": "Encode this query and context for searching relevant passages: ",
        "key": "Encode this passage for retrieval: ",
    },
    "chat": {
        "query": "Embed this dialogue to find useful historical dialogues: ",
        "key": "Embed this historical dialogue for retrieval: ",
    },
    "lrlm": {
        "query": "Embed this text chunk for finding useful historical chunks: ",
        "key": "Embed this historical text chunk for retrieval: ",
    },
    "icl": {
        "query": "Convert this example into vector to look for useful examples: ",
        "key": "Convert this example into vector for retrieval: ",
    },
    "tool": {
        "query": "Transform this user request for fetching helpful tool descriptions: ",
        "key": "Transform this tool description for retrieval: ",
    },
}
"""llm-embedder task -> ``{"query": prefix, "key": prefix}`` (from the model card)."""

INSTRUCTION_OPTIONS = ("query_instruction", "document_instruction", "passage_instruction", "task")


def resolve_instructions(options: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(query_prefix, document_prefix)`` from the options (``None`` = no prefix)."""
    query = options.get("query_instruction") or None
    document = options.get("document_instruction") or options.get("passage_instruction") or None
    task = options.get("task") or None
    if task is not None:
        if task not in LLM_EMBEDDER_INSTRUCTIONS:
            raise ConfigError(
                f"option task={task!r}: unknown llm-embedder task; expected one of "
                f"{', '.join(LLM_EMBEDDER_INSTRUCTIONS)}"
            )
        query = query or LLM_EMBEDDER_INSTRUCTIONS[task]["query"]
        document = document or LLM_EMBEDDER_INSTRUCTIONS[task]["key"]
    for key, value in (("query_instruction", query), ("document_instruction", document)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"option {key} must be a string, got {type(value).__name__}")
    return query, document
