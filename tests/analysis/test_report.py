import base64
import html
import re
from pathlib import Path

import numpy as np
import pytest

from adaptlab import results
from adaptlab.analysis import ThresholdRule, build_report, isotropy
from adaptlab.errors import ConfigError


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG from its IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


NOISE = {"base": 1.6, "ft": 0.9, "ptft": 0.6}


@pytest.fixture(scope="module")
def store_root(tmp_path_factory, make_records):
    root = tmp_path_factory.mktemp("store")
    store = results.open(root, create=True)
    rng = np.random.default_rng(0)
    runs, metrics, per_query = [], [], []
    for s, noise in NOISE.items():
        rec = make_records(s, noise=noise, n_queries=40, k=10, seed=3)
        run = results.run_record(
            s, "synth", model_id=s, model_revision=None, dataset_fingerprint="fp", seed=0, config={"k": 10}
        )
        runs.append(run)
        per_query.append(rec)
        acc = float((rec.gold_rank[(rec.gold_rank > 0)] <= 5).sum() / len(rec))
        for m, v in (("acc@5", acc), ("ndcg@10", acc * 0.8)):
            metrics.append(
                {
                    "run_id": run["run_id"],
                    "system": s,
                    "dataset": "synth",
                    "measure": m,
                    "value": v,
                    "boot_mean": v,
                    "ci_low": v - 0.05,
                    "ci_high": v + 0.05,
                    "n_queries": 40,
                    "n_resamples": 100,
                    "sample_size": 40,
                    "seed": 0,
                }
            )
        iso = isotropy(rng.normal(size=(50, 6)) + noise, system=s, dataset="synth", space="corpus")
        metrics += [{**row, "run_id": run["run_id"]} for row in iso.to_metric_rows()]
    metrics.append(
        {
            "run_id": runs[1]["run_id"],
            "system": "ft",
            "dataset": "synth",
            "measure": "acc@5",
            "value": 0.1,
            "boot_mean": 0.1,
            "ci_low": 0.02,
            "ci_high": 0.18,
            "compared_to": "base",
            "p_value": 0.01,
            "p_adjusted": 0.03,
            "adjustment": "holm",
            "family_size": 3,
            "n_resamples": 100,
            "confidence": 0.9,
        }
    )
    metrics.append(
        {
            "run_id": runs[2]["run_id"],
            "system": "ptft",
            "dataset": "synth",
            "measure": "acc@5",
            "value": 0.2,
            "boot_mean": 0.2,
            "ci_low": 0.1,
            "ci_high": 0.3,
            "compared_to": "base",
            "p_value": 2 / 101,
            "p_adjusted": 0.06,
            "adjustment": "holm",
            "family_size": 3,
            "n_resamples": 100,
            "confidence": 0.9,
        }
    )
    store.commit(runs, metrics, per_query)
    return root


@pytest.fixture(scope="module")
def default_report(store_root, tmp_path_factory) -> Path:
    """The report of ``store_root`` with the default settings (50 resamples), built once for the
    tests that read it (each built the same one)."""
    return build_report(store_root, tmp_path_factory.mktemp("report") / "rep", n_resamples=50)


def test_report_has_tables_and_figures(default_report):
    md = default_report
    rep = md.parent
    text = md.read_text()
    for heading in (
        "Retrieval measures",
        "Paired comparisons",
        "Similarity thresholds",
        "COE and ROE",
        "Isotropy",
        "Correlations across systems",
    ):
        assert heading in text
    assert "| ft | base | acc@5 |" in text
    assert "Computed for this report" in text
    figs = sorted(p.name for p in (rep / "figures").glob("*.png"))
    assert figs == [
        "synth_densities.png",
        "synth_forest.png",
        "synth_ndcg_curves.png",
        "synth_paired_differences.png",
        "synth_thresholds.png",
    ]
    html = (rep / "report.html").read_text()
    assert "<table>" in html
    # self-contained: every figure embedded as the very PNG written beside the report
    embedded = dict(re.findall(r"<img src='data:image/png;base64,([^']+)' alt='[^']*' data-file='([^']+)'", html))
    assert sorted(Path(f).name for f in embedded.values()) == figs
    for data, rel in embedded.items():
        assert base64.b64decode(data) == (rep / rel).read_bytes()
        width, height = png_size(base64.b64decode(data))
        assert width >= 1000 and height >= 400  # 200 dpi, not a 611 x 176 strip
    assert "src='figures/" not in html


