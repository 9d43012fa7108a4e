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

Cleaning (:func:`clean_text`) removes what text extraction from paginated documents leaves
behind; the rules are in its docstring and in docs/sections/adaptation-data.md.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adaptlab.data._io import iter_jsonl, read_text, str_id
from adaptlab.data.dataset import Dataset, Document
from adaptlab.data.pdf import PdfProblem, read_pdf_pages
from adaptlab.errors import ConfigError, DataError

__all__ = [
    "EDGE_LINES",
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

EIS_INCLUDE: tuple[str, ...] = ("*Final EIS*", "*Final Vol*")
"""Include patterns of the EIS study: main bodies of final statements."""

EIS_EXCLUDE: tuple[str, ...] = ("*Appendix*", "*Executive Summary*", "*Comment*")
"""Exclude patterns of the EIS study: supporting material, not the main content."""


@dataclass(frozen=True)
class CleanOptions:
    """Switches of :func:`clean_text`.

    ``repeat_min``: a short line (at most ``repeat_max_chars`` characters) that occurs at least
    this many times in one document, digits ignored, is a running header or footer and is
    removed; 0 turns the rule off. ``dehyphenate``: a word broken across lines with a hyphen
    (``environ-`` at a line end, ``mental`` starting the next kept line in lower case) is joined.
    """

    page_numbers: bool = True
    repeat_min: int = 3
    repeat_max_chars: int = 80
    dehyphenate: bool = True

    def __post_init__(self) -> None:
        if self.repeat_min < 0 or self.repeat_min == 1:
            raise ConfigError(
                f"CleanOptions.repeat_min={self.repeat_min}: expected 0 (off) or an integer >= 2"
            )
        if self.repeat_max_chars < 1:
            raise ConfigError(
                f"CleanOptions.repeat_max_chars={self.repeat_max_chars}: "
                "expected a positive integer"
            )


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


# Any run of horizontal white space, including no-break and other Unicode spaces.
_HSPACE = re.compile(r"[^\S\n]+")
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_PAGE_NUMBER = re.compile(
    r"""^(?:
        (?:page|p\.|pg\.?)\s*\d+(?:\s*(?:of|/)\s*\d+)?   # Page 3, Page 3 of 10, p. 3
      | \d+\s*(?:of|/)\s*\d+                             # 3 of 10, 3/10
      | [-\u2013\u2014]\s*\d+\s*[-\u2013\u2014]          # - 3 -, -- 3 --
      | \d{1,4}                                          # a lone number
      | [\[(]\s*\d+\s*[\])]                              # [3], (3)
    )$""",
    re.IGNORECASE | re.VERBOSE,
)
_DIGITS = re.compile(r"\d+")

EDGE_LINES = 3
"""Lines at the top and at the bottom of a page where running headers and footers are sought."""


def _repeat_key(line: str) -> str:
    return _DIGITS.sub("#", line.lower())


def _edge_positions(lines: list[str], page: list[int], edge: int) -> list[bool]:
    """Whether each line is among the first or last ``edge`` non-empty lines of its page."""
    out = [False] * len(lines)
    by_page: dict[int, list[int]] = {}
    for i, line in enumerate(lines):
        if line:
            by_page.setdefault(page[i], []).append(i)
    for idx in by_page.values():
        for i in idx[:edge] + idx[-edge:]:
            out[i] = True
    return out


def clean_text(text: str, options: CleanOptions | None = None) -> str:
    """Normalise white space and remove page furniture from one extracted document.

    Rules, in order:

    1. Line ends ``\\r\\n`` and ``\\r`` become ``\\n``; zero-width characters and soft
       hyphens are dropped; every run of horizontal white space (tabs, no-break and other
       Unicode spaces) becomes one space; lines are stripped.
    2. Page numbers: a whole line that is ``Page 3``, ``Page 3 of 10``, ``p. 3``, ``3 of 10``,
       ``3/10``, ``- 3 -``, ``[3]``, ``(3)`` or a lone number of at most 4 digits is removed.
    3. Running headers and footers, for lines of at most ``repeat_max_chars`` characters
       compared lower-cased with every digit run replaced by ``#`` (so ``Chapter 3 - Draft`` and
       ``Chapter 4 - Draft`` are the same line):

       - paginated text (form feeds ``\\f``, as ``pdftotext`` writes them, at least
         ``repeat_min`` pages): a line among the first or last :data:`EDGE_LINES` non-empty
         lines of a page that occurs there on at least ``repeat_min`` pages is removed from
         those page edges;
       - text without page breaks: a line that occurs at least ``repeat_min`` times in the
         document and does not end like a sentence (``.``, ``!``, ``?``) is removed everywhere.

    4. De-hyphenation (``dehyphenate``): a kept line ending in a letter and ``-`` whose next
       kept line starts with a lower-case letter loses the hyphen and takes that first word
       (``environ-`` / ``mental impacts`` -> ``environmental`` / ``impacts``), across page
       breaks too (after headers and footers are gone).
    5. Removed lines vanish without leaving a blank line (a page break is not a paragraph
       break); runs of blank lines collapse to one (a paragraph break); blank lines at both
       ends go.

    Line breaks inside paragraphs are kept; the sentence splitter treats them as white space.
    """
    return clean_pages(text, options)[0]


def clean_pages(text: str, options: CleanOptions | None = None) -> tuple[str, tuple[int, ...]]:
    """:func:`clean_text` and, for each page of ``text`` (split at form feeds), the offset in
    the cleaned text where that page starts (see :class:`PagedDocument`)."""
    opts = options or CleanOptions()
    text = _ZERO_WIDTH.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    lines: list[str] = []
    page: list[int] = []
    pages = text.split("\f")
    for p, chunk in enumerate(pages):
        for line in chunk.split("\n"):
            lines.append(_HSPACE.sub(" ", line).strip())
            page.append(p)
    keep = [True] * len(lines)
    if opts.page_numbers:
        keep = [not _PAGE_NUMBER.match(line) for line in lines]
    if opts.repeat_min:
        short = [bool(line) and k and len(line) <= opts.repeat_max_chars
                 for line, k in zip(lines, keep)]
        if len(pages) >= opts.repeat_min:
            cand = [s and e for s, e in zip(short, _edge_positions(
                [line if k else "" for line, k in zip(lines, keep)], page, EDGE_LINES))]
            counts = Counter({key: len(pg) for key, pg in _pages_by_key(lines, page, cand).items()})
        else:
            cand = [s and not line.endswith((".", "!", "?")) for line, s in zip(lines, short)]
            counts = Counter(_repeat_key(line) for line, c in zip(lines, cand) if c)
        furniture = {k for k, c in counts.items() if c >= opts.repeat_min}
        if furniture:
            keep = [k and not (c and _repeat_key(line) in furniture)
                    for line, c, k in zip(lines, cand, keep)]
    kept = [(line, p) for line, p, k in zip(lines, page, keep) if k]
    if opts.dehyphenate:
        kept = _dehyphenate(kept)
    out: list[tuple[str, int]] = []
    for line, p in kept:
        if line or (out and out[-1][0]):
            out.append((line, p))
    while out and not out[-1][0]:
        out.pop()
    starts = [-1] * len(pages)
    offset = 0
    for line, p in out:
        if line and starts[p] < 0:
            starts[p] = offset
        offset += len(line) + 1
    end = max(0, offset - 1)
    nxt = end
    for p in range(len(pages) - 1, -1, -1):  # empty pages start where the next one does
        if starts[p] < 0:
            starts[p] = nxt
        nxt = starts[p]
    return "\n".join(line for line, _ in out), tuple(starts)


_HYPHEN_END = re.compile(r"[^\W\d_]-$")
_FIRST_WORD = re.compile(r"^([^\W\d_][\w\u2019']*[.,;:!?)\]]*)\s*(.*)$")


def _dehyphenate(kept: list[tuple[str, int]]) -> list[tuple[str, int]]:
    out = list(kept)
    emptied: set[int] = set()
    for i in range(len(out) - 1):
        line, p = out[i]
        nxt, q = out[i + 1]
        if not line or not nxt or not _HYPHEN_END.search(line) or not nxt[0].islower():
            continue
        m = _FIRST_WORD.match(nxt)
        if m is None:
            continue
        out[i] = (line[:-1] + m.group(1), p)
        out[i + 1] = (m.group(2), q)
        if not m.group(2):
            emptied.add(i + 1)
    # a line whose only word joined the line above vanishes (it was no paragraph break)
    return [item for i, item in enumerate(out) if i not in emptied]


def _pages_by_key(lines: list[str], page: list[int], cand: list[bool]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for line, p, c in zip(lines, page, cand):
        if c:
            out.setdefault(_repeat_key(line), set()).add(p)
    return out


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    rel_l = rel.lower()
    return any(
        fnmatch.fnmatchcase(name, p.lower()) or fnmatch.fnmatchcase(rel_l, p.lower())
        for p in patterns
    )


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
    """
    base = Path(root)
    inc = _patterns(include, "include")
    exc = _patterns(exclude, "exclude")
    if base.is_file():
        return [base] if base.suffix.lower() in SUFFIXES else []
    if not base.is_dir():
        raise DataError(
            f"{base}: no such file or folder (expected a folder of .txt/.md/.pdf/.jsonl files)"
        )
    out: list[tuple[str, Path]] = []
    for p in base.rglob("*"):
        rel = p.relative_to(base).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        if not p.is_file() or p.suffix.lower() not in SUFFIXES:
            continue
        if inc and not _matches(rel, inc):
            continue
        if exc and _matches(rel, exc):
            continue
        out.append((rel, p))
    return [p for _, p in sorted(out)]


def _file_id(rel: str) -> str:
    stem = rel.rsplit(".", 1)[0]
    return re.sub(r"\s+", "_", stem.strip())


def _read_file(path: Path, rel: str) -> Iterable[tuple[Document, str]]:
    """(document, where) for each document in one file; ``where`` names it in errors."""
    if path.suffix.lower() == ".jsonl":
        for number, obj in iter_jsonl(path):
            where = f"{path}:{number}"
            key = "id" if "id" in obj else "_id" if "_id" in obj else None
            if key is None:
                raise DataError(f"{where}: missing key 'id'; each line needs 'id' and 'text'")
            if "text" not in obj:
                raise DataError(f"{where}: missing key 'text'; each line needs 'id' and 'text'")
            doc_id = str_id(obj[key], where, key)
            text = obj["text"]
            title = obj.get("title", "") or ""
            if not isinstance(text, str):
                raise DataError(f"{where}: 'text' must be a string, got {type(text).__name__}")
            if not isinstance(title, str):
                raise DataError(f"{where}: 'title' must be a string, got {type(title).__name__}")
            yield Document(doc_id, text, title), where
    elif path.suffix.lower() == ".pdf":
        yield PagedDocument(_file_id(rel), "\f".join(read_pdf_pages(path))), str(path)
    else:
        yield Document(_file_id(rel), read_text(path)), str(path)


def load_documents(
    root: str | Path,
    *,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    clean: bool | CleanOptions = True,
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
    """
    opts = CleanOptions() if clean is True else clean if isinstance(clean, CleanOptions) else None
    base = Path(root)
    files = select_files(base, include, exclude)
    if not files:
        raise DataError(
            f"{base}: no corpus files selected (suffixes {', '.join(SUFFIXES)}; "
            f"include={list(_patterns(include, 'include'))}, "
            f"exclude={list(_patterns(exclude, 'exclude'))})"
        )
    docs: list[Document] = []
    seen: dict[str, str] = {}
    skipped = 0
    problems: list[PdfProblem] = []
    for path in files:
        rel = path.name if base.is_file() else path.relative_to(base).as_posix()
        try:
            items = list(_read_file(path, rel))
        except PdfProblem as e:
            problems.append(e)
            log.warning("%s; skipped", e)
            continue
        for doc, where in items:
            if doc.id in seen:
                raise DataError(
                    f"{where}: duplicate document id {doc.id!r} (first seen at {seen[doc.id]}); "
                    "ids must be unique across the corpus"
                )
            seen[doc.id] = where
            if isinstance(doc, PagedDocument):
                text, starts = clean_pages(doc.text, opts) if opts is not None else _raw_pages(doc.text)
            else:
                text, starts = (clean_text(doc.text, opts) if opts is not None else doc.text), ()
            if not text.strip():
                skipped += 1
                log.warning("%s: document %r is empty after cleaning; skipped", where, doc.id)
                continue
            if isinstance(doc, PagedDocument):
                docs.append(PagedDocument(doc.id, text, doc.title, page_starts=starts))
            else:
                docs.append(Document(doc.id, text, doc.title))
    if problems:
        log.warning("%s: %d PDF file(s) skipped (%s)", base, len(problems),
                    ", ".join(f"{n} {k}" for k, n in sorted(Counter(p.kind for p in problems).items())))
    if not docs:
        if problems:
            raise DataError(f"{base}: no readable document; first problem: {problems[0]}")
        raise DataError(f"{base}: every selected document is empty (after cleaning)")
    if skipped:
        log.warning("%s: %d empty document(s) skipped", base, skipped)
    return docs


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
