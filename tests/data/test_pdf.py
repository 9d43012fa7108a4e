"""PDF corpora: page text, cleaning across pages, page references, one line per bad file."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("fpdf")
pytest.importorskip("pypdf")

from adaptlab.data.documents import PagedDocument, clean_pages, load_documents  # noqa: E402
from adaptlab.data.pdf import PdfProblem, page_ref, parse_page_ref, read_pdf_pages  # noqa: E402
from adaptlab.errors import DataError  # noqa: E402
from pdfmaker import topic_pages, write_pdf, write_scanned_pdf  # noqa: E402


def test_read_pages_recovers_known_text(tmp_path):
    pages = topic_pages(0, 4)
    path = write_pdf(tmp_path / "a.pdf", pages)
    got = read_pdf_pages(path)
    assert len(got) == 4
    for want, text in zip(pages, got):
        assert " ".join(want.split()) in " ".join(text.split())


def test_load_folder_of_pdfs_keeps_pages_and_drops_furniture(tmp_path):
    pages = topic_pages(1, 5)
    write_pdf(tmp_path / "Final EIS.pdf", pages)
    (tmp_path / "notes.txt").write_text("A plain text note.")
    docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["Final_EIS", "notes"]
    doc = docs[0]
    assert isinstance(doc, PagedDocument) and len(doc.page_starts) == 5
    assert "Project Alpha EIS" not in doc.text and "Page 3" not in doc.text
    for p, want in enumerate(pages, 1):
        first_sentence = want.split(". ")[0]
        at = " ".join(doc.text.split()).find(first_sentence)
        assert at >= 0
        offset = doc.text.find(first_sentence.split()[0] + " " + first_sentence.split()[1], doc.page_starts[p - 1])
        assert doc.page_at(offset) == p


def test_dehyphenation_across_lines_and_pages():
    text = "Head\nthe environ-\nmental review\nPage 1\fHead\ncon-\ntinued here.\fHead\nend.\fHead\nx."
    cleaned, starts = clean_pages(text)
    flat = " ".join(cleaned.split())
    assert "the environmental review" in flat and "continued here." in flat
    assert "Head" not in cleaned and len(starts) == 4
    assert cleaned[starts[1] :].startswith("continued")


def test_bad_pdfs_are_one_line_each_and_the_rest_loads(tmp_path, caplog):
    write_pdf(tmp_path / "good.pdf", topic_pages(2, 2))
    write_pdf(tmp_path / "locked.pdf", topic_pages(3, 2), password="secret")
    write_scanned_pdf(tmp_path / "scan.pdf")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n this is not a pdf")
    with caplog.at_level(logging.WARNING, logger="adaptlab.data.documents"):
        docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["good"]
    lines = [r.getMessage() for r in caplog.records]
    assert any("locked.pdf: encrypted" in m for m in lines)
    assert any("scan.pdf: no text layer" in m and "OCR" in m for m in lines)
    assert any("broken.pdf: unreadable" in m for m in lines)
    assert all("\n" not in m for m in lines)
    assert any("3 PDF file(s) skipped" in m for m in lines)
    with pytest.raises(PdfProblem, match="encrypted"):
        read_pdf_pages(tmp_path / "locked.pdf")


def test_only_bad_pdfs_is_an_error(tmp_path):
    write_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(DataError, match="no readable document.*no text layer"):
        load_documents(tmp_path)


def test_page_refs_round_trip():
    assert page_ref("EIS/vol1", 3, 7, 7) == "EIS/vol1#c3@p7"
    ref = parse_page_ref(page_ref("EIS/vol1", 3, 7, 8) + "#q0")
    assert ref is not None and (ref.document, ref.first_page, ref.last_page) == ("EIS/vol1", 7, 8)
    assert ref.label == "pp. 7-8"
    assert parse_page_ref("doc#c3") is None
