"""Test helper: write small multi-page PDFs with known text (fpdf2), plus broken ones."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def write_pdf(
    path: Path,
    pages: Sequence[str],
    *,
    header: str | None = "Project Alpha EIS",
    page_numbers: bool = True,
    password: str | None = None,
) -> Path:
    """One PDF page per entry of ``pages`` (text wrapped by fpdf2), with a running header and a
    ``Page n`` footer on every page unless turned off."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=11)
    for i, text in enumerate(pages, 1):
        pdf.add_page()
        if header:
            pdf.set_xy(10, 8)
            pdf.cell(0, 6, header)
        pdf.set_xy(10, 20)
        pdf.multi_cell(190, 5, text)
        if page_numbers:
            pdf.set_xy(10, 285)
            pdf.cell(0, 6, f"Page {i}")
    if password is not None:
        pdf.set_encryption(owner_password="owner", user_password=password)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def write_scanned_pdf(path: Path, n_pages: int = 2) -> Path:
    """A PDF with drawings only (no text layer), as a scan without OCR looks to a text reader."""
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(n_pages):
        pdf.add_page()
        pdf.rect(20, 20, 100, 150, style="F")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


TOPICS = ("wetland", "groundwater", "noise", "traffic", "habitat", "emissions", "cultural", "soil")


def topic_pages(doc: int, n_pages: int, sentences: int = 6) -> list[str]:
    """Page texts whose sentences name a distinct topic and page, so retrieval can find them."""
    pages = []
    for p in range(1, n_pages + 1):
        topic = TOPICS[(doc * 3 + p) % len(TOPICS)]
        pages.append(
            " ".join(
                f"Section {doc}.{p} describes the {topic} survey number {doc * 100 + p * 10 + s} "
                f"near site {chr(65 + doc)}{p} and its mitigation measure {s}."
                for s in range(sentences)
            )
        )
    return pages
