"""Raw document corpora for adaptation: load a folder of files, filter by name, clean the text.

A raw corpus is a folder of ``.txt`` / ``.md`` / ``.pdf`` files (one document each, id = the
path relative to the folder without its suffix) and ``.jsonl`` files (one JSON object per line
with ``id`` and ``text``, optional ``title``), or the corpus of any adaptlab :class:`Dataset`.

PDFs are read page by page (:mod:`adaptlab.data.pdf`) and become a :class:`PagedDocument`: its
text plus the character offset where each page starts, so that every chunk knows its first and
last page. An encrypted, scanned (no text layer) or broken PDF is reported in one warning line
and skipped; the rest of the corpus loads.

Filename filters follow the EIS study (004_d4e67b48691a8900.txt, section 3.1): keep the main
body of each final statement (include ``*Final EIS*``, ``*Final Vol*``) and drop appendices,
executive summaries and comment files (exclude ``*Appendix*``, ``*Executive Summary*``,
``*Comment*``). Patterns are shell globs matched case-insensitively against the file name and
against the path relative to the folder.

Cleaning (:func:`clean_text`, :mod:`adaptlab.data.clean`) removes what text extraction from
paginated documents leaves behind; the rules are in its docstring and in docs/adaptation.md
("Documents", under "From documents to training data").

Bounded input: a symlink never leads out of the corpus folder (:func:`select_files`); a file
over ``max_file_bytes`` (default :data:`MAX_FILE_BYTES`, 1 GiB) or a ``.jsonl`` line over
``max_line_bytes`` (:data:`MAX_LINE_BYTES`) is a DataError naming the file and the limit, checked
before it is read; ``.txt``/``.md`` files are cleaned and ``.jsonl`` files parsed line by line,
so loading a large file costs about twice its text however long its lines, not its lines as
Python objects; after a file of 8 MiB or more, the memory freed while loading is given back to
the system (glibc ``malloc_trim``), so that chunking does not grow the process on top of it.
"""

from __future__ import annotations

import ctypes
import fnmatch
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from adaptlab.data._io import iter_jsonl, read_text, str_id
from adaptlab.data.clean import EDGE_LINES, CleanOptions, clean_file, clean_held, clean_pages, clean_text
from adaptlab.data.dataset import Dataset, Document
from adaptlab.data.pdf import PdfProblem, read_pdf_pages
from adaptlab.errors import ConfigError, DataError
from adaptlab.storage.names import check_name

__all__ = [
    "EDGE_LINES",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "EIS_EXCLUDE",
    "EIS_INCLUDE",
    "SUFFIXES",
    "CleanOptions",
    "PagedDocument",
    "clean_pages",
    "clean_text",
    "corpus_from_dataset",
    "load_documents",
    "select_files",
]

log = logging.getLogger(__name__)

SUFFIXES: tuple[str, ...] = (".txt", ".md", ".jsonl", ".pdf")
"""File types a raw corpus folder may hold; other files are ignored."""

MAX_FILE_BYTES = 1 << 30
"""Default largest corpus file read (1 GiB; ``load_documents(max_file_bytes=...)``): checked
before reading, so a stray disk image or dump is one clear error, not an exhausted machine."""

MAX_LINE_BYTES = 64 << 20
"""Default longest line of a ``.jsonl`` corpus file (64 MiB; ``load_documents(max_line_bytes=...)``)."""

EIS_INCLUDE: tuple[str, ...] = ("*Final EIS*", "*Final Vol*")
"""Include patterns of the EIS study: main bodies of final statements."""

EIS_EXCLUDE: tuple[str, ...] = ("*Appendix*", "*Executive Summary*", "*Comment*")
"""Exclude patterns of the EIS study: supporting material, not the main content."""


