"""The real benchmark copies in ../shared/data (skipped when that folder is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptlab.data import load_dataset

# pinned outputs of adaptlab.data.text.split_sentences on SQuAD v1.1 dev: a change to the
# splitter's rules changes them (update them and docs/sections/datasets.md together)
SQUAD_SENTENCES, SQUAD_MERGED, SQUAD_CROSSING = 10191, 4, 12

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SCIFACT = SHARED / "beir_scifact"
SQUAD = SHARED / "squad_v1.1" / "dev-v1.1.json"
PUBMEDQA = SHARED / "pubmedqa"


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="shared SciFact data not present")
def test_scifact_test_split():
    ds = load_dataset(f"beir:{SCIFACT}")
    assert (ds.n_queries, ds.n_documents) == (300, 5183)
    assert sum(len(j) for j in ds.qrels.values()) == 339
    assert load_dataset(f"beir:{SCIFACT}", split="train").n_queries == 809


@pytest.mark.skipif(not SQUAD.is_file(), reason="shared SQuAD data not present")
def test_squad_paragraph_and_sentence_counts():
    para = load_dataset(f"squad:{SQUAD}")
    assert (para.n_documents, para.n_queries) == (2067, 10570)
    sent = load_dataset(f"squad-sentence:{SQUAD}")
    assert sent.n_queries == 10570
    assert sent.n_documents == SQUAD_SENTENCES
    assert sent.meta["merged_duplicates"] == SQUAD_MERGED
    assert sent.meta["answers_crossing_sentences"] == SQUAD_CROSSING


@pytest.mark.skipif(not (PUBMEDQA / "ori_pqal.json").is_file(), reason="shared PubMedQA data not present")
def test_pubmedqa_counts():
    full = load_dataset(f"pubmedqa:{PUBMEDQA / 'ori_pqal.json'}")
    assert (full.n_documents, full.n_queries) == (1000, 1000)
    test = load_dataset(f"pubmedqa:{PUBMEDQA / 'ori_pqal.json'}", ids_file=PUBMEDQA / "test_ground_truth.json")
    assert (test.n_documents, test.n_queries) == (500, 500)