def test_report_figures_in_a_vector_format_and_the_forest_shows_the_value(store_root, tmp_path):
    md = build_report(store_root, tmp_path / "svg", n_resamples=20, figure_format="svg", compute_missing=False)
    figs = sorted(p.name for p in (tmp_path / "svg" / "figures").iterdir())
    assert figs == ["synth_densities.svg", "synth_forest.svg", "synth_ndcg_curves.svg", "synth_paired_differences.svg"]
    assert "](figures/synth_forest.svg)" in md.read_text()
    assert (tmp_path / "svg" / "report.html").read_text().count("data:image/svg+xml;base64,") == 4
    with pytest.raises(ConfigError, match="figure_format 'jpg'"):
        build_report(store_root, tmp_path / "bad", figure_format="jpg")
    with pytest.raises(ConfigError, match="dpi"):
        build_report(store_root, tmp_path / "bad", dpi=5)


def test_report_ndcg_curves_reach_the_stored_depth():
    from adaptlab.analysis.report.scores import curve_ks

    assert curve_ks(100) == (1, 2, 3, 5, 10, 20, 30, 50, 100)
    assert curve_ks(10) == (1, 2, 3, 5, 10) and curve_ks(80)[-1] == 80 and curve_ks(1) == (1,)


def test_report_filters(store_root, tmp_path):
    text = build_report(store_root, tmp_path / "two", systems=["base", "ft"], compute_missing=False, dpi=50).read_text()
    assert "| ptft |" not in text and "Correlations" not in text and "Similarity thresholds" not in text
    empty = build_report(store_root, tmp_path / "none", datasets=["other"]).read_text()
    assert "no runs" in empty


def test_missing_store_is_a_store_error(tmp_path):
    from adaptlab.errors import StoreError

    with pytest.raises(StoreError, match="no results store"):
        build_report(tmp_path / "absent", tmp_path / "out")


def test_report_prints_adjusted_p_family_and_both_threshold_rules(default_report):
    text = default_report.read_text()
    assert "0.03 (Holm, n=3)" in text and "<= 0.02" in text  # bootstrap p at its floor 2/(m+1)
    assert "90% CI" in text  # label from the stored confidence, not hard-coded
    assert "Top-K removed" in text and "paper: " in text and "margin: " in text
    default_rule = ThresholdRule().test  # the rule settings declare the default
    assert f"| {default_rule} |" in text  # computed for the report with the library's default rule


# ---------------------------------------------------------------- a scale study's store

SCALE_NOISE = {"m-base": 1.6, "m-ft-s10": 1.0, "m-ft-s100": 0.7, "colbert-base": 1.4, "colbert-ft-s10": 0.8}
TRAINED = {
    "steps": 12,
    "epochs_requested": 1,
    "epochs_completed": 2,
    "first_loss": 0.9,
    "last_loss": 0.4,
    "relative_weight_change": 0.0015,
    "check_warnings": [],
    "schedule": {"learning_rate": 2e-5, "warmup_steps": 2, "total_steps": 12, "nonzero_lr_steps": 11},
}


def _ndcg10(rank: np.ndarray) -> np.ndarray:
    """Independent of the library: one gold document, nDCG@10 = 1/log2(1 + rank) within the top 10."""
    r = np.asarray(rank, dtype=float)
    return np.where((r > 0) & (r <= 10), 1.0 / np.log2(1.0 + np.maximum(r, 1.0)), 0.0)


def _rr(rank: np.ndarray) -> np.ndarray:
    return np.where(rank > 0, 1.0 / np.maximum(rank, 1), 0.0)


