"""BEIR folders: loading, split selection and every error path (file and line named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptlab.data.beir import load_beir, read_beir_qrels
from adaptlab.errors import DataError


def _write_beir(
    root: Path,
    corpus: list[dict] | str | bytes | None = None,
    queries: list[dict] | str | None = None,
    qrels: str | None = None,
    split: str = "test",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if corpus is None:
        corpus = [
            {"_id": "d1", "title": "Alpha", "text": "alpha text"},
            {"_id": "d2", "title": "", "text": "beta text"},
            {"_id": "d3", "text": "gamma text"},
        ]
    if queries is None:
        queries = [
            {"_id": "q1", "text": "what is alpha"},
            {"_id": "q2", "text": "what is beta"},
            {"_id": "q3", "text": "unjudged"},
        ]
    if qrels is None:
        qrels = "query-id\tcorpus-id\tscore\r\nq1\td1\t1\r\nq2\td2\t2\r\nq2\td3\t0\r\n"
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        if isinstance(rows, bytes):
            (root / name).write_bytes(rows)
        elif isinstance(rows, str):
            (root / name).write_text(rows, encoding="utf-8")
        else:
            (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8", newline="")
    return root


def test_load_keeps_only_judged_queries(tmp_path):
    ds = load_beir(_write_beir(tmp_path / "tiny"))
    assert ds.name == "tiny"
    assert list(ds.corpus) == ["d1", "d2", "d3"]
    assert ds.corpus["d1"].full_text() == "Alpha alpha text"
    assert ds.corpus["d3"].title == ""
    assert ds.queries == {"q1": "what is alpha", "q2": "what is beta"}
    assert ds.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}
    assert ds.meta["split"] == "test" and ds.meta["format"] == "beir"


def test_other_split_and_missing_split(tmp_path):
    root = _write_beir(tmp_path / "b", split="dev", qrels="q1\td2\t1\n")  # no header line
    ds = load_beir(root, "dev", name="mine")
    assert ds.name == "mine" and ds.qrels == {"q1": {"d2": 1}}
    with pytest.raises(DataError, match=r"test\.tsv.*split 'test' is not available.*dev"):
        load_beir(root, "test")


def test_missing_folder_and_files(tmp_path):
    with pytest.raises(DataError, match="nowhere.*does not exist"):
        load_beir(tmp_path / "nowhere")
    root = _write_beir(tmp_path / "b")
    (root / "queries.jsonl").unlink()
    with pytest.raises(DataError, match=r"queries\.jsonl: file not found"):
        load_beir(root)


def test_malformed_json_line_names_file_and_line(tmp_path):
    corpus = '{"_id": "d1", "text": "a"}\n\n{"_id": "d2", "text": "b"\n'
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: malformed JSON line"):
        load_beir(_write_beir(tmp_path / "b", corpus=corpus))


def test_non_object_line(tmp_path):
    with pytest.raises(DataError, match=r"queries\.jsonl:1: expected a JSON object"):
        load_beir(_write_beir(tmp_path / "b", queries='["q1", "text"]\n'))


def test_missing_key(tmp_path):
    corpus = [{"_id": "d1", "text": "a"}, {"_id": "d2", "title": "no text"}]
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: missing key 'text'"):
        load_beir(_write_beir(tmp_path / "b", corpus=corpus))
    queries = [{"id": "q1", "text": "x"}]
    with pytest.raises(DataError, match=r"queries\.jsonl:1: missing key '_id'"):
        load_beir(_write_beir(tmp_path / "c", queries=queries))


def test_duplicate_ids(tmp_path):
    corpus = [{"_id": "d1", "text": "a"}, {"_id": "d2", "text": "b"}, {"_id": "d1", "text": "c"}]
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: duplicate document id 'd1' \(first seen on line 1\)"):
        load_beir(_write_beir(tmp_path / "b", corpus=corpus))
    queries = [{"_id": "q1", "text": "a"}, {"_id": "q1", "text": "b"}]
    with pytest.raises(DataError, match=r"queries\.jsonl:2: duplicate query id 'q1'"):
        load_beir(_write_beir(tmp_path / "c", queries=queries))


def test_integer_ids_become_strings_and_bad_ids_fail(tmp_path):
    corpus = [{"_id": 7, "text": "a"}]
    ds = load_beir(_write_beir(tmp_path / "b", corpus=corpus, qrels="q1\t7\t1\n"))
    assert list(ds.corpus) == ["7"]
    with pytest.raises(DataError, match=r"corpus\.jsonl:1: '_id' must be a string id"):
        load_beir(_write_beir(tmp_path / "c", corpus=[{"_id": None, "text": "a"}]))
    with pytest.raises(DataError, match=r"corpus\.jsonl:1: '_id' value 'd 1' contains whitespace"):
        load_beir(_write_beir(tmp_path / "d", corpus=[{"_id": "d 1", "text": "a"}]))


def test_qrels_naming_unknown_query_or_document(tmp_path):
    bad_q = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n"
    with pytest.raises(DataError, match=r"test\.tsv:3: query 'q9' is not in .*queries\.jsonl"):
        load_beir(_write_beir(tmp_path / "b", qrels=bad_q))
    bad_d = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tdX\t1\n"
    with pytest.raises(DataError, match=r"test\.tsv:3: document 'dX' .* is not in .*corpus\.jsonl"):
        load_beir(_write_beir(tmp_path / "c", qrels=bad_d))


def test_qrels_format_errors(tmp_path):
    for body, pattern in [
        ("h\th\th\nq1\td1\n", r"test\.tsv:2: expected 3 tab-separated fields"),
        ("h\th\th\nq1\td1\tyes\n", r"test\.tsv:2: score 'yes' is not an integer"),
        ("h\th\th\nq1\td1\t1\nq1\td1\t2\n", r"test\.tsv:3: .*judged twice with different scores"),
        ("query-id\tcorpus-id\tscore\n", r"test\.tsv: no judgements"),
    ]:
        root = _write_beir(tmp_path / str(abs(hash(body))), qrels=body)
        with pytest.raises(DataError, match=pattern):
            load_beir(root)


def test_identical_repeated_judgement_is_accepted(tmp_path):
    root = _write_beir(tmp_path / "b", qrels="q1\td1\t1\nq1\td1\t1\n")
    assert read_beir_qrels(root / "qrels" / "test.tsv") == {"q1": {"d1": 1}}


def test_empty_corpus(tmp_path):
    with pytest.raises(DataError, match=r"corpus\.jsonl: the corpus is empty"):
        load_beir(_write_beir(tmp_path / "b", corpus="\n\n"))


def test_bad_encoding_names_line_and_byte(tmp_path):
    raw = b'{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": "caf\xe9"}\n'
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: invalid UTF-8 \(byte offset 54, column 27, bytes e9"):
        load_beir(_write_beir(tmp_path / "b", corpus=raw))


def test_utf8_bom_is_accepted(tmp_path):
    raw = '\ufeff{"_id": "d1", "text": "ok"}\n'.encode()
    ds = load_beir(_write_beir(tmp_path / "b", corpus=raw, qrels="q1\td1\t1\n"))
    assert ds.corpus["d1"].text == "ok"


def test_unicode_line_separators_inside_json_strings_keep_line_numbers(tmp_path):
    corpus = '{"_id": "d1", "text": "a\u2028b\x85c"}\n{"_id": "d2", "text": "ok"}\n{"_id": "d2", "text": "x"}\n'
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: duplicate document id 'd2' \(first seen on line 2\)"):
        load_beir(_write_beir(tmp_path / "b", corpus=corpus))
    ds = load_beir(_write_beir(tmp_path / "c", corpus=corpus.rsplit("{", 1)[0], qrels="q1\td1\t1\n"))
    assert ds.corpus["d1"].text == "a\u2028b\x85c"
