"""A user's own PDF corpus end to end (issue 13's acceptance): multi-page PDFs generated here,
a scale study at page-level scales, and page numbers of retrieved passages in the per-query
records and in ``adaptlab inspect``."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("fpdf")
pytest.importorskip("pypdf")

from adaptlab import results  # noqa: E402
from adaptlab.cli import main  # noqa: E402
from adaptlab.data.pdf import parse_page_ref  # noqa: E402
from adaptlab.study import run_scale_study  # noqa: E402
from pdfmaker import topic_pages, write_pdf  # noqa: E402


@pytest.mark.slow
def test_pdf_corpus_at_page_scales_keeps_page_provenance(tiny_model, study_factory, tmp_path, capsys):
    corpus = tmp_path / "eis"
    for doc in range(3):
        write_pdf(corpus / f"Project {doc} Final EIS.pdf", topic_pages(doc, 5))
    adapt = {
        "corpus": str(corpus),
        "base_model": str(tiny_model),
        "name": "tiny",
        "unit": "pages",
        "scales": [3, 8],
        "fraction": 1.0,
        "test_fraction": 0.2,
        "validation_fraction": 0.0,
        "max_tokens": 64,
        "questions_per_chunk": 2,
        "n_negatives": 1,
        "margin": False,
        "duplicate_threshold": False,
        "variants": ["base", "ft"],
        "ft": {"batch_size": 8, "max_steps": 3, "num_negatives": 1, "learning_rate": 1e-3, "warn_only": True},
        "use_ray": False,
    }
    study = study_factory(adapt, models=[{"name": "tiny", "ref": str(tiny_model)}])
    store = tmp_path / "store"
    out = run_scale_study(study, store=store)
    assert set(out.systems) == {"tiny-base", "tiny-ft-s3", "tiny-ft-s8"}  # scales count pages
    per_query = results.open(store).per_query(dataset="heldout").to_pylist()
    assert per_query
    pages = []
    for row in per_query:
        for doc_id in row["topk_ids"]:
            ref = parse_page_ref(doc_id)
            assert ref is not None, f"retrieved passage {doc_id!r} carries no page"
            assert ref.document.endswith("Final_EIS") and 1 <= ref.first_page <= ref.last_page <= 5
            pages.append(ref.first_page)
    assert len(set(pages)) > 1
    # held-out pages never trained on: no held-out gold page is a training page of any scale
    train_pages = {parse_page_ref(t.positive_id) for s in out.data.scales for t in s.triplets.get("train", [])} - {None}
    gold_pages = {parse_page_ref(g) for row in per_query for g in row["gold_ids"]} - {None}
    assert not {(r.document, r.first_page) for r in gold_pages} & {(r.document, r.first_page) for r in train_pages}
    capsys.readouterr()
    assert (
        main(
            [
                "inspect",
                "--store",
                str(store),
                "--system",
                "tiny-ft-s8",
                "--against",
                "tiny-base",
                "--dataset",
                "heldout",
            ]
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert re.search(r"Project_\d_Final_EIS p\. [1-5]\b", shown)  # the page of gold and retrieved passages
