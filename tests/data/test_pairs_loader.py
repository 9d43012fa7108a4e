"""Generic (question, context) pair files: CSV, TSV and JSON lines."""

from __future__ import annotations

import json

import pytest

from adaptlab.data.pairs import PairSettings, load_pairs
from adaptlab.errors import ConfigError, DataError


def test_csv_default_columns_merge_identical_contexts(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text(
        'question,context\nWhat is A?,"A is first, clearly."\nWhat is B?,B is second.\n'
        'Why A?,"A is  first, clearly."\n',
        encoding="utf-8",
    )
    ds = load_pairs(path)
    assert ds.name == "qa"
    assert {k: d.text for k, d in ds.corpus.items()} == {"d0": "A is first, clearly.", "d1": "B is second."}
    assert ds.queries == {"q0": "What is A?", "q1": "What is B?", "q2": "Why A?"}
    assert ds.qrels == {"q0": {"d0": 1}, "q1": {"d1": 1}, "q2": {"d0": 1}}


def test_tsv_with_id_and_title_columns(tmp_path):
    path = tmp_path / "qa.tsv"
    path.write_text(
        "qid\tq\tpid\ttitle\tpassage\n"
        "x1\tWhat is A?\tp1\tT\tA text\n"
        "x1\tWhat is A?\tp2\tT\tmore A text\n"
        "x2\tWhat is B?\tp1\tT\tA text\n",
        encoding="utf-8",
    )
    ds = load_pairs(
        path, question_col="q", context_col="passage", query_id_col="qid", doc_id_col="pid", title_col="title", name="t"
    )
    assert ds.name == "t" and ds.corpus["p1"].full_text() == "T A text"
    assert ds.qrels == {"x1": {"p1": 1, "p2": 1}, "x2": {"p1": 1}}


def test_jsonl_rows(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"question": "Q1?", "context": "C1.", "id": 1}, {"question": "Q2?", "context": "C2.", "id": 2}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    ds = load_pairs(path, query_id_col="id")
    assert ds.queries == {"1": "Q1?", "2": "Q2?"}


def test_errors_name_file_and_line(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("question,context\nQ1?,C1.\n,C2.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.csv:3: column 'question' is empty"):
        load_pairs(path)
    path.write_text("question,text\nQ1?,C1.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.csv:1: the header has no column 'context' \(columns: question, text\)"):
        load_pairs(path)
    path.write_text('question,context\nQ1?,C1.\n"Q2?\nstill Q2",C2.\nQ3?,C3.,extra\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.csv:5: expected 2 fields as in the header, got 3"):
        load_pairs(path)
    path.write_text("qid,question,context\nx,Q1?,C1.\nx,Q2?,C2.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.csv:3: duplicate query id 'x' with a different question than on line 2"):
        load_pairs(path, query_id_col="qid")
    path.write_text("pid,question,context\np,Q1?,C1.\np,Q2?,C2.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.csv:3: document id 'p' was given another context on line 2"):
        load_pairs(path, doc_id_col="pid")
    path.write_text("question,context\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.csv: no rows"):
        load_pairs(path)


def test_jsonl_errors(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "Q", "context": "C"}\n{"question": "Q2"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.jsonl:2: missing key 'context'"):
        load_pairs(path)
    path.write_text('{"question": "Q", "context": "C"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.jsonl:2: malformed JSON line"):
        load_pairs(path)
    path.write_text('{"question": "Q", "context": ["C"]}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"qa\.jsonl:1: column 'context' must hold text, got list"):
        load_pairs(path)


def test_format_and_missing_file(tmp_path):
    path = tmp_path / "qa.txt"
    path.write_text("question,context\nQ,C\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pass file_format, one of csv, jsonl, tsv"):
        load_pairs(path)
    assert load_pairs(path, file_format="csv").n_queries == 1
    with pytest.raises(DataError, match=r"absent\.csv: file not found"):
        load_pairs(tmp_path / "absent.csv")


def test_bad_encoding(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_bytes(b"question,context\nQ,C\nQ2,\xff\xfe\n")
    with pytest.raises(DataError, match=r"qa\.csv:3: invalid UTF-8 \(byte offset 24"):
        load_pairs(path)


def test_pair_settings_whole_or_as_keyword_options(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_text("id,q,c\n1,What is A?,A.\n2,What is B?,B.\n", encoding="utf-8")
    by_keywords = load_pairs(path, question_col="q", context_col="c", query_id_col="id", name="qa2")
    whole = load_pairs(path, PairSettings(question_col="q", context_col="c", query_id_col="id", name="qa2"))
    mixed = load_pairs(path, PairSettings(question_col="q", context_col="c", query_id_col="id"), name="qa2")
    for ds in (whole, mixed):
        assert (ds.name, ds.queries, ds.qrels) == (by_keywords.name, by_keywords.queries, by_keywords.qrels)
        assert {k: d.text for k, d in ds.corpus.items()} == {k: d.text for k, d in by_keywords.corpus.items()}
    with pytest.raises(
        TypeError,
        match=r"load_pairs\(\) got an unexpected keyword argument 'question_column'; expected one of .*question_col",
    ):
        load_pairs(path, question_column="q")
