"""PDF documents: text page by page, and page references that survive into result ids.

Extraction uses pypdf (pure Python, maintained; chosen over pypdfium2 after a measurement on a
generated 60-page PDF with known text, recorded in docs/adaptation.md: both recovered the text
exactly, pypdfium2 was about 7x faster, pypdf needs no native library and reports encryption
itself). :func:`read_pdf_pages` returns one string per page; the caller
(:func:`adaptlab.data.documents.load_documents`) joins them with form feeds so that
:func:`~adaptlab.data.documents.clean_text` removes running headers, footers and page numbers
page by page, exactly as for ``pdftotext`` output.

Problems that concern one file are :class:`PdfProblem` (a DataError): encrypted with a password,
no text layer (scanned images), unreadable. The loader reports each as one line and goes on with
the rest of the corpus.

pypdf's own log lines (``Ignoring wrong pointing object``, ...) never reach the
terminal raw: they are captured while a file is read and reported through adaptlab's logging,
as one warning line for the first file that had any (later files at debug level, shown with
``--verbose``), so ``--quiet`` silences them.

Page references: a chunk of a paged document is named ``f"{doc_id}#c{i}@p{first}"`` (one page)
or ``f"{doc_id}#c{i}@p{first}-{last}"`` (:func:`page_ref`); :func:`parse_page_ref` reads
(document, first page, last page) back from any id that contains one, a question id included,
so the per-query records of the store, which hold ids only, say which pages were retrieved.
Pages are 1-based, as a PDF viewer numbers them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from adaptlab.errors import DataError

__all__ = [
    "PageRef",
    "PdfProblem",
    "page_label",
    "page_ref",
    "parse_page_ref",
    "read_pdf_pages",
]

log = logging.getLogger(__name__)

MIN_TEXT_CHARS = 20
"""A PDF whose pages together hold fewer non-space characters than this has no text layer."""


class PdfProblem(DataError):
    """One PDF cannot be read (encrypted, scanned, broken); the message is one line."""

    def __init__(self, path: Path | str, kind: str, detail: str) -> None:
        self.path = str(path)
        self.kind = kind
        super().__init__(f"{path}: {kind}: {detail}")


class _Collect(logging.Handler):
    """Keeps pypdf's log records while one file is read."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())


_PYPDF_WARNED = [False]
"""Whether pypdf's messages were reported at warning level once in this process already."""


@contextmanager
def _pypdf_messages(path: Path) -> Iterator[None]:
    """Capture pypdf's log lines while ``path`` is read; report them as one line through
    :data:`log` (a warning the first time in a process, debug afterwards).

    pypdf (>= 6) reports what it finds in a file through logging only; its Python warnings are
    deprecations of its own API. Python warnings are not captured here: ``warnings.catch_warnings``
    changes the filters of the whole process, so it caught other threads' warnings (urllib3's
    "SOCKS support ... requires PySocks", raised while Ray started in the background, was reported
    as a pypdf message of the PDF being read) and, on exit, dropped the filters other threads had
    added meanwhile."""
    logger = logging.getLogger("pypdf")
    handler, propagate = _Collect(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        messages = handler.messages
        if messages:
            first = " ".join(messages[0].split())[:160]
            more = f" (and {len(messages) - 1} more)" if len(messages) > 1 else ""
            level = logging.DEBUG if _PYPDF_WARNED[0] else logging.WARNING
            _PYPDF_WARNED[0] = True
            log.log(
                level,
                "%s: pypdf: %s%s; the text may be incomplete (further pypdf messages: --verbose)",
                path,
                first,
                more,
            )


def read_pdf_pages(path: str | Path) -> list[str]:
    """The text of each page of a PDF, in page order (an empty string for an empty page).

    Raises :class:`PdfProblem` with kind ``encrypted`` (a password is needed; PDFs encrypted
    with an empty user password, common for "no copying" flags, are opened), ``no text layer``
    (fewer than :data:`MIN_TEXT_CHARS` characters of text on all pages: scanned images; run OCR
    first, e.g. ``ocrmypdf``) or ``unreadable`` (not a PDF, truncated, damaged).
    """
    p = Path(path)
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as e:  # pragma: no cover - pypdf is a main dependency
        raise DataError(f"{p}: reading PDFs needs pypdf (pip install pypdf)") from e
    with _pypdf_messages(p):
        pages = _pages(p, PdfReader, PyPdfError)
    if not pages:
        raise PdfProblem(p, "unreadable", "the file has no pages")
    if sum(len("".join(t.split())) for t in pages) < MIN_TEXT_CHARS:
        raise PdfProblem(
            p,
            "no text layer",
            f"{len(pages)} page(s) without extractable text (scanned images?); run OCR first, e.g. ocrmypdf",
        )
    return pages


def _pages(p: Path, PdfReader: type, PyPdfError: type[Exception]) -> list[str]:  # noqa: N803 - the classes
    """The text of every page; PdfProblem for an encrypted or damaged file."""
    try:
        reader = PdfReader(str(p))
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except (PyPdfError, NotImplementedError, ValueError) as e:
                raise PdfProblem(p, "encrypted", f"cannot decrypt ({_short(e)}); save an unencrypted copy") from e
            if not ok:
                raise PdfProblem(p, "encrypted", "a password is needed; save an unencrypted copy")
        pages = [page.extract_text() or "" for page in reader.pages]
    except PdfProblem:
        raise
    except (PyPdfError, OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise PdfProblem(p, "unreadable", f"{_short(e)} (damaged or not a PDF)") from e
    except Exception as e:  # noqa: BLE001 - pypdf raises assorted errors on damaged files
        raise PdfProblem(p, "unreadable", f"{_short(e)} (damaged or not a PDF)") from e
    return pages


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 160 else text[:157] + "..."


@dataclass(frozen=True)
class PageRef:
    """Where a chunk comes from: its document and its first and last page (1-based)."""

    document: str
    first_page: int
    last_page: int

    @property
    def label(self) -> str:
        """``"p. 3"`` or ``"pp. 3-4"``."""
        return page_label(self.first_page, self.last_page)


_REF = re.compile(r"^(?P<doc>.*)#c\d+@p(?P<first>\d+)(?:-(?P<last>\d+))?(?:#.*)?$")


def page_ref(doc_id: str, index: int, first_page: int, last_page: int) -> str:
    """The id of chunk ``index`` of a paged document: ``doc#c{index}@p{first}[-{last}]``."""
    pages = f"{first_page}" if last_page == first_page else f"{first_page}-{last_page}"
    return f"{doc_id}#c{index}@p{pages}"


def parse_page_ref(item_id: str) -> PageRef | None:
    """(document, first page, last page) of a chunk id (or a question id built on one) made by
    :func:`page_ref`; None for an id without pages."""
    m = _REF.match(item_id or "")
    if m is None:
        return None
    first = int(m["first"])
    return PageRef(m["doc"], first, int(m["last"]) if m["last"] else first)


def page_label(first: int, last: int) -> str:
    """``"p. 3"`` for one page, ``"pp. 3-4"`` for a range."""
    return f"p. {first}" if first == last else f"pp. {first}-{last}"
