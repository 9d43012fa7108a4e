"""SciQ JSON (Welbl et al., 2017) as a retrieval dataset.

The file is a JSON list of objects with ``question``, ``correct_answer``, ``distractor1-3``
and ``support`` (the paragraph that supports the answer). The support paragraph is the
question's gold document, the setting of the domain-adapted embedding study
(000_2bab498a74ac645b).

- Questions whose ``support`` is empty are dropped (about 1 in 10 in the official files);
  the count is in ``meta["dropped_empty_support"]``.
- Identical support texts (after whitespace normalisation) become one document, ``d{n}`` in
  order of first appearance, judged relevant for every question that cites it.
- Query ids are ``q{i}`` with ``i`` the 0-based position in the file, so ids stay stable
  whatever is dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adaptlab.data._io import JsonFile
from adaptlab.data.dataset import Dataset, Document
from adaptlab.data.text import normalise_whitespace

__all__ = ["load_sciq"]

_REQUIRED = ("question", "correct_answer", "support")


def load_sciq(path: str | Path, *, name: str | None = None) -> Dataset:
    """Load a SciQ JSON file (train/valid/test): support paragraphs are the corpus."""
    jf = JsonFile.load(path, "a SciQ JSON list of {question, correct_answer, support, ...}")
    items = jf.require_list(jf.value, [], "list of SciQ questions")
    docs: list[Document] = []
    by_text: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    dropped = 0
    for i, item in enumerate(items):
        item = jf.require(item, [i], _REQUIRED, "SciQ question")
        for key in _REQUIRED:
            jf.require_str(item, [i], key)
        question, support = item["question"], item["support"]
        if not question.strip():
            raise jf.error([i, "question"], "empty question")
        key = normalise_whitespace(support)
        if not key:
            dropped += 1
            continue
        if key not in by_text:
            by_text[key] = f"d{len(by_text)}"
            docs.append(Document(by_text[key], support.strip()))
        qid = f"q{i}"
        queries[qid] = question
        qrels[qid] = {by_text[key]: 1}
    meta: dict[str, Any] = {
        "format": "sciq",
        "path": str(jf.path),
        "dropped_empty_support": dropped,
        "merged_duplicates": len(queries) - len(docs),
    }
    return Dataset.build(name or "sciq", docs, queries, qrels, source=str(jf.path), meta=meta)
