"""The scale-study orchestration end to end with a tiny random-init encoder (in-process, fast):
system names, nested scales, one store row per (variant, scale) and dataset, paired tests against
the base model, and a rerun that reuses every artifact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

from adaptlab.study import run_scale_study  # noqa: E402

SCALES = [3, 6, 12]


@pytest.fixture(scope="module")
def tiny_run(tiny_model, study_factory, tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    adapt = {
        # 20 documents: fewer than 30 held-out questions, so every pair also gets the exact paired tests
        # (the tied small-sample Wilcoxon is a NumPy enumeration, stats/pvalues.py, milliseconds a call)
        "corpus": "synthetic:n_documents=20,seed=0",
        "base_model": str(tiny_model),
        "name": "tiny",
        "scales": SCALES,
        "fraction": 0.5,
        "test_fraction": 0.25,
        "validation_fraction": 0.2,
        "max_tokens": 48,
        "questions_per_chunk": 2,
        "n_negatives": 2,
        "margin": False,  # a random-init encoder scores everything alike: keep its negatives
        "duplicate_threshold": False,
        "pt": {"batch_size": 8, "max_steps": 2, "max_seq_length": 48},
        "ft": {"batch_size": 8, "max_steps": 2, "num_negatives": 1, "learning_rate": 1e-3},
        "use_ray": False,
    }
    study = study_factory(adapt, models=[{"name": "tiny", "ref": str(tiny_model)}], analysis={"isotropy": True})
    first = run_scale_study(study, store=store)
    second = run_scale_study(study, store=store)
    return study, store, first, second


def test_system_names_and_nested_scales(tiny_run):
    _, _, out, _ = tiny_run
    expected = ["tiny-base"] + [f"tiny-{v}-s{n}" for n in SCALES for v in ("pt", "ft", "pt-ft", "merged")]
    assert list(out.systems) == expected
    assert [d.dataset for d in out.datasets] == ["heldout", "bench"]
    scales = [s.scale for s in out.data.scales]
    assert [s.n_documents for s in scales] == SCALES
    for small, big in zip(scales, scales[1:]):
        assert set(small.doc_ids) < set(big.doc_ids) and set(small.chunk_ids) < set(big.chunk_ids)
    test_docs = set(out.data.test_documents)
    assert not test_docs & set(scales[-1].doc_ids)
    # every system, adapted at any scale, is evaluated on the same held-out queries
    heldout = out.datasets[0].summary
    assert set(heldout.systems) == set(expected)
    assert heldout.n_queries == out.data.heldout.n_queries > 0
    # the scale view: each variant against the scale, with CIs and paired gains over the base
    curves = out.curves("acc@5")
    assert [c.variant for c in curves] == ["pt", "ft", "pt-ft", "merged"]
    assert all([p.n_documents for p in c.points] == SCALES and c.base is not None for c in curves)
    assert all(p.p_value is not None and p.ci_low <= p.value <= p.ci_high for c in curves for p in c.points)
    # adapted systems point at their artifacts; PT-FT starts from the PT of the same scale
    for n in SCALES:
        ptft = out.systems[f"tiny-pt-ft-s{n}"]
        manifest = json.loads((Path(ptft.artifact_path) / "manifest.json").read_text())
        assert manifest["variant"] == "pt-ft" and manifest["data"]["scale"] == str(n)
        assert manifest["base_model"]["parent_key"] == out.systems[f"tiny-pt-s{n}"].artifact_key
        merged = out.systems[f"tiny-merged-s{n}"]
        assert merged.variant == "merged" and merged.n_documents == n and merged.artifact_key


def test_store_rows_for_every_variant_and_scale(tiny_run):
    from adaptlab import results

    study, store, out, _ = tiny_run
    s = results.open(store)
    runs = s.runs().to_pylist()
    first_runs = [r for r in runs if r["run_id"] in out.datasets[0].run_ids.values()]
    assert sorted(r["system"] for r in first_runs) == sorted(out.systems)
    config = json.loads(first_runs[0]["config"])
    assert config["systems"]["tiny-ft-s6"]["variant"] == "ft" and config["adapt"]["scales"] == SCALES
    metrics = s.metrics(dataset="heldout", run_id=list(out.datasets[0].run_ids.values())).to_pandas()
    single = metrics[metrics["compared_to"].isna()]
    assert set(single["system"]) == set(out.systems)
    assert {"acc@1", "acc@5", "mrr@10"} <= set(single["measure"])
    single = single[single["measure"].isin(["acc@1", "acc@5", "mrr@10"])]
    assert (single["ci_low"] <= single["value"] + 1e-12).all() and (single["value"] <= single["ci_high"] + 1e-12).all()
    pairs = s.comparisons(dataset="heldout", run_id=list(out.datasets[0].run_ids.values())).to_pandas()
    assert set(pairs["compared_to"]) == {"tiny-base"}  # every variant against the base model
    assert set(pairs["system"]) == set(out.systems) - {"tiny-base"}
    assert pairs["p_value"].between(0, 1).all()
    per_query = s.per_query(run_id=out.datasets[0].run_ids["tiny-merged-s12"]).num_rows
    assert per_query == out.data.heldout.n_queries
    # [analysis] rows and provenance as in a plain study: canonical model id, split in the config
    iso = s.metrics(dataset="heldout", measure="isoscore", run_id=list(out.datasets[0].run_ids.values()))
    assert set(iso.column("system").to_pylist()) == set(out.systems)
    assert config["split"] == "test" and all(r["model_id"] and r["model_revision"] for r in first_runs)
    # both datasets were committed once: the study's second run was the same evaluation and added nothing
    assert sorted({r["dataset"] for r in runs}) == ["bench", "heldout"]
    assert len(runs) == 2 * len(out.systems)


def test_rerun_reuses_artifacts_and_gives_the_same_numbers(tiny_run):
    _, _, first, second = tiny_run
    adapted = [s for s in second.systems.values() if s.variant != "base"]
    assert adapted and all(s.reused for s in adapted)
    assert [s.artifact_key for s in first.systems.values()] == [s.artifact_key for s in second.systems.values()]
    for a, b in zip(first.datasets, second.datasets):
        for system in a.summary.systems:
            x, y = a.summary.systems[system]["acc@5"], b.summary.systems[system]["acc@5"]
            assert (x.value, x.ci_low, x.ci_high) == (y.value, y.ci_low, y.ci_high)
    # training changed the weights: FT's held-out ranking differs from the base's
    rec = first.datasets[0].records
    assert not np.array_equal(rec["tiny-base"].topk_scores, rec["tiny-ft-s12"].topk_scores)


def test_variants_subset_without_base(tiny_model, study_factory, tmp_path):
    adapt = {
        "corpus": "synthetic:n_documents=12,seed=2",
        "base_model": str(tiny_model),
        "name": "tiny",
        "scales": [4],
        "fraction": 0.5,
        "test_fraction": 0.25,
        "max_tokens": 48,
        "n_negatives": 1,
        "margin": False,
        "duplicate_threshold": False,
        "variants": ["ft"],
        "ft": {"batch_size": 8, "max_steps": 1, "num_negatives": 1},
        "use_ray": False,
    }
    models = [{"name": "tiny", "ref": str(tiny_model)}, {"name": "lexical", "ref": "hash:64"}]
    study = study_factory(adapt, models=models)
    out = run_scale_study(study, store=tmp_path, export_run=tmp_path / "runs" / "run.trec")
    assert (tmp_path / "runs" / "run.heldout.tiny-ft-s4.trec").is_file()
    assert (tmp_path / "runs" / "run.bench.lexical.trec").is_file()
    # no base: the study's other model is evaluated alongside, and every pair is tested
    assert list(out.systems) == ["lexical", "tiny-ft-s4"]
    pairs = out.datasets[0].summary.pairs
    assert {(p.a, p.b) for p in pairs} == {("lexical", "tiny-ft-s4")}


def test_report_shows_measures_against_scale_with_gains(tiny_run, tmp_path):
    from adaptlab.analysis.report import build_report

    _, store, _, _ = tiny_run
    # one dataset and a low dpi: every section this test reads exists per dataset, and the figures'
    # drawing (not their resolution) is the claim; the whole report took ~2x as long
    md = build_report(store, tmp_path / "report", n_resamples=100, datasets=["heldout"], dpi=50).read_text()
    assert "Measures against data scale" in md and "| Gain over |" in md
    pngs = sorted((tmp_path / "report" / "figures").glob("*_scale.png"))
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    # the adapted models' training, read from the manifests the study put into config.systems
    assert "## Training of the adapted models" in md
    training = md.split("## Training of the adapted models", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in training.splitlines() if line.startswith("| tiny-")]
    assert rows and all(r[3].strip().isdigit() and int(r[3]) > 0 for r in rows if r[1].strip() != "merged")
    assert "### nDCG@k for k = 1..10 per data scale and variant" in md
    assert "### Inspection: adapted systems against their own base" in md


def test_the_scaling_fits_are_stored_at_the_end_once(tiny_run):
    """Every variant's curve on each dataset and study measure is a typed row of the store's
    scaling table; the study run again stored none twice."""
    from adaptlab import results

    _study, store, out, _ = tiny_run
    rows = results.open(store).scaling().to_pylist()
    curves = {(r["dataset"], r["label"], r["variant"], r["measure"]) for r in rows}
    assert len(rows) == len(curves) and {r["dataset"] for r in rows} == {"bench", "heldout"}
    assert {r["measure"] for r in rows} == {"acc@1", "acc@5", "mrr@10"}
    variants = {s.rsplit("-s", 1)[0].split("-", 1)[1] for s in out.systems if "-s" in s}
    assert {r["variant"] for r in rows} == variants and all(r["scales"] == SCALES for r in rows)
    assert {r["study"] for r in rows} == {"scale-test"} and {r["n_resamples"] for r in rows} == {200}