@dataclass(frozen=True)
class PagedDocument(Document):
    """A document whose text came from pages (a PDF): ``page_starts[i]`` is the character offset
    in ``text`` where page ``i + 1`` starts (non-decreasing; an empty page starts where the next
    one does). :meth:`page_at` maps an offset to its 1-based page."""

    page_starts: tuple[int, ...] = ()

    def page_at(self, offset: int) -> int:
        """The 1-based page holding character ``offset`` (1 when there are no page starts)."""
        import bisect

        if not self.page_starts:
            return 1
        return max(1, bisect.bisect_right(self.page_starts, offset))


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    rel_l = rel.lower()
    return any(fnmatch.fnmatchcase(name, p.lower()) or fnmatch.fnmatchcase(rel_l, p.lower()) for p in patterns)


def _patterns(value: str | Sequence[str] | None, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    out = tuple(value)
    bad = [p for p in out if not isinstance(p, str) or not p]
    if bad:
        raise ConfigError(f"{key}: expected non-empty glob strings, got {bad[0]!r}")
    return out


def select_files(
    root: str | Path,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
) -> list[Path]:
    """Corpus files under ``root`` (recursively), sorted by relative path.

    A file is kept when its suffix is one of :data:`SUFFIXES`, it matches at least one
    ``include`` pattern (all files when ``include`` is empty) and no ``exclude`` pattern.
    Hidden files and folders (name starting with ``.``) are skipped.

    Symlinks never lead out of ``root``: a linked file whose target lies outside the folder is
    skipped with one warning naming the link and its target (a link within the folder is read);
    linked folders are not descended into (one warning when they point outside), so link loops
    are harmless.
    """
    base = Path(root)
    inc = _patterns(include, "include")
    exc = _patterns(exclude, "exclude")
    if base.is_file():
        return [base] if base.suffix.lower() in SUFFIXES else []
    if not base.is_dir():
        raise DataError(f"{base}: no such file or folder (expected a folder of .txt/.md/.pdf/.jsonl files)")
    out: list[tuple[str, Path]] = []
    for p in _corpus_files(base):
        rel = p.relative_to(base).as_posix()
        if p.suffix.lower() not in SUFFIXES:
            continue
        if inc and not _matches(rel, inc):
            continue
        if exc and _matches(rel, exc):
            continue
        out.append((rel, p))
    return [p for _, p in sorted(out)]


def _corpus_files(base: Path) -> list[Path]:
    """Every regular file under ``base`` (hidden names skipped), symlinks kept inside ``base``."""
    inside = base.resolve()
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not _outside_link(here / d, inside))
        for name in sorted(filenames):
            path = here / name
            if name.startswith(".") or (path.is_symlink() and _outside_link(path, inside)):
                continue
            if path.is_file():
                found.append(path)
    return found


def _outside_link(path: Path, inside: Path) -> bool:
    """Whether ``path`` is a symlink whose target is outside ``inside`` (warned once, by name).
    A linked folder inside the corpus is not descended into either (os.walk does not follow it);
    its files load through their own path."""
    if not path.is_symlink():
        return False
    target = Path(os.path.realpath(path))
    if target == inside or inside in target.parents:
        return False
    log.warning("%s: symlink to %s, outside the corpus folder %s; skipped", path, target, inside)
    return True


_FILE_ID_MAX = 4096
"""Longest document id taken from a file's relative path (ids are checked like every name)."""


def _file_id(rel: str, path: Path) -> str:
    """The id of the document in the file ``rel``: its path without suffix, runs of white space
    as ``_``, then the one name rule (:func:`adaptlab.storage.check_name`: no control or bidi
    character, NFC)."""
    stem = re.sub(r"\s+", "_", rel.rsplit(".", 1)[0].strip())
    return check_name(stem, f"{path}: document id from the file name", max_length=_FILE_ID_MAX)


