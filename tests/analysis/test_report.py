import numpy as np
import pytest

from adaptlab import results
from adaptlab.analysis import build_report, isotropy

NOISE = {"base": 1.6, "ft": 0.9, "ptft": 0.6}


@pytest.fixture(scope="module")
def store_root(tmp_path_factory, make_records):
    root = tmp_path_factory.mktemp("store")
    store = results.open(root, create=True)
    rng = np.random.default_rng(0)
    runs, metrics, per_query = [], [], []
    for s, noise in NOISE.items():
        rec = make_records(s, noise=noise, n_queries=40, k=10, seed=3)
        run = results.run_record(s, "synth", model_id=s, model_revision=None, dataset_fingerprint="fp", seed=0,
                                 config={"k": 10})
        runs.append(run)
        per_query.append(rec)
        acc = float((rec.gold_rank[(rec.gold_rank > 0)] <= 5).sum() / len(rec))
        for m, v in (("acc@5", acc), ("ndcg@10", acc * 0.8)):
            metrics.append({"run_id": run["run_id"], "system": s, "dataset": "synth", "measure": m, "value": v,
                            "boot_mean": v, "ci_low": v - 0.05, "ci_high": v + 0.05, "n_queries": 40,
                            "n_resamples": 100, "sample_size": 40, "seed": 0})
        iso = isotropy(rng.normal(size=(50, 6)) + noise, system=s, dataset="synth", space="corpus")
        metrics += [{**row, "run_id": run["run_id"]} for row in iso.to_metric_rows()]
    metrics.append({"run_id": runs[1]["run_id"], "system": "ft", "dataset": "synth", "measure": "acc@5",
                    "value": 0.1, "boot_mean": 0.1, "ci_low": 0.02, "ci_high": 0.18, "compared_to": "base",
                    "p_value": 0.01, "p_adjusted": 0.03, "adjustment": "holm", "family_size": 3,
                    "n_resamples": 100, "confidence": 0.9})
    metrics.append({"run_id": runs[2]["run_id"], "system": "ptft", "dataset": "synth", "measure": "acc@5",
                    "value": 0.2, "boot_mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "compared_to": "base",
                    "p_value": 2 / 101, "p_adjusted": 0.06, "adjustment": "holm", "family_size": 3,
                    "n_resamples": 100, "confidence": 0.9})
    store.commit(runs, metrics, per_query)
    return root


def test_report_has_tables_and_figures(store_root, tmp_path):
    md = build_report(store_root, tmp_path / "rep", n_resamples=50)
    text = md.read_text()
    for heading in ("Retrieval measures", "Paired comparisons", "Similarity thresholds", "COE and ROE",
                    "Isotropy", "Correlations across systems"):
        assert heading in text
    assert "| ft | base | acc@5 |" in text
    assert "Computed for this report" in text
    figs = sorted(p.name for p in (tmp_path / "rep" / "figures").glob("*.png"))
    assert figs == ["synth_acc_5_forest.png", "synth_densities.png", "synth_ndcg_10_forest.png",
                    "synth_ndcg_curves.png", "synth_thresholds.png"]
    assert all(p.stat().st_size > 2000 for p in (tmp_path / "rep" / "figures").glob("*.png"))
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "<table>" in html and "figures/synth_densities.png" in html


def test_report_filters(store_root, tmp_path):
    text = build_report(store_root, tmp_path / "two", systems=["base", "ft"], compute_missing=False).read_text()
    assert "| ptft |" not in text and "Correlations" not in text and "Similarity thresholds" not in text
    empty = build_report(store_root, tmp_path / "none", datasets=["other"]).read_text()
    assert "no runs" in empty


def test_missing_store_is_a_store_error(tmp_path):
    from adaptlab.errors import StoreError

    with pytest.raises(StoreError, match="no results store"):
        build_report(tmp_path / "absent", tmp_path / "out")


def test_report_prints_adjusted_p_family_and_both_threshold_rules(store_root, tmp_path):
    text = build_report(store_root, tmp_path / "adj", n_resamples=50).read_text()
    assert "0.03 (Holm, n=3)" in text and "<= 0.02" in text  # bootstrap p at its floor 2/(m+1)
    assert "90% CI" in text  # label from the stored confidence, not hard-coded
    assert "Top-K removed" in text and "paper: " in text and "margin: " in text
    assert "| margin |" in text  # the default rule
