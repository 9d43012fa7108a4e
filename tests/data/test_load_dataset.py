"""The FORMAT:PATH dispatcher."""

from __future__ import annotations

import json

import pytest

from adaptlab.data import DATASET_FORMATS, load_dataset, parse_dataset_spec
from adaptlab.errors import ConfigError, DataError


def test_formats_and_spec_parsing():
    assert DATASET_FORMATS == ("beir", "pairs", "pubmedqa", "sciq", "squad", "squad-sentence", "synthetic")
    assert parse_dataset_spec("BEIR: /data/x ") == ("beir", "/data/x")
    assert parse_dataset_spec("pairs:C:/x.csv") == ("pairs", "C:/x.csv")
    with pytest.raises(
        ConfigError,
        match=r"unknown dataset format 'msmarco'.*valid formats: beir, pairs, pubmedqa, sciq, squad, squad-sentence, synthetic",
    ):
        load_dataset("msmarco:/x")
    with pytest.raises(ConfigError, match="is not FORMAT:PATH"):
        load_dataset("just-a-path")
    with pytest.raises(ConfigError, match="names no path"):
        load_dataset("beir:")


def test_synthetic_spec_options():
    ds = load_dataset("synthetic:n_documents=6,seed=3,level=document", name="syn")
    assert ds.name == "syn" and ds.n_documents == 6 and ds.meta["seed"] == 3
    ds2 = load_dataset("synthetic:n_documents=6,seed=3", n_queries=7, sentences_per_document=(3, 4))
    assert ds2.n_queries == 7 and ds2.meta["level"] == "sentence"
    assert load_dataset("synthetic:n_documents=4,sentences_per_document=3-5").meta["sentences_per_document"] == [3, 5]
    assert load_dataset("synthetic:").name == "synthetic"
    with pytest.raises(ConfigError, match=r"'seed' is not key=value"):
        load_dataset("synthetic:n_documents=3,seed")
    with pytest.raises(
        ConfigError, match=r"option 'colour' is not valid for format 'synthetic'; valid options: .*n_documents"
    ):
        load_dataset("synthetic:colour=red")


def test_file_formats_dispatch(tmp_path):
    squad = tmp_path / "s.json"
    squad.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "context": "A b. C d.",
                                "qas": [{"id": "q", "question": "?", "answers": [{"text": "C", "answer_start": 5}]}],
                            }
                        ]
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    assert load_dataset(f"squad:{squad}").qrels == {"q": {"a0p0": 1}}
    assert load_dataset(f"squad-sentence:{squad}").qrels == {"q": {"a0p0s1": 1}}
    pairs = tmp_path / "p.csv"
    pairs.write_text("q,c\nQ?,C.\n", encoding="utf-8")
    assert load_dataset(f"pairs:{pairs}", question_col="q", context_col="c").n_queries == 1
    sciq = tmp_path / "sciq.json"
    sciq.write_text(json.dumps([{"question": "Q", "correct_answer": "a", "support": "S"}]), encoding="utf-8")
    assert load_dataset(f"sciq:{sciq}").n_documents == 1
    pmq = tmp_path / "ori_pqal.json"
    pmq.write_text(json.dumps({"1": {"QUESTION": "Q", "CONTEXTS": ["C"]}}), encoding="utf-8")
    assert load_dataset(f"pubmedqa:{pmq}", name="p").name == "p"
    with pytest.raises(ConfigError, match=r"option 'question_col' is not valid for format 'sciq'; valid options: none"):
        load_dataset(f"sciq:{sciq}", question_col="x")
    with pytest.raises(ConfigError, match=r"format 'sciq' has a single set of questions; split='train'"):
        load_dataset(f"sciq:{sciq}", split="train")
    with pytest.raises(DataError, match=r"absent\.json: file not found"):
        load_dataset(f"sciq:{tmp_path / 'absent.json'}")


def test_beir_dispatch_passes_split(tmp_path):
    root = tmp_path / "b"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d", "text": "t"}\n', encoding="utf-8")
    (root / "queries.jsonl").write_text('{"_id": "q", "text": "t"}\n', encoding="utf-8")
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq\td\t1\n", encoding="utf-8")
    assert load_dataset(f"beir:{root}", split="dev").meta["split"] == "dev"
    with pytest.raises(DataError, match="split 'test' is not available"):
        load_dataset(f"beir:{root}")