def _jsonl_documents(path: Path, max_line_bytes: int, opts: CleanOptions | None) -> Iterator[tuple[Document, str]]:
    """(document, where) of each line of a ``.jsonl`` corpus file, read line by line, its text
    cleaned with ``opts`` (None: raw); the parsed text is handed over to the cleaner
    (:func:`~adaptlab.data.clean.clean_held`), not kept beside the cleaned one."""
    for number, obj in iter_jsonl(path, max_line_bytes=max_line_bytes):
        where = f"{path}:{number}"
        key = "id" if "id" in obj else "_id" if "_id" in obj else None
        if key is None:
            raise DataError(f"{where}: missing key 'id'; each line needs 'id' and 'text'")
        if "text" not in obj:
            raise DataError(f"{where}: missing key 'text'; each line needs 'id' and 'text'")
        doc_id = str_id(obj[key], where, key)
        title = obj.get("title", "") or ""
        if not isinstance(obj["text"], str):
            raise DataError(f"{where}: 'text' must be a string, got {type(obj['text']).__name__}")
        if not isinstance(title, str):
            raise DataError(f"{where}: 'title' must be a string, got {type(title).__name__}")
        held = [obj.pop("text")]
        yield Document(doc_id, clean_held(held, opts)[0] if opts is not None else held.pop(), title), where


