"""SQuAD JSON at paragraph and sentence level, and its error paths."""

from __future__ import annotations

import json

import pytest

from adaptlab.data.squad import load_squad
from adaptlab.errors import ConfigError, DataError

P1 = "The pump runs at 50 Hz. Its seal is made of EPDM. Fig. 3 shows the layout."
P2 = "Copper is red. Iron is grey."


def _squad(paragraphs_a=None, paragraphs_b=None) -> dict:
    a = (
        paragraphs_a
        if paragraphs_a is not None
        else [
            {
                "context": P1,
                "qas": [
                    {"id": "qa", "question": "What frequency?", "answers": [{"text": "50 Hz", "answer_start": 17}]},
                    {
                        "id": "qb",
                        "question": "Seal material?",
                        "answers": [{"text": "EPDM", "answer_start": 44}, {"text": "pump", "answer_start": 4}],
                    },
                    {"id": "qc", "question": "Crossing?", "answers": [{"text": "EPDM. Fig. 3", "answer_start": 44}]},
                    {"id": "qd", "question": "Unanswerable?", "answers": [], "is_impossible": True},
                ],
            },
        ]
    )
    b = (
        paragraphs_b
        if paragraphs_b is not None
        else [
            {
                "context": P2,
                "qas": [{"id": "qe", "question": "Colour of iron?", "answers": [{"text": "grey", "answer_start": 23}]}],
            },
            {"context": "Copper  is red.", "qas": []},
        ]
    )
    return {"version": "1.1", "data": [{"title": "Pumps", "paragraphs": a}, {"title": "Metals", "paragraphs": b}]}


def _write(tmp_path, obj, name="squad.json", indent=1):
    path = tmp_path / name
    path.write_text(json.dumps(obj, indent=indent), encoding="utf-8")
    return path


def test_paragraph_level(tmp_path):
    ds = load_squad(_write(tmp_path, _squad()))
    assert ds.name == "squad"
    assert list(ds.corpus) == ["a0p0", "a1p0", "a1p1"]
    assert ds.qrels == {"qa": {"a0p0": 1}, "qb": {"a0p0": 1}, "qc": {"a0p0": 1}, "qe": {"a1p0": 1}}
    assert "qd" not in ds.queries and ds.meta["dropped_unanswerable"] == 1
    assert ds.meta["paragraphs"] == 3 and ds.meta["merged_duplicates"] == 0


def test_sentence_level_gold_is_the_sentence_holding_the_answer(tmp_path):
    ds = load_squad(_write(tmp_path, _squad()), level="sentence", name="s")
    assert ds.name == "s"
    texts = {k: d.text for k, d in ds.corpus.items()}
    assert texts == {
        "a0p0s0": "The pump runs at 50 Hz.",
        "a0p0s1": "Its seal is made of EPDM.",
        "a0p0s2": "Fig. 3 shows the layout.",
        "a1p0s0": "Copper is red.",
        "a1p0s1": "Iron is grey.",
    }  # "Copper  is red." (a1p1s0) is the same text after whitespace normalisation
    assert ds.meta["merged_duplicates"] == 1
    assert ds.qrels["qa"] == {"a0p0s0": 1}
    assert ds.qrels["qb"] == {"a0p0s1": 1}  # the first answer decides
    assert ds.qrels["qc"] == {"a0p0s1": 1}  # crosses into the next sentence: where it starts
    assert ds.meta["answers_crossing_sentences"] == 1
    assert ds.qrels["qe"] == {"a1p0s1": 1}


def test_level_must_be_valid(tmp_path):
    with pytest.raises(ConfigError, match="paragraph, sentence"):
        load_squad(_write(tmp_path, _squad()), level="word")


def test_missing_key_names_file_line_and_path(tmp_path):
    obj = _squad()
    del obj["data"][1]["paragraphs"][0]["qas"][0]["answers"]
    path = _write(tmp_path, obj)
    text = path.read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if '"qe"' in t) - 1  # the object opens a line above
    with pytest.raises(DataError) as info:
        load_squad(path)
    msg = str(info.value)
    assert f"squad.json:{line} (data[1].paragraphs[0].qas[0]): missing key 'answers'" in msg


def test_answer_offset_must_match_text(tmp_path):
    obj = _squad()
    obj["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    with pytest.raises(
        DataError,
        match=r"squad\.json:\d+ \(data\[0\]\.paragraphs\[0\]\.qas\[0\]\.answers\[0\]\.answer_start\): the context at offset 3",
    ):
        load_squad(_write(tmp_path, obj))
    obj["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 999
    with pytest.raises(DataError, match="outside the context"):
        load_squad(_write(tmp_path, obj))


def test_duplicate_question_id(tmp_path):
    obj = _squad()
    obj["data"][1]["paragraphs"][0]["qas"][0]["id"] = "qa"
    with pytest.raises(
        DataError,
        match=r"data\[1\]\.paragraphs\[0\]\.qas\[0\]\): duplicate question id 'qa' \(first at .*squad\.json:\d+ \(data\[0\]",
    ):
        load_squad(_write(tmp_path, obj))


def test_wrong_types_and_invalid_json(tmp_path):
    with pytest.raises(DataError, match=r"squad\.json:1 \(<top level>\): expected a JSON object"):
        load_squad(_write(tmp_path, [1, 2]))
    with pytest.raises(DataError, match=r"\(data\[0\]\.paragraphs\[0\]\.context\): expected a string, got int"):
        load_squad(_write(tmp_path, _squad(paragraphs_a=[{"context": 5, "qas": []}])))
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n  {"paragraphs": [}\n]}', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.json:2: invalid JSON"):
        load_squad(bad)
    with pytest.raises(DataError, match=r"missing\.json: file not found"):
        load_squad(tmp_path / "missing.json")


def test_empty_file_has_no_corpus(tmp_path):
    with pytest.raises(DataError, match="no paragraphs"):
        load_squad(_write(tmp_path, {"data": []}))
