"""SQuAD v1.1 JSON as a retrieval dataset, at paragraph or sentence level.

The file (Rajpurkar et al., EMNLP 2016) holds ``data[].paragraphs[].{context, qas[]}``; each
question has ``id``, ``question`` and ``answers[].{text, answer_start}``.

- ``level="paragraph"``: the corpus is the set of distinct paragraphs (``a{i}p{j}``: article
  ``i``, paragraph ``j``); a question's gold document is its own paragraph.
- ``level="sentence"``: the corpus is every sentence of every paragraph
  (:func:`~adaptlab.data.text.split_sentences`), ids ``a{i}p{j}s{k}``; a question's gold
  document is the sentence that holds the start of its first answer (``answer_start``), the
  setting of the domain-adapted sentence-embedding study (000_2bab498a74ac645b: each question
  is answerable by exactly one sentence).

Choices made here (the papers leave them open):

- Identical texts (after whitespace normalisation) become one document, which keeps the id of
  their first occurrence; otherwise a retrieved copy of the gold sentence would count as a
  miss. The number merged is in ``meta["merged_duplicates"]``.
- Only the first answer of each question is used (SQuAD dev lists up to three annotators'
  answers, possibly in different sentences). Its offset must match its text.
- An answer that runs over a sentence boundary still has one gold document, the sentence where
  it starts; such questions are counted in ``meta["answers_crossing_sentences"]``.
- Questions without answers (SQuAD 2.0 ``is_impossible``) are dropped and counted in
  ``meta["dropped_unanswerable"]``.
- Documents have no title (the article title is not embedded).
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from typing import Any

from adaptlab.data._io import JsonFile
from adaptlab.data.dataset import Dataset, Document
from adaptlab.data.text import normalise_whitespace, split_sentences
from adaptlab.errors import ConfigError, DataError

__all__ = ["SQUAD_LEVELS", "load_squad"]

SQUAD_LEVELS = ("paragraph", "sentence")


class _SquadBuilder:
    """Collects documents, queries and qrels while the file is walked, with the counters that
    end up in ``meta``. Keys (``akeys``, ``pkeys``, ``qkeys``) locate values for error messages."""

    def __init__(self, jf: JsonFile, level: str) -> None:
        self.jf, self.level = jf, level
        self.docs: list[Document] = []
        self.by_text: dict[str, str] = {}
        self.queries: dict[str, str] = {}
        self.qrels: dict[str, dict[str, int]] = {}
        self.query_where: dict[str, list[str | int]] = {}
        self.merged = self.dropped = self.crossing = self.n_paragraphs = 0

    def add_doc(self, doc_id: str, text: str) -> str:
        """The id of the document holding ``text``: a new one, or the first identical one."""
        key = normalise_whitespace(text)
        if key in self.by_text:
            self.merged += 1
            return self.by_text[key]
        self.by_text[key] = doc_id
        self.docs.append(Document(doc_id, text))
        return doc_id

    def add_paragraph(self, para: Any, pkeys: list[str | int], pid: str) -> None:
        jf = self.jf
        para = jf.require(para, pkeys, ["context", "qas"], "SQuAD paragraph")
        context = jf.require_str(para, pkeys, "context")
        if not context.strip():
            raise jf.error([*pkeys, "context"], "empty context; expected the paragraph text")
        qas = jf.require_list(para["qas"], [*pkeys, "qas"], "questions")
        self.n_paragraphs += 1
        if self.level == "paragraph":
            spans = [(0, len(context))]
            docs = [self.add_doc(pid, context)]
        else:
            spans = split_sentences(context)
            docs = [self.add_doc(f"{pid}s{si}", context[s:e]) for si, (s, e) in enumerate(spans)]
        for qi, qa in enumerate(qas):
            self.add_question(qa, [*pkeys, "qas", qi], context, spans, docs)

    def add_question(
        self, qa: Any, qkeys: list[str | int], context: str, spans: list[tuple[int, int]], docs: list[str]
    ) -> None:
        """Judge the question relevant to the document (paragraph or sentence) where its first
        answer starts."""
        jf = self.jf
        qa = jf.require(qa, qkeys, ["id", "question", "answers"], "SQuAD question")
        qid = _question_id(jf, qa, qkeys)
        question = jf.require_str(qa, qkeys, "question")
        if qid in self.queries:
            first = jf.where(self.query_where[qid])
            raise jf.error(qkeys, f"duplicate question id {qid!r} (first at {first})")
        answers = jf.require_list(qa["answers"], [*qkeys, "answers"], "answers")
        if not answers or qa.get("is_impossible"):
            self.dropped += 1
            return
        start, end = _first_answer(jf, answers[0], [*qkeys, "answers", 0], context)
        k = 0
        if self.level == "sentence":
            k = min(bisect_right([e for _, e in spans], start), len(spans) - 1)
            if end > spans[k][1]:
                self.crossing += 1
        self.queries[qid] = question
        self.qrels[qid] = {docs[k]: 1}
        self.query_where[qid] = qkeys

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "format": "squad",
            "path": str(self.jf.path),
            "level": self.level,
            "paragraphs": self.n_paragraphs,
            "merged_duplicates": self.merged,
            "dropped_unanswerable": self.dropped,
        }
        if self.level == "sentence":
            meta["answers_crossing_sentences"] = self.crossing
        return meta


def load_squad(path: str | Path, *, level: str = "paragraph", name: str | None = None) -> Dataset:
    """Load a SQuAD-format JSON file at ``level`` ``"paragraph"`` or ``"sentence"``.

    Raises DataError naming the file, line and key path for a missing key, a wrong type, a
    duplicate question id or an answer whose offset does not match its text.
    """
    if level not in SQUAD_LEVELS:
        raise ConfigError(f"squad level {level!r} is not valid; expected one of {', '.join(SQUAD_LEVELS)}")
    jf = JsonFile.load(path, 'a SQuAD JSON file ({"data": [{"paragraphs": [...]}]})')
    top = jf.require(jf.value, [], ["data"], "SQuAD file")
    articles = jf.require_list(top["data"], ["data"], "list of articles")
    build = _SquadBuilder(jf, level)
    for ai, article in enumerate(articles):
        akeys: list[str | int] = ["data", ai]
        article = jf.require(article, akeys, ["paragraphs"], "SQuAD article")
        paragraphs = jf.require_list(article["paragraphs"], [*akeys, "paragraphs"], "paragraphs")
        for pi, para in enumerate(paragraphs):
            build.add_paragraph(para, [*akeys, "paragraphs", pi], f"a{ai}p{pi}")
    if not build.docs:
        raise DataError(f"{jf.path}: no paragraphs; the corpus would be empty")
    default = "squad" if level == "paragraph" else "squad-sentence"
    return Dataset.build(
        name or default, build.docs, build.queries, build.qrels, source=str(jf.path), meta=build.meta()
    )


def _question_id(jf: JsonFile, qa: dict[str, Any], keys: list[str | int]) -> str:
    value = qa["id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise jf.error([*keys, "id"], "expected a non-empty string question id")
    text = str(value)
    if any(c.isspace() for c in text):
        raise jf.error([*keys, "id"], f"question id {text!r} contains whitespace")
    return text


def _first_answer(jf: JsonFile, answer: Any, keys: list[str | int], context: str) -> tuple[int, int]:
    """``(start, end)`` character offsets of the answer in ``context``, validated."""
    answer = jf.require(answer, keys, ["text", "answer_start"], "SQuAD answer")
    text = jf.require_str(answer, keys, "text")
    start = answer["answer_start"]
    if isinstance(start, bool) or not isinstance(start, int):
        raise jf.error([*keys, "answer_start"], "expected an integer character offset")
    if not 0 <= start < len(context):
        raise jf.error(
            [*keys, "answer_start"],
            f"offset {start} is outside the context (length {len(context)})",
        )
    if context[start : start + len(text)] != text:
        raise jf.error(
            [*keys, "answer_start"],
            f"the context at offset {start} reads {context[start : start + len(text)]!r}, not the answer text {text!r}",
        )
    return start, start + len(text)