@pytest.fixture(scope="module")
def scale_store(tmp_path_factory, make_records):
    import json

    root = tmp_path_factory.mktemp("scale-store")
    art = root.parent / (root.name + "-artifact")
    art.mkdir()
    (art / "manifest.json").write_text(json.dumps({"training": {"steps": 7, "triples": 56, "device": "cpu"}}))
    systems = {
        "m-ft-s10": {"variant": "ft", "n_documents": 10, "training": TRAINED},
        "m-ft-s100": {
            "variant": "ft",
            "n_documents": 100,
            "training": {
                **TRAINED,
                "steps": 1,
                "relative_weight_change": 0.0,
                "check_warnings": ["variant 'ft': weights moved by 0"],
            },
        },
        "colbert-ft-s10": {"variant": "colbert-ft", "n_documents": 10, "artifact_path": str(art)},
        "m-base": {"variant": "base", "n_documents": None},
    }
    runs, metrics, recs = [], [], {}
    for s, noise in SCALE_NOISE.items():
        rec = make_records(s, noise=noise, n_queries=40, k=10, seed=5)
        recs[s] = rec
        run = results.run_record(
            s,
            "synth",
            model_id=s,
            model_revision=None,
            dataset_fingerprint="fp",
            seed=0,
            config={"k": 10, "systems": systems},
        )
        runs.append(run)
        v = float(_ndcg10(rec.gold_rank).mean())
        metrics.append(
            {
                "run_id": run["run_id"],
                "system": s,
                "dataset": "synth",
                "measure": "ndcg@10",
                "value": v,
                "boot_mean": v,
                "ci_low": v - 0.05,
                "ci_high": v + 0.05,
                "n_queries": 40,
                "n_resamples": 100,
                "sample_size": 40,
                "seed": 0,
                "confidence": 0.95,
            }
        )
    by = {r["system"]: r["run_id"] for r in runs}
    for s, against, value in (("m-ft-s10", "m-base", 0.05), ("colbert-ft-s10", "m-base", 0.2)):
        metrics.append(
            {
                "run_id": by[s],
                "system": s,
                "dataset": "synth",
                "measure": "ndcg@10",
                "value": value,
                "boot_mean": value,
                "ci_low": value - 0.04,
                "ci_high": value + 0.04,
                "compared_to": against,
                "p_value": 0.04,
                "n_resamples": 100,
                "confidence": 0.95,
            }
        )
    results.open(root, create=True).commit(runs, metrics, list(recs.values()))
    return root, recs


def _row_cells(text: str, first: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith(f"| {first} |")
    ]


