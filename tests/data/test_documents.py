"""Raw corpora: cleaning rules, folder loading, name filters and error messages."""

from __future__ import annotations

import json

import pytest

from adaptlab.data.dataset import Dataset, Document
from adaptlab.data.documents import (
    EIS_EXCLUDE,
    EIS_INCLUDE,
    CleanOptions,
    clean_pages,
    clean_text,
    corpus_from_dataset,
    load_documents,
    select_files,
)
from adaptlab.errors import ConfigError, DataError


def test_whitespace_is_normalised():
    raw = "Line\tone  has\u00a0tabs.\r\nLine two\u200b here.  \r\n\n\n\nNext para.\n"
    assert clean_text(raw) == "Line one has tabs.\nLine two here.\n\nNext para."


@pytest.mark.parametrize(
    "line",
    [
        "Page 3",
        "page 3 of 10",
        "PAGE 12 OF 40",
        "- 3 -",
        "\u2013 14 \u2013",
        "7",
        "3 of 10",
        "3/10",
        "p. 4",
        "[5]",
        "(6)",
    ],
)
def test_page_number_lines_are_removed(line):
    assert clean_text(f"First sentence here.\n{line}\nSecond sentence here.") == (
        "First sentence here.\nSecond sentence here."
    )


def test_numbers_inside_text_are_kept():
    text = "The site has 3 wells.\nSee page 3 of the report.\n2024 was wet."
    assert clean_text(text) == text


WORDS = [
    "river",
    "wetland",
    "permit",
    "habitat",
    "noise",
    "traffic",
    "soil",
    "air",
    "water",
    "cultural",
    "visual",
    "energy",
]


def test_running_headers_and_footers_are_removed_from_page_edges():
    pages = []
    for i in range(1, 5):
        body = [f"The {WORDS[(i + j) % 12]} study {i}.{j} found {WORDS[j]} effects." for j in range(8)]
        pages.append(
            "\n".join(
                [
                    f"Final EIS - Chapter {i}",
                    "Affected Environment",
                    *body,
                    f"Page {i} of 4",
                    "U.S. Department of Energy",
                ]
            )
        )
    cleaned = clean_text("\f".join(pages))
    for furniture in ("Final EIS", "Affected Environment", "Department of Energy", "Page"):
        assert furniture not in cleaned
    assert len(cleaned.splitlines()) == 32  # every body line kept, no blank line left behind
    assert cleaned.splitlines()[0] == "The wetland study 1.0 found river effects."


def test_repeated_lines_without_page_breaks():
    text = "\n".join(
        ["Project Alpha EIS", f"The basin holds {i} species.", "Project Alpha EIS"][k]
        for i in range(3)
        for k in range(3)
    )
    # the header (no sentence end) goes; the sentence that differs only by a number stays
    assert clean_text(text) == "\n".join(f"The basin holds {i} species." for i in range(3))
    # a line repeated only twice is content, not furniture
    assert clean_text("Summary\nA.\nSummary\nB.") == "Summary\nA.\nSummary\nB."


def test_clean_options_switch_rules_off():
    text = "Header\nA sentence.\nHeader\nB sentence.\nHeader\n3"
    assert clean_text(text, CleanOptions(page_numbers=False, repeat_min=0)) == text
    with pytest.raises(ConfigError, match="repeat_min"):
        CleanOptions(repeat_min=1)


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_load_folder_with_eis_filters(tmp_path):
    _write(tmp_path / "agency" / "Project A Final EIS Vol 1.txt", "Main body of A.\nPage 1")
    _write(tmp_path / "agency" / "Project A Final EIS Appendix B.txt", "Appendix text.")
    _write(tmp_path / "Project B final eis.md", "# Title\n\nMain body of B.")
    _write(tmp_path / "Project B Final EIS Comment Responses.txt", "Comments.")
    _write(tmp_path / "Project C Draft EIS.txt", "Draft text.")
    _write(tmp_path / "notes.pdf", "not a text file")
    _write(tmp_path / ".hidden" / "Final EIS.txt", "hidden")
    docs = load_documents(tmp_path, include=EIS_INCLUDE, exclude=EIS_EXCLUDE)
    assert [d.id for d in docs] == ["Project_B_final_eis", "agency/Project_A_Final_EIS_Vol_1"]
    assert docs[1].text == "Main body of A."
    # without filters every .txt/.md/.pdf/.jsonl file is selected (notes.pdf is broken: a
    # loader would skip it with one warning line)
    assert len(select_files(tmp_path)) == 6


