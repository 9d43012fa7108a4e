"""Synthetic questions for chunks: an offline inverse-cloze generator and an LLM generator.

Every generator maps chunks to :class:`SyntheticQuestion` records with stable ids
``f"{chunk_id}#q{j}"``; the chunk is the question's positive context.

- :class:`InverseClozeGenerator` (no model needed): inverse cloze task of Lee, Chang &
  Toutanova (2019, "Latent Retrieval for Weakly Supervised Open Domain Question Answering"):
  a sentence of the chunk becomes the query and the rest of the chunk, with that sentence
  removed, is the positive. We always remove the sentence (ICT keeps it in 10% of pairs);
  the chunk must have at least two sentences.
- :class:`LLMQuestionGenerator`: the EIS study's recipe (004_d4e67b48691a8900.txt, section
  3.2.1): an instruction-following model writes questions (and answers) answerable from the
  chunk alone, through :class:`adaptlab.adapt.prep.llm.ChatClient` (cached, retried).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.llm import ChatClient
from adaptlab.data.text import split_sentences
from adaptlab.errors import ConfigError
from adaptlab.stats.resample import check_seed

__all__ = [
    "DEFAULT_PROMPT",
    "DEFAULT_SYSTEM",
    "InverseClozeGenerator",
    "LLMQuestionGenerator",
    "QuestionGenerator",
    "SyntheticQuestion",
    "cut_spans",
    "parse_questions",
    "positive_text",
    "question_id",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyntheticQuestion:
    """A generated question whose positive context is chunk ``chunk_id``.

    ``removed``: for inverse-cloze questions, the character span of the chunk text that became
    the query and is cut from the positive (:func:`positive_text`); None otherwise.
    """

    id: str
    text: str
    chunk_id: str
    doc_id: str
    generator: str
    answer: str = ""
    removed: tuple[int, int] | None = None


def question_id(chunk_id: str, j: int) -> str:
    """``f"{chunk_id}#q{j}"``: the id of the ``j``-th question of a chunk."""
    return f"{chunk_id}#q{j}"


def cut_spans(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with the character spans removed; the pieces left are joined by one space."""
    out = []
    pos = 0
    for s, e in sorted(set(spans)):
        out.append(text[pos : max(s, pos)].strip())
        pos = max(pos, e)
    out.append(text[pos:].strip())
    return " ".join(part for part in out if part)


def positive_text(question: SyntheticQuestion, chunk: Chunk) -> str:
    """The positive context of ``question``: the chunk text, minus the query sentence for ICT."""
    if question.chunk_id != chunk.id:
        raise ConfigError(
            f"positive_text: question {question.id!r} belongs to {question.chunk_id!r}, not to chunk {chunk.id!r}"
        )
    if question.removed is None:
        return chunk.text
    return cut_spans(chunk.text, [question.removed])


class QuestionGenerator(Protocol):
    """Anything that turns chunks into questions; ``name`` goes into provenance."""

    name: str

    def generate(self, chunks: Sequence[Chunk]) -> list[SyntheticQuestion]: ...


def _chunk_rng(seed: int, chunk_id: str) -> np.random.Generator:
    key = int.from_bytes(hashlib.sha256(chunk_id.encode()).digest()[:8], "big")
    return np.random.default_rng([seed, key])


class InverseClozeGenerator:
    """Inverse-cloze questions: a sentence of the chunk is the query (see the module doc).

    ``n_per_chunk`` sentences with at least ``min_words`` words are drawn without replacement
    per chunk by a Generator seeded with ``(seed, sha256(chunk_id))``, so a chunk's questions
    do not depend on which other chunks are generated with it. Chunks with fewer than two
    sentences, or no eligible sentence, yield nothing (counted in a logged message).
    """

    def __init__(
        self,
        n_per_chunk: int = 1,
        *,
        seed: int = 0,
        min_words: int = 4,
        splitter: Callable[[str], list[tuple[int, int]]] | None = None,
    ) -> None:
        if isinstance(n_per_chunk, bool) or n_per_chunk < 1:
            raise ConfigError(f"n_per_chunk={n_per_chunk}: expected an integer >= 1")
        self.n_per_chunk = int(n_per_chunk)
        self.seed = check_seed(seed)
        self.min_words = int(min_words)
        self.splitter = split_sentences if splitter is None else splitter
        self.name = "ict"

    def generate(self, chunks: Sequence[Chunk]) -> list[SyntheticQuestion]:
        out: list[SyntheticQuestion] = []
        skipped = 0
        for chunk in chunks:
            spans = self.splitter(chunk.text)
            eligible = [(s, e) for s, e in spans if len(chunk.text[s:e].split()) >= self.min_words]
            if len(spans) < 2 or not eligible:
                skipped += 1
                continue
            rng = _chunk_rng(self.seed, chunk.id)
            k = min(self.n_per_chunk, len(eligible))
            picked = sorted(rng.choice(len(eligible), size=k, replace=False).tolist())
            for j, i in enumerate(picked):
                s, e = eligible[i]
                out.append(
                    SyntheticQuestion(
                        id=question_id(chunk.id, j),
                        text=" ".join(chunk.text[s:e].split()),
                        chunk_id=chunk.id,
                        doc_id=chunk.doc_id,
                        generator=self.name,
                        removed=(s, e),
                    )
                )
        if skipped:
            log.info("inverse cloze: %d of %d chunk(s) too short for a question", skipped, len(chunks))
        return out


DEFAULT_SYSTEM = "You write realistic search questions for building retrieval training data."