def test_scale_report_training_ndcg_at_k_inspection(scale_store, tmp_path):
    root, recs = scale_store
    md = build_report(root, tmp_path / "rep", n_resamples=50, dpi=50)  # figures: which, not how sharp
    text = md.read_text()
    # Training table: from config.systems, and from the artifact manifest for the ColBERT
    assert "## Training of the adapted models" in text
    ft10 = _row_cells(text, "m-ft-s10")[0]
    assert ft10[:11] == [
        "m-ft-s10",
        "ft",
        "10",
        "12",
        "1 -> 2",
        "2 / 12",
        "2e-05",
        "0.900",
        "0.400",
        "1.50e-03",
        "none",
    ]
    assert _row_cells(text, "colbert-ft-s10")[0][:6] == ["colbert-ft-s10", "colbert-ft", "10", "7", "n/a", "n/a"]
    assert "m-ft-s100: weights unchanged" in text and "m-ft-s100: variant 'ft': weights moved by 0" in text
    # nDCG@k, k = 1..10: at k = 10 the curve equals the stored ndcg@10 mean of every system
    assert "### nDCG@k for k = 1..10 per data scale and variant" in text
    for s, rec in recs.items():
        row = next(r for r in _row_cells(text, s) if len(r) == 13)
        assert float(row[10]) == pytest.approx(_ndcg10(rec.gold_rank).mean(), abs=5e-4)
        assert float(row[1]) == pytest.approx((rec.gold_rank == 1).mean(), abs=5e-4)  # nDCG@1 = acc@1
    # scale curves: gains only against the family's own base; the ColBERT-vs-minilm pair is not one
    scale_rows = {r[0] + "@" + r[1]: r for r in _row_cells(text, "m ft") + _row_cells(text, "colbert ft")}
    assert scale_rows["m ft@10"][4:6] == ["m-base", "0.050"]
    assert scale_rows["colbert ft@10"][4:6] == ["colbert-base", "none"]
    assert "of colbert ft, m ft with its own base" in text  # m ft at 100 has no stored comparison either
    # Inspection: win/loss counts from the per-query ranks beside the stored paired test
    assert "### Inspection: adapted systems against their own base" in text
    wl = next(r for r in _row_cells(text, "m-ft-s10") if len(r) == 7)
    diff = _rr(recs["m-ft-s10"].gold_rank) - _rr(recs["m-base"].gold_rank)
    assert wl[1:6] == [
        "m-base",
        "40",
        str(int((diff > 0).sum())),
        str(int((diff < 0).sum())),
        str(int((diff == 0).sum())),
    ]
    assert wl[6].startswith("ndcg@10: 0.050 [0.010, 0.090], p 0.04")
    cwl = next(r for r in _row_cells(text, "colbert-ft-s10") if len(r) == 7)
    assert cwl[1] == "colbert-base" and cwl[6] == "none stored"
    assert "queries where m-ft-s10 and m-base differ most" in text
    # figures: each with a caption, the nDCG@k one included
    figs = {p.name for p in (tmp_path / "rep" / "figures").glob("*.png")}
    assert {"synth_ndcg_at_k.png", "synth_ndcg_10_scale.png", "synth_forest.png"} <= figs
    assert text.count("![") == text.count("\nFigure: ")


def test_training_flags_say_when_max_steps_cut_the_epochs_short():
    from adaptlab.analysis.report.training import training_flags as _training_flags

    capped = {
        "steps": 16,
        "epochs_requested": 1,
        "epochs_completed": 0.133,
        "schedule": {"capped": True, "max_steps": 16, "nonzero_lr_steps": 16},
    }
    assert _training_flags(capped) == ["stopped by max_steps = 16 after 0.133 of 1 epoch(s)"]
    full = {**capped, "epochs_completed": 1, "schedule": {**capped["schedule"], "capped": False}}
    assert _training_flags(full) == []


def test_report_cli_format_and_dpi(store_root, tmp_path, capsys):
    from adaptlab.cli import main

    out = tmp_path / "cli"
    assert (
        main(
            [
                "report",
                "--store",
                str(store_root),
                "--out",
                str(out),
                "--bootstrap",
                "20",
                "--format",
                "pdf",
                "--dpi",
                "50",
            ]
        )
        == 0
    )
    pdfs = sorted(p.name for p in (out / "figures").iterdir())
    assert "synth_forest.pdf" in pdfs and all(n.endswith(".pdf") for n in pdfs)
    assert all((out / "figures" / n).read_bytes()[:5] == b"%PDF-" for n in pdfs)
    html = (out / "report.html").read_text()
    # a PDF cannot be shown in a page: the HTML embeds a PNG of each figure at --dpi
    images = re.findall(r"<img src='data:image/png;base64,([^']+)'", html)
    assert len(images) == len(pdfs)
    assert png_size(base64.b64decode(images[0]))[0] < 1000  # 50 dpi, not the default 200
    with pytest.raises(SystemExit):
        main(["report", "--store", str(store_root), "--out", str(out), "--format", "jpg"])
    assert "invalid choice: 'jpg'" in capsys.readouterr().err


