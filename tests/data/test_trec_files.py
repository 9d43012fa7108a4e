"""TREC qrels and run files: reading, writing, ordering and errors."""

from __future__ import annotations

import pytest

from adaptlab.data.trec import (
    rank_run,
    read_trec_qrels,
    read_trec_run,
    write_trec_qrels,
    write_trec_run,
)
from adaptlab.errors import DataError


def test_qrels_round_trip(tmp_path):
    qrels = {"q2": {"d1": 0, "d3": 2}, "q1": {"d9": 1}}
    path = write_trec_qrels(qrels, tmp_path / "sub" / "qrels.txt")
    assert path.read_text() == "q1 0 d9 1\nq2 0 d1 0\nq2 0 d3 2\n"
    assert read_trec_qrels(path) == qrels


def test_run_written_in_rank_order_with_ties_by_docid_descending(tmp_path):
    run = {"q1": {"a": 0.5, "b": 0.9, "c": 0.5}, "q0": {"z": 1 / 3}}
    path = write_trec_run(run, tmp_path / "run.trec", tag="sys1")
    assert path.read_text().splitlines() == [
        f"q0 Q0 z 1 {1 / 3!r} sys1",
        "q1 Q0 b 1 0.9 sys1",
        "q1 Q0 c 2 0.5 sys1",
        "q1 Q0 a 3 0.5 sys1",
    ]
    back = read_trec_run(path)
    assert back == run  # repr round-trips floats exactly
    assert [d for d, _ in rank_run(back["q1"])] == ["b", "c", "a"]
    top1 = read_trec_run(write_trec_run(run, tmp_path / "top1.trec", depth=1))
    assert top1 == {"q0": {"z": 1 / 3}, "q1": {"b": 0.9}}


def test_reading_tolerates_blank_lines_and_tabs(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1\tQ0\td1\t1\t2.5\tx\n\nq1 Q0 d2 2 1e-3 x\n", encoding="utf-8")
    assert read_trec_run(path) == {"q1": {"d1": 2.5, "d2": 0.001}}


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ("q1 Q0 d1 1 0.5\n", r"run\.trec:1: expected 6 whitespace-separated fields"),
        ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n", r"run\.trec:2: score 'high' is not a number"),
        ("q1 Q0 d1 1 nan t\n", r"run\.trec:1: score 'nan' is not finite"),
        (
            "q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n",
            r"run\.trec:2: document 'd1' listed twice for query 'q1' \(first on line 1\)",
        ),
    ],
)
def test_run_errors(tmp_path, body, pattern):
    path = tmp_path / "run.trec"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError, match=pattern):
        read_trec_run(path)


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ("q1 0 d1\n", r"qrels\.txt:1: expected 4 whitespace-separated fields"),
        ("q1 0 d1 1\nq1 0 d2 yes\n", r"qrels\.txt:2: relevance 'yes' is not an integer"),
        ("q1 0 d1 1\nq1 0 d1 2\n", r"qrels\.txt:2: .*judged again with a different relevance \(1 on line 1, now 2\)"),
    ],
)
def test_qrels_errors(tmp_path, body, pattern):
    path = tmp_path / "qrels.txt"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError, match=pattern):
        read_trec_qrels(path)


def test_missing_file_and_unwritable_ids(tmp_path):
    with pytest.raises(DataError, match=r"none\.trec: file not found"):
        read_trec_run(tmp_path / "none.trec")
    with pytest.raises(DataError, match="document id 'd 1' is empty or contains whitespace"):
        write_trec_run({"q": {"d 1": 1.0}}, tmp_path / "r.trec")
    with pytest.raises(DataError, match="run tag 'my tag'"):
        write_trec_run({"q": {"d": 1.0}}, tmp_path / "r.trec", tag="my tag")
    with pytest.raises(DataError, match="not finite"):
        write_trec_run({"q": {"d": float("inf")}}, tmp_path / "r.trec")
    assert not (tmp_path / "r.trec").exists()


def test_written_run_evaluates_with_pytrec_eval(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": {"a": 0.2, "b": 0.9}, "q2": {"b": 0.7, "a": 0.1}}
    q = read_trec_qrels(write_trec_qrels(qrels, tmp_path / "q.txt"))
    r = read_trec_run(write_trec_run(run, tmp_path / "r.trec"))
    scores = pytrec_eval.RelevanceEvaluator(q, {"recip_rank"}).evaluate(r)
    assert scores["q1"]["recip_rank"] == pytest.approx(0.5)
    assert scores["q2"]["recip_rank"] == pytest.approx(1.0)


def test_empty_run_or_run_without_shared_queries_is_an_error(tmp_path):
    from adaptlab.data.trec import check_run_queries

    empty = tmp_path / "empty.trec"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="no run lines"):
        read_trec_run(empty)
    other = write_trec_run({"x1": {"d1": 1.0}}, tmp_path / "other.trec")
    with pytest.raises(DataError, match="shares no query with the qrels"):
        read_trec_run(other, qrels={"q1": {"d1": 1}})
    assert read_trec_run(other, qrels={"x1": {"d1": 1}}) == {"x1": {"d1": 1.0}}
    with pytest.raises(DataError, match="empty"):
        check_run_queries({"q1": {}}, {"q1": {"d1": 1}})
