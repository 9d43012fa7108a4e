"""PubMedQA and SciQ JSON files as retrieval datasets."""

from __future__ import annotations

import json

import pytest

from adaptlab.data.pubmedqa import load_pubmedqa
from adaptlab.data.sciq import load_sciq
from adaptlab.errors import DataError


def _write(path, obj):
    path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    return path


PUBMED = {
    "111": {"QUESTION": "Does A cause B?", "CONTEXTS": ["Background one.", " Results two. "], "final_decision": "yes"},
    "222": {"QUESTION": "Is C safe?", "CONTEXTS": ["Only section."]},
    "333": {"QUESTION": "Why D?", "CONTEXTS": ["Another abstract."]},
}


def test_pubmedqa_one_document_per_question(tmp_path):
    ds = load_pubmedqa(_write(tmp_path / "ori_pqal.json", PUBMED))
    assert ds.name == "pubmedqa"
    assert ds.corpus["111"].text == "Background one. Results two."
    assert ds.queries == {"111": "Does A cause B?", "222": "Is C safe?", "333": "Why D?"}
    assert ds.qrels == {k: {k: 1} for k in PUBMED}


def test_pubmedqa_ids_file_restricts_queries_and_corpus(tmp_path):
    path = _write(tmp_path / "ori_pqal.json", PUBMED)
    ids = _write(tmp_path / "test_ground_truth.json", {"222": "yes", "333": "no"})
    ds = load_pubmedqa(path, ids_file=ids, name="pmq-test")
    assert ds.name == "pmq-test" and sorted(ds.corpus) == ["222", "333"] and sorted(ds.queries) == ["222", "333"]
    assert load_pubmedqa(path, ids_file=_write(tmp_path / "l.json", ["111"])).n_queries == 1
    with pytest.raises(DataError, match=r"bad_ids\.json: 1 id\(s\) are not in .*'999'"):
        load_pubmedqa(path, ids_file=_write(tmp_path / "bad_ids.json", {"999": "yes"}))


def test_pubmedqa_errors_name_file_and_line(tmp_path):
    bad = {**PUBMED, "444": {"QUESTION": "No contexts?"}}
    with pytest.raises(DataError, match=r"ori_pqal\.json:22 \(444\): missing key 'CONTEXTS'"):
        load_pubmedqa(_write(tmp_path / "ori_pqal.json", bad))
    bad = {"111": {"QUESTION": "Q", "CONTEXTS": ["ok", 3]}}
    with pytest.raises(DataError, match=r"\(111\.CONTEXTS\[1\]\): expected a string, got int"):
        load_pubmedqa(_write(tmp_path / "ori_pqal.json", bad))
    with pytest.raises(DataError, match=r"keyed by PubMed id, got list"):
        load_pubmedqa(_write(tmp_path / "ori_pqal.json", [1]))
    with pytest.raises(DataError, match=r"nope\.json: file not found"):
        load_pubmedqa(tmp_path / "nope.json")


def _sciq_item(q, support, answer="x"):
    return {
        "question": q,
        "distractor3": "a",
        "distractor1": "b",
        "distractor2": "c",
        "correct_answer": answer,
        "support": support,
    }


def test_sciq_drops_empty_support_and_merges_identical_ones(tmp_path):
    items = [
        _sciq_item("Q0?", "Support A."),
        _sciq_item("Q1?", ""),
        _sciq_item("Q2?", "Support  A. "),
        _sciq_item("Q3?", "Support B."),
        _sciq_item("Q4?", "   "),
    ]
    ds = load_sciq(_write(tmp_path / "test.json", items))
    assert ds.name == "sciq"
    assert {k: d.text for k, d in ds.corpus.items()} == {"d0": "Support A.", "d1": "Support B."}
    assert ds.queries == {"q0": "Q0?", "q2": "Q2?", "q3": "Q3?"}
    assert ds.qrels == {"q0": {"d0": 1}, "q2": {"d0": 1}, "q3": {"d1": 1}}
    assert ds.meta["dropped_empty_support"] == 2 and ds.meta["merged_duplicates"] == 1


def test_sciq_errors(tmp_path):
    items = [_sciq_item("Q0?", "S."), {"question": "Q1?", "correct_answer": "y"}]
    with pytest.raises(DataError, match=r"test\.json:10 \(\[1\]\): missing key 'support'"):
        load_sciq(_write(tmp_path / "test.json", items))
    with pytest.raises(DataError, match=r"expected a JSON array"):
        load_sciq(_write(tmp_path / "test.json", {"question": "x"}))
    with pytest.raises(DataError, match=r"test\.json: the corpus is empty"):
        load_sciq(_write(tmp_path / "test.json", [_sciq_item("Q?", "")]))