def test_stored_p_prints_with_its_own_draws():
    """A stored paired row prints its p against the draws behind it (extra.p_draws, issue 29):
    an exact p-value has no floor, rows stored before fall back to n_resamples."""
    import json

    from adaptlab.analysis._rows import p_draws
    from adaptlab.analysis.present import format_p

    mc = {"extra": json.dumps({"p_test": "sign-flip", "p_draws": 26400}), "n_resamples": 1000, "p_value": 1 / 26401}
    exact = {"extra": json.dumps({"p_test": "sign-flip-exact", "p_draws": 0}), "n_resamples": 1000, "p_value": 2e-30}
    old = {"extra": json.dumps({"p_test": "sign-flip"}), "n_resamples": 999, "p_value": 1e-3}
    assert [p_draws(r) for r in (mc, exact, old)] == [26400, None, 999]
    assert format_p(mc["p_value"], p_draws(mc)) == "<= 7.6e-05"
    assert (
        format_p(exact["p_value"], p_draws(exact)) == "2.00e-30"
        and format_p(old["p_value"], p_draws(old)) == "<= 0.002"
    )


def test_report_cli_names_every_file_it_wrote(store_root, tmp_path, capsys):
    from adaptlab.cli import main

    out = tmp_path / "named"
    assert main(["report", "--store", str(store_root), "--out", str(out), "--bootstrap", "20", "--dpi", "40"]) == 0
    printed = capsys.readouterr().out
    written = ["report.md", "report.html", *(f"figures/{p.name}" for p in sorted((out / "figures").iterdir()))]
    assert len(written) > 3 and all((out / w).is_file() for w in written)
    assert printed.strip() == f"report written to {out}: " + ", ".join(written)


def test_report_on_a_store_written_by_evaluate(tmp_path, capsys):
    """TREC runs carry no embeddings: the report leaves out COE/ROE and the similarity densities,
    says so, and writes everything else (it used to exit 2: no gold and random similarity)."""
    from adaptlab.cli import main
    from adaptlab.data.trec import write_trec_qrels, write_trec_run

    rng = np.random.default_rng(0)
    docs = [f"D{i}" for i in range(120)]
    write_trec_qrels({f"Q{q}": {docs[q]: 1} for q in range(40)}, tmp_path / "qrels.txt")
    for name, p_top in (("sysa", 0.7), ("sysb", 0.4)):
        run = {}
        for q in range(40):
            run[f"Q{q}"] = {docs[c]: float(s) for c, s in zip(rng.choice(120, 20, replace=False), rng.random(20) * 9)}
            if rng.random() < p_top:
                run[f"Q{q}"][docs[q]] = 10.0
        write_trec_run(run, tmp_path / f"{name}.trec", tag=name)
    assert (
        main(
            [
                "evaluate",
                "--qrels",
                str(tmp_path / "qrels.txt"),
                "--run",
                str(tmp_path / "sysa.trec"),
                "--run",
                str(tmp_path / "sysb.trec"),
                "--store",
                str(tmp_path / "store"),
                "--dataset",
                "toy",
                "--bootstrap",
                "50",
            ]
        )
        == 0
    )
    capsys.readouterr()
    out = tmp_path / "rep"
    assert (
        main(["report", "--store", str(tmp_path / "store"), "--out", str(out), "--bootstrap", "30", "--dpi", "40"]) == 0
    )
    text = (out / "report.md").read_text()
    assert "Left out: COE/ROE of sysa, sysb; the similarity-density panel of sysa, sysb." in text
    figures = {p.name for p in (out / "figures").iterdir()}
    assert "toy_densities.png" not in figures and {"toy_forest.png", "toy_thresholds.png"} <= figures
    assert "### Retrieval measures" in text and "Distribution overlap" not in text


def test_report_opens_each_dataset_with_the_verdict_line(default_report):
    """The paired row that matters most (the best system against the shared baseline) stated in
    one line, as run and compare print it; the numbers are the fixture's stored ptft-vs-base row
    (difference 0.2 [0.1, 0.3], p 2/101, Holm 0.06 over 3 pairs: not significant at 0.05)."""
    line = "Verdict: ptft > base by 0.200 acc@5 [0.100, 0.300], p 0.0198 (Holm 0.06: not significant over 3 pairs)"
    md = default_report.read_text()
    assert md.count(line) == 1, md[:2000]
    heading = md.index("## Dataset: synth")
    assert heading < md.index(line) < md.index("|", heading)  # under the dataset's heading, above its tables
    assert html.escape(line, quote=False) in (default_report.parent / "report.html").read_text()