def test_load_jsonl(tmp_path):
    lines = [{"id": "a", "text": "Alpha text."}, {"_id": 7, "text": "Beta.", "title": "B"}]
    _write(tmp_path / "docs.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    docs = load_documents(tmp_path / "docs.jsonl")
    assert docs == [Document("a", "Alpha text."), Document("7", "Beta.", "B")]


def test_bad_jsonl_names_file_and_line(tmp_path):
    p = _write(tmp_path / "docs.jsonl", '{"id": "a", "text": "ok"}\n{"id": "b", "text": \n')
    with pytest.raises(DataError, match=r"docs\.jsonl:2: malformed JSON"):
        load_documents(p)
    _write(p, '{"id": "a", "text": "ok"}\n{"id": "b"}\n')
    with pytest.raises(DataError, match=r"docs\.jsonl:2: missing key 'text'"):
        load_documents(p)
    _write(p, '{"id": "a", "text": 5}\n')
    with pytest.raises(DataError, match=r"docs\.jsonl:1: 'text' must be a string"):
        load_documents(p)


def test_bad_encoding_names_file_and_line(tmp_path):
    p = tmp_path / "latin.txt"
    p.write_bytes("first line\nsecond caf\xe9 line\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin\.txt:2: invalid UTF-8"):
        load_documents(tmp_path)


def test_duplicate_ids_and_empty_selection(tmp_path):
    _write(tmp_path / "a.txt", "Text one.")
    _write(tmp_path / "b.jsonl", '{"id": "a", "text": "Text two."}\n')
    with pytest.raises(DataError, match="duplicate document id 'a'"):
        load_documents(tmp_path)
    with pytest.raises(DataError, match="no corpus files selected"):
        load_documents(tmp_path, include="*Final*")
    with pytest.raises(DataError, match="no such file or folder"):
        load_documents(tmp_path / "missing")


def test_empty_documents_are_skipped(tmp_path, caplog):
    _write(tmp_path / "a.txt", "Real text.")
    _write(tmp_path / "b.txt", "Page 1\n\n 2 \n")
    docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["a"]
    assert "empty after cleaning" in caplog.text


def test_corpus_from_dataset_puts_title_first():
    ds = Dataset.build("x", [Document("d1", "Body.", "Title"), Document("d2", "Only body.")], {}, {})
    assert corpus_from_dataset(ds) == [Document("d1", "Title\nBody."), Document("d2", "Only body.")]


TRICKY = [
    "",
    "a",
    "a\n",
    "\n\n\n",
    "a\r",
    "a\r\nb\r\n\r\n",
    "x\fy\n\rz",
    "\ufeffBOM line.\n",
    "Header\n" * 5 + "Body.",
    "Report\nbody one.\n\fReport\nbody two.\n\fReport\nbody three-\ncontinues here.\n\fPage 4\n",
    "tabs\tand\u00a0spaces  here\u200b.\n\n\n\nnext para-\n\ngraph\n",
]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("block", [1, 7, 1 << 20])
def test_streaming_cleaner_is_block_size_independent_and_reads_files_the_same(tmp_path, monkeypatch, text, block):
    """The cleaner runs on blocks of lines (data/clean.py): any block size, and a file read a
    block at a time, give exactly what the whole string gives."""
    from adaptlab.data import clean as clean_mod

    whole = clean_mod.clean_pages(text)
    monkeypatch.setattr(clean_mod, "BLOCK_CHARS", block)
    f = tmp_path / "t.txt"
    f.write_bytes(text.encode("utf-8"))
    assert clean_mod.clean_pages(text) == whole == clean_mod.clean_file(f)


def test_cleaned_pages_of_a_known_paginated_text():
    text = "Report\nbody one.\n\fReport\nbody two.\n\fReport\nbody three-\ncontinues here.\n\fPage 4\n"
    cleaned, starts = clean_pages(text)
    # the page ends are paragraph breaks; "three-" takes the next line's first word; the last page
    # held only its number, so it starts where the text ends
    assert cleaned == "body one.\n\nbody two.\n\nbody threecontinues\nhere."
    assert starts == (0, 11, 22, 47) and len(cleaned) == 47
