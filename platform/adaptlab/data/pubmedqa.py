"""PubMedQA (``ori_pqal.json``, the expert-labelled PQA-L set) as a retrieval dataset.

The file (Jin et al., EMNLP 2019) maps a PubMed id to ``{"QUESTION": str, "CONTEXTS": [str],
...}``. Each question becomes one query and its abstract -- the ``CONTEXTS`` sections joined
with a space, in file order -- one document, its only relevant document (query and document
share the PubMed id; they live in separate namespaces). As in the domain-adapted embedding
study (000_2bab498a74ac645b), the task is to find a question's own abstract among all of them.

``ids_file`` (for example ``test_ground_truth.json``, the official 500-question test split)
restricts both the queries and the corpus to the PubMed ids that are keys of that JSON object
(or items of that JSON list).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adaptlab.data._io import JsonFile
from adaptlab.data.dataset import Dataset, Document
from adaptlab.errors import DataError

__all__ = ["load_pubmedqa"]


def load_pubmedqa(path: str | Path, *, ids_file: str | Path | None = None, name: str | None = None) -> Dataset:
    """Load ``ori_pqal.json``: one query and one gold document (its joined contexts) per id."""
    jf = JsonFile.load(path, 'a PubMedQA JSON object {"<pmid>": {"QUESTION": ..., "CONTEXTS": [...]}}')
    if not isinstance(jf.value, dict):
        raise jf.error([], f"expected a JSON object keyed by PubMed id, got {type(jf.value).__name__}")
    keep = _read_ids(ids_file) if ids_file is not None else None
    if keep is not None:
        missing = [pid for pid in keep if pid not in jf.value]
        if missing:
            raise DataError(f"{ids_file}: {len(missing)} id(s) are not in {jf.path}, for example {missing[0]!r}")

    docs: list[Document] = []
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for pid, item in jf.value.items():
        if keep is not None and pid not in keep:
            continue
        keys = [pid]
        if not pid.strip() or any(c.isspace() for c in pid):
            raise jf.error(keys, f"PubMed id {pid!r} is empty or contains whitespace")
        item = jf.require(item, keys, ["QUESTION", "CONTEXTS"], "PubMedQA entry")
        question = jf.require_str(item, keys, "QUESTION")
        contexts = jf.require_list(item["CONTEXTS"], [pid, "CONTEXTS"], "list of abstract sections")
        for i, section in enumerate(contexts):
            if not isinstance(section, str):
                raise jf.error([pid, "CONTEXTS", i], f"expected a string, got {type(section).__name__}")
        text = " ".join(s.strip() for s in contexts if s.strip())
        if not text:
            raise jf.error([pid, "CONTEXTS"], "no context text; expected the abstract sections")
        if not question.strip():
            raise jf.error([pid, "QUESTION"], "empty question")
        docs.append(Document(pid, text))
        queries[pid] = question
        qrels[pid] = {pid: 1}
    meta: dict[str, Any] = {"format": "pubmedqa", "path": str(jf.path)}
    if ids_file is not None:
        meta["ids_file"] = str(ids_file)
    return Dataset.build(name or "pubmedqa", docs, queries, qrels, source=str(jf.path), meta=meta)


def _read_ids(path: str | Path) -> set[str]:
    jf = JsonFile.load(path, "a JSON object or list of PubMed ids")
    if isinstance(jf.value, dict):
        return {str(k) for k in jf.value}
    if isinstance(jf.value, list):
        return {str(v) for v in jf.value}
    raise jf.error([], f"expected a JSON object or list of PubMed ids, got {type(jf.value).__name__}")
