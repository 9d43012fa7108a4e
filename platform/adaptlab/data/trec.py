"""TREC qrels and run files (the formats trec_eval and pytrec_eval read).

- qrels: ``qid iter docid rel`` per line (``iter`` is ignored, usually ``0``);
- run: ``qid Q0 docid rank score tag`` per line; the rank column is ignored on reading,
  as trec_eval does: order comes from the score, ties broken by document id descending.

Fields are separated by any whitespace, so ids must not contain any. Both readers return the
plain dicts of :mod:`adaptlab.data.dataset` (``Qrels``, ``Run``).
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from adaptlab.data._io import iter_lines, read_text, require_file
from adaptlab.data.dataset import Qrels, Run
from adaptlab.errors import DataError

__all__ = ["check_run_queries", "read_trec_qrels", "read_trec_run", "rank_run", "write_trec_qrels", "write_trec_run"]


def read_trec_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read ``qid iter docid rel`` lines; a repeated (qid, docid) with another rel is an error."""
    p = require_file(path, "TREC qrels file (qid 0 docid rel)")
    qrels: Qrels = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in iter_lines(read_text(p)):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            raise DataError(
                f"{p}:{number}: expected 4 whitespace-separated fields (qid iter docid rel), got {len(fields)}"
            )
        qid, _, did, rel = fields
        try:
            value = int(rel)
        except ValueError as e:
            raise DataError(f"{p}:{number}: relevance {rel!r} is not an integer") from e
        judged = qrels.setdefault(qid, {})
        if did in judged and judged[did] != value:
            raise DataError(
                f"{p}:{number}: query {qid!r}, document {did!r} judged again with a different "
                f"relevance ({judged[did]} on line {seen[(qid, did)]}, now {value})"
            )
        seen.setdefault((qid, did), number)
        judged[did] = value
    return qrels


def read_trec_run(path: str | os.PathLike[str], *, qrels: Mapping[str, Mapping[str, int]] | None = None) -> Run:
    """Read ``qid Q0 docid rank score tag`` lines into ``{qid: {docid: score}}``.

    A document listed twice for one query, or a score that is not a finite number, is an
    error naming the line. A file without any run line is an error (it would evaluate as a
    table of zeros), and so is, when ``qrels`` is given, a run that shares no query with it.
    """
    p = require_file(path, "TREC run file (qid Q0 docid rank score tag)")
    run: Run = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in iter_lines(read_text(p)):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise DataError(
                f"{p}:{number}: expected 6 whitespace-separated fields (qid Q0 docid rank score tag), got {len(fields)}"
            )
        qid, _, did, _, score, _ = fields
        try:
            value = float(score)
        except ValueError as e:
            raise DataError(f"{p}:{number}: score {score!r} is not a number") from e
        if not math.isfinite(value):
            raise DataError(f"{p}:{number}: score {score!r} is not finite")
        if (qid, did) in seen:
            raise DataError(
                f"{p}:{number}: document {did!r} listed twice for query {qid!r} (first on line {seen[(qid, did)]})"
            )
        seen[(qid, did)] = number
        run.setdefault(qid, {})[did] = value
    if not run:
        raise DataError(f"{p}: the run file holds no run lines (qid Q0 docid rank score tag); nothing to evaluate")
    if qrels is not None:
        check_run_queries(run, qrels, source=str(p))
    return run


def check_run_queries(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]], *, source: str = "run"
) -> int:
    """The number of judged queries of ``qrels`` the run retrieves for; an empty run, or one
    sharing no query with ``qrels``, is a :class:`DataError` (it would score 0 everywhere)."""
    if not any(run.values()):
        raise DataError(f"{source}: the run is empty; nothing to evaluate")
    shared = sum(1 for q, docs in run.items() if docs and q in qrels)
    if shared == 0:
        raise DataError(
            f"{source}: the run shares no query with the qrels ({len(run)} run queries, e.g. "
            f"{', '.join(sorted(run)[:3])}; {len(qrels)} judged, e.g. {', '.join(sorted(qrels)[:3])}); "
            "check that run and qrels belong to the same dataset"
        )
    return shared


def rank_run(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """``(docid, score)`` in rank order: score descending, then document id descending.

    This is trec_eval's ordering, the one the project uses for every measure (docs/metrics.md).
    """
    return sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)


def _check_token(value: str, what: str) -> str:
    text = str(value)
    if not text or any(c.isspace() for c in text):
        raise DataError(f"{what} {text!r} is empty or contains whitespace; TREC files cannot hold it")
    return text


def write_trec_run(
    run: Mapping[str, Mapping[str, float]],
    path: str | Path,
    *,
    tag: str = "adaptlab",
    depth: int | None = None,
) -> Path:
    """Write ``run`` as a TREC run file, queries in sorted id order, documents in rank order.

    Ranks are 1-based in :func:`rank_run` order, so reading the file back and re-ranking gives
    the same order; scores are written with ``repr`` (round-trips a float exactly). ``depth``
    keeps the top ``depth`` documents of each query. The file is written atomically.
    """
    if depth is not None and depth < 1:
        raise DataError(f"write_trec_run: depth must be >= 1, got {depth}")
    _check_token(tag, "run tag")
    lines: list[str] = []
    for qid in sorted(run):
        _check_token(qid, "query id")
        ranked = rank_run(run[qid])
        if depth is not None:
            ranked = ranked[:depth]
        for rank, (did, score) in enumerate(ranked, start=1):
            _check_token(did, "document id")
            value = float(score)
            if not math.isfinite(value):
                raise DataError(f"query {qid!r}, document {did!r}: score {score!r} is not finite")
            lines.append(f"{qid} Q0 {did} {rank} {value!r} {tag}\n")
    return _write_atomic(Path(path), "".join(lines))


def write_trec_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> Path:
    """Write ``qrels`` as ``qid 0 docid rel`` lines (sorted by query, then document id)."""
    lines = []
    for qid in sorted(qrels):
        _check_token(qid, "query id")
        for did in sorted(qrels[qid]):
            _check_token(did, "document id")
            lines.append(f"{qid} 0 {did} {int(qrels[qid][did])}\n")
    return _write_atomic(Path(path), "".join(lines))


def _write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then rename it.
    The file gets the mode an ordinary ``open(path, "w")`` gives (0666 less the umask, usually
    0644), not ``mkstemp``'s private 0600: a run file is meant to be shared."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