DEFAULT_PROMPT = """\
Below is a passage from a document collection. Write up to {n} different questions that a \
specialist searching this collection could ask and that the passage alone fully answers, each \
with its answer taken from the passage. Use only what the passage says; do not refer to "the \
passage" or "the text" in a question. If the passage does not hold enough information for a \
good question, return empty lists.

Answer with JSON only, in this form: {"questions": ["..."], "answers": ["..."]}

Passage:
{chunk}
"""
"""Prompt template of :class:`LLMQuestionGenerator`: ``{chunk}`` (required) and ``{n}``."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\(?\d+[.):]|q\d*[.:)]|question\s*\d*[.:])\s*", re.IGNORECASE)


def _from_json(obj: Any) -> list[tuple[str, str]] | None:
    if isinstance(obj, dict):
        qs = next((obj[k] for k in ("questions", "queries", "question") if k in obj), None)
        ans = next((obj[k] for k in ("answers", "answer") if k in obj), None)
        if qs is None:
            return None
        if isinstance(qs, str):
            qs = [qs]
        if not isinstance(qs, list):
            return None
        answers = ans if isinstance(ans, list) else [ans] if isinstance(ans, str) else []
        out = []
        for i, q in enumerate(qs):
            if isinstance(q, dict):
                pair = _from_json(q)
                out.extend(pair or [])
            elif isinstance(q, str):
                a = answers[i] if i < len(answers) and isinstance(answers[i], str) else ""
                out.append((q, a))
        return out
    if isinstance(obj, list):
        out = []
        for item in obj:
            if isinstance(item, str):
                out.append((item, ""))
            elif isinstance(item, dict):
                q = item.get("question") or item.get("query")
                if isinstance(q, str):
                    a = item.get("answer", "")
                    out.append((q, a if isinstance(a, str) else ""))
        return out
    return None


def parse_questions(content: str) -> list[tuple[str, str]]:
    """(question, answer) pairs from a model reply.

    Accepted, in order: JSON (optionally in a ```json fence) as ``{"questions": [...],
    "answers": [...]}`` (also ``queries``), a list of strings, or a list of
    ``{"question", "answer"}`` objects; otherwise one question per line ending in ``?``, with
    numbering and bullets stripped. Empty and duplicate questions are dropped.
    """
    text = _FENCE.sub("", content.strip())
    pairs: list[tuple[str, str]] | None = None
    starts = sorted(i for i in (text.find("{"), text.find("[")) if i >= 0)
    for i in starts:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[i:])
        except ValueError:
            continue
        pairs = _from_json(obj)
        if pairs is not None:
            break
    if pairs is None:
        pairs = []
        for line in text.splitlines():
            line = _BULLET.sub("", line).strip()
            if line.endswith("?"):
                pairs.append((line, ""))
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for q, a in pairs:
        q = " ".join(q.split())
        if q and q.lower() not in seen:
            seen.add(q.lower())
            out.append((q, " ".join(a.split())))
    return out


class LLMQuestionGenerator:
    """Questions from a chat model: one request per chunk, at most ``n_per_chunk`` kept.

    ``prompt`` must contain ``{chunk}`` and may contain ``{n}``; both are substituted by plain
    text replacement, so other braces (a JSON example) need no escaping. ``workers`` > 1 sends
    that many requests at once (threads). The generator name is ``f"llm:{client.model}"``.
    A reply with no parseable question yields nothing for that chunk (logged).
    """

    def __init__(
        self,
        client: ChatClient,
        n_per_chunk: int = 3,
        *,
        prompt: str = DEFAULT_PROMPT,
        system: str | None = DEFAULT_SYSTEM,
        workers: int = 1,
    ) -> None:
        if "{chunk}" not in prompt:
            raise ConfigError("prompt: the template must contain the placeholder {chunk}")
        if isinstance(n_per_chunk, bool) or n_per_chunk < 1:
            raise ConfigError(f"n_per_chunk={n_per_chunk}: expected an integer >= 1")
        if workers < 1:
            raise ConfigError(f"workers={workers}: expected an integer >= 1")
        self.client = client
        self.n_per_chunk = int(n_per_chunk)
        self.prompt = prompt
        self.system = system
        self.workers = int(workers)
        self.name = f"llm:{client.model}"

    def messages(self, chunk: Chunk) -> list[dict[str, str]]:
        """The chat messages sent for ``chunk``."""
        user = self.prompt.replace("{n}", str(self.n_per_chunk)).replace("{chunk}", chunk.text)
        msgs = [{"role": "system", "content": self.system}] if self.system else []
        msgs.append({"role": "user", "content": user})
        return msgs

    def _one(self, chunk: Chunk) -> list[SyntheticQuestion]:
        pairs = parse_questions(self.client.complete(self.messages(chunk)))
        if not pairs:
            log.info("chunk %r: the model returned no question", chunk.id)
        return [
            SyntheticQuestion(
                id=question_id(chunk.id, j),
                text=q,
                chunk_id=chunk.id,
                doc_id=chunk.doc_id,
                generator=self.name,
                answer=a,
            )
            for j, (q, a) in enumerate(pairs[: self.n_per_chunk])
        ]

    def generate(self, chunks: Sequence[Chunk]) -> list[SyntheticQuestion]:
        if self.workers == 1 or len(chunks) < 2:
            results = [self._one(c) for c in chunks]
        else:
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                results = list(pool.map(self._one, chunks))
        return [q for qs in results for q in qs]