def _read_file(path: Path, rel: str, opts: CleanOptions | None, max_line_bytes: int) -> Iterator[tuple[Document, str]]:
    """(document, where) for each document in one file, its text already cleaned with ``opts``
    (None: raw); ``where`` names it in errors. A text file is cleaned as it is read."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _jsonl_documents(path, max_line_bytes, opts)
    elif suffix == ".pdf":
        raw = "\f".join(read_pdf_pages(path))
        text, starts = clean_pages(raw, opts) if opts is not None else _raw_pages(raw)
        yield PagedDocument(_file_id(rel, path), text, page_starts=starts), str(path)
    else:
        text = clean_file(path, opts)[0] if opts is not None else read_text(path)
        yield Document(_file_id(rel, path), text), str(path)


def _limit(value: int, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key}: expected a positive number of bytes, got {value!r}")
    return value


def _check_size(path: Path, limit: int) -> int:
    """The file's size; a DataError naming the file and the limit when it is larger (checked
    before reading)."""
    size = path.stat().st_size
    if size > limit:
        raise DataError(
            f"{path}: {size:,} bytes, over the limit of {limit:,} bytes per corpus file; split the "
            "file, or raise the limit (max_file_bytes) if the machine has the memory for it"
        )
    return size


_TRIM_BYTES = 8 << 20
"""A corpus with a file this large gives the C heap's free memory back to the system once loaded
(:func:`_give_back_freed_memory`)."""


def _give_back_freed_memory() -> None:
    """glibc's ``malloc_trim(0)``: free heap pages go back to the system (nothing elsewhere).

    Loading frees blocks as large as a file's longest line, and glibc keeps them (its mmap
    threshold rises to the largest block freed, so later blocks of that size come from a heap it
    does not shrink); chunking, which allocates in small pieces, would then grow the resident
    memory on top of them. Loading and chunking a 12 MB one-line .txt grew peak RSS by 3.6-3.7x
    its size without this, 2.7-2.9x with it (loading alone: 2.7-2.9x either way)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def load_documents(
    root: str | Path,
    *,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    clean: bool | CleanOptions = True,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> list[Document]:
    """Read a raw corpus: a folder (or one file) of ``.txt`` / ``.md`` / ``.pdf`` / ``.jsonl``
    documents.

    ``.txt`` and ``.md`` files are one document each, id = relative path without suffix, white
    space replaced by ``_`` (``Final EIS Vol 1.txt`` -> ``Final_EIS_Vol_1``). ``.jsonl`` files
    hold one object per line with ``id`` (or ``_id``), ``text`` and an optional ``title``.
    ``clean`` applies :func:`clean_text` (``True`` = default options); documents empty after
    cleaning are skipped with a logged warning. Duplicate ids raise DataError naming both
    places; malformed JSON and non-UTF-8 bytes raise DataError with file and line.

    A ``.pdf`` file is one :class:`PagedDocument` (pages joined by form feeds before cleaning,
    page starts kept; without ``clean`` only the form feeds are dropped). A PDF that cannot be
    read (encrypted, no text layer, damaged) is one warning line naming the file and the
    reason, and is skipped; DataError only when nothing at all is left.

    Limits, checked before a file is read: ``max_file_bytes`` per file (default 1 GiB) and
    ``max_line_bytes`` per ``.jsonl`` line (default 64 MiB); over either is a DataError naming
    the file and the limit. Symlinks out of the folder are skipped (:func:`select_files`).
    """
    opts = CleanOptions() if clean is True else clean if isinstance(clean, CleanOptions) else None
    max_file_bytes, max_line_bytes = _limit(max_file_bytes, "max_file_bytes"), _limit(max_line_bytes, "max_line_bytes")
    base = Path(root)
    files = select_files(base, include, exclude)
    if not files:
        raise DataError(
            f"{base}: no corpus files selected (suffixes {', '.join(SUFFIXES)}; "
            f"include={list(_patterns(include, 'include'))}, "
            f"exclude={list(_patterns(exclude, 'exclude'))})"
        )
    largest = max(_check_size(path, max_file_bytes) for path in files)
    docs: list[Document] = []
    seen: dict[str, str] = {}
    skipped = 0
    problems: list[PdfProblem] = []
    for path in files:
        rel = path.name if base.is_file() else path.relative_to(base).as_posix()
        try:
            for doc, where in _read_file(path, rel, opts, max_line_bytes):
                if doc.id in seen:
                    raise DataError(
                        f"{where}: duplicate document id {doc.id!r} (first seen at {seen[doc.id]}); "
                        "ids must be unique across the corpus"
                    )
                seen[doc.id] = where
                if doc.text.strip():
                    docs.append(doc)
                else:
                    skipped += 1
                    log.warning("%s: document %r is empty after cleaning; skipped", where, doc.id)
        except PdfProblem as e:
            problems.append(e)
            log.warning("%s; skipped", e)
    _report(base, docs, problems, skipped)
    if largest >= _TRIM_BYTES:
        _give_back_freed_memory()
    return docs


def _report(base: Path, docs: list[Document], problems: list[PdfProblem], skipped: int) -> None:
    """The summary warnings of :func:`load_documents`; DataError when no document is left."""
    if problems:
        log.warning(
            "%s: %d PDF file(s) skipped (%s)",
            base,
            len(problems),
            ", ".join(f"{n} {k}" for k, n in sorted(Counter(p.kind for p in problems).items())),
        )
    if not docs:
        if problems:
            raise DataError(f"{base}: no readable document; first problem: {problems[0]}")
        raise DataError(f"{base}: every selected document is empty (after cleaning)")
    if skipped:
        log.warning("%s: %d empty document(s) skipped", base, skipped)


def _raw_pages(text: str) -> tuple[str, tuple[int, ...]]:
    """Pages joined without cleaning: form feeds become newlines, page starts recorded."""
    starts, offset = [], 0
    for page in text.split("\f"):
        starts.append(offset)
        offset += len(page) + 1
    return text.replace("\f", "\n"), tuple(starts)


def corpus_from_dataset(dataset: Dataset, *, clean: bool | CleanOptions = False) -> list[Document]:
    """The documents of an adaptlab Dataset as a raw corpus, in corpus order.

    The title, when present, becomes the first line of the text (``title + "\\n" + text``) so
    that it lands in the first chunk; the returned documents have no separate title.
    """
    opts = CleanOptions() if clean is True else clean if isinstance(clean, CleanOptions) else None
    out = []
    for doc in dataset.corpus.values():
        text = f"{doc.title}\n{doc.text}" if doc.title else doc.text
        if opts is not None:
            text = clean_text(text, opts)
        if text.strip():
            out.append(Document(doc.id, text))
    return out
