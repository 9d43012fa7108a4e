"""Data-scaling fits on synthetic scale studies with known gain curves: the bootstrap intervals
cover the true slope, next-scale gain and target scale at about their nominal rate; the
criterion picks the form that generated the data; the store, the CLI and the report use them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptlab import results
from adaptlab.analysis.scaling import (
    LOG_LINEAR,
    SATURATING,
    fit_scaling,
    format_scaling,
    plot_scaling,
    scaling_rows,
)
from adaptlab.errors import ConfigError
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.stats import BootstrapConfig


def _study(rng: np.random.Generator, curve, scales, q: int = 150, sd: float = 0.15) -> dict[str, np.ndarray]:
    """Per-query values: a base and one variant per scale whose true mean gain is ``curve(n)``;
    the noise has a per-query part shared by all scales (the paired structure of real studies)."""
    base = rng.random(q)
    shared = rng.normal(0.0, 0.6 * sd, q)
    out = {"m-base": base}
    for n in scales:
        out[f"m-ft-s{n}"] = base + curve(n) + shared + rng.normal(0.0, 0.8 * sd, q)
    return out


def _inside(x: float, ci: tuple[float, float]) -> bool:
    return ci[0] <= x <= ci[1]


def test_log_linear_curve_is_recovered_at_the_nominal_rate():
    a, b, scales = 0.01, 0.012, (10, 100, 700)
    curve = lambda n: a + b * np.log2(n)  # noqa: E731
    target = 0.16
    true_scale = 2 ** ((target - a) / b)  # 5,793 documents: between the largest and 10x it
    reps, hits = 150, {"slope": 0, "next": 0, "target": 0, "gain": 0}
    for r in range(reps):
        (f,) = fit_scaling(
            _study(np.random.default_rng(r), curve, scales),
            target=target,
            boot=BootstrapConfig(n_resamples=300, seed=r),
        )
        assert f.model == LOG_LINEAR and "3 scales" in f.criterion  # too few scales for the saturating form
        hits["slope"] += _inside(b, f.slope_ci)
        hits["next"] += _inside(curve(1400), f.predicted_next_ci)
        hits["target"] += _inside(true_scale, f.target_scale_ci)
        hits["gain"] += _inside(curve(100), f.gain_ci[1])
    rates = {k: v / reps for k, v in hits.items()}
    # nominal 0.95; 150 replications give a binomial standard error of 0.018
    assert all(0.90 <= v <= 0.99 for v in rates.values()), rates


def test_saturating_curve_is_recovered_and_chosen():
    c, a, alpha, scales = 0.1, 0.3, 0.5, (10, 30, 100, 300, 1000, 3000)
    curve = lambda n: c - a * n**-alpha  # noqa: E731
    slope = a * alpha * 3000**-alpha * np.log(2)  # per doubling at the largest scale
    reps, hits, chosen = 60, {"slope": 0, "next": 0}, 0
    for r in range(reps):
        pq = _study(np.random.default_rng(100 + r), curve, scales, sd=0.05)
        (f,) = fit_scaling(pq, boot=BootstrapConfig(n_resamples=300, seed=r), model=SATURATING)
        hits["slope"] += _inside(slope, f.slope_ci)
        hits["next"] += _inside(curve(6000), f.predicted_next_ci)
        chosen += fit_scaling(pq, boot=BootstrapConfig(n_resamples=20, seed=r))[0].model == SATURATING
    rates = {k: v / reps for k, v in hits.items()}
    assert all(v >= 0.85 for v in rates.values()), rates  # nominal 0.95 (a non-linear fit: a looser bound)
    assert chosen / reps >= 0.8  # leave-one-out error prefers the form that made the data


def test_a_straight_line_keeps_the_log_linear_form():
    curve = lambda n: 0.005 * np.log2(n)  # noqa: E731
    chosen = [
        fit_scaling(
            _study(np.random.default_rng(r), curve, (10, 30, 100, 300, 1000, 3000), sd=0.05),
            boot=BootstrapConfig(n_resamples=20, seed=r),
        )[0].model
        for r in range(30)
    ]
    assert chosen.count(LOG_LINEAR) >= 20


def test_each_resample_chooses_its_form_again():
    """With the form chosen from the data, every interval is the percentile interval of the whole
    procedure (choice, then fit) run on each resample: here the point fit of ``fit_scaling`` on
    the resampled queries themselves, whose form is chosen on that resample."""
    from adaptlab.analysis._resample import draw_indices
    from adaptlab.stats import percentile_interval

    scales = (10, 30, 100, 300, 1000)
    pq = _study(np.random.default_rng(3), lambda n: 0.12 - 0.4 * n**-0.3, scales, q=60, sd=0.1)
    boot = BootstrapConfig(n_resamples=60, seed=5)
    (f,) = fit_scaling(pq, boot=boot)
    forms, slopes, nexts = [], [], []
    for rows in draw_indices(60, boot):
        (g,) = fit_scaling({k: v[rows] for k, v in pq.items()}, boot=BootstrapConfig(n_resamples=2))
        forms.append(g.model)
        slopes.append(g.slope_per_doubling)
        nexts.append(g.predicted_next)
    assert {LOG_LINEAR, SATURATING} <= set(forms)  # the resamples do not all agree on the form
    assert f"saturating in {forms.count(SATURATING) / 60:.0%}" in f.criterion
    assert np.allclose(f.slope_ci, percentile_interval(np.array(slopes), 0.95), rtol=0, atol=1e-12)
    assert np.allclose(f.predicted_next_ci, percentile_interval(np.array(nexts), 0.95), rtol=0, atol=1e-12)
    forced = fit_scaling(pq, boot=boot, model=f.model)[0]  # one form for every resample
    assert forced.criterion.endswith("asked for") and forced.slope_ci != f.slope_ci


def test_flat_gain_is_not_rising_and_a_target_is_not_reached():
    (f,) = fit_scaling(
        _study(np.random.default_rng(7), lambda n: 0.02, (10, 100, 1000)),
        target=0.1,
        boot=BootstrapConfig(n_resamples=300),
    )
    assert f.trend == "not shown to rise (CI includes 0)"
    assert f.target_scale is None and f.target_note == "not reached within 10x the largest scale (10000)"
    assert f.next_scale == 2000
    rising = fit_scaling(
        _study(np.random.default_rng(7), lambda n: 0.03 * np.log2(n), (10, 100, 1000)),
        target=0.1,
        boot=BootstrapConfig(n_resamples=300),
    )[0]
    assert rising.trend == "still rising" and rising.target_scale is not None and rising.target_scale <= 1000
    assert "within the measured scales" in rising.target_note
    early = fit_scaling(
        _study(np.random.default_rng(7), lambda n: 0.2 + 0.01 * np.log2(n), (10, 100, 1000)),
        target=0.1,
        boot=BootstrapConfig(n_resamples=100),
    )[0]
    assert early.target_scale == 10 and early.target_note == "already reached at the smallest scale (10)"


def test_gains_and_their_intervals_are_the_paired_bootstrap_of_the_differences():
    from adaptlab.stats import percentile_interval, resample_indices

    pq = _study(np.random.default_rng(3), lambda n: 0.01 * np.log2(n), (10, 100), q=60)
    (f,) = fit_scaling(pq, boot=BootstrapConfig(n_resamples=500, seed=11))
    idx = np.asarray(resample_indices(60, n_resamples=500, seed=11))
    d = pq["m-ft-s100"] - pq["m-base"]
    lo, hi = percentile_interval(d[idx].mean(axis=1), 0.95)
    assert f.gains[1] == pytest.approx(d.mean())
    assert f.gain_ci[1] == pytest.approx((float(lo), float(hi)))
    # two scales: the log-linear fit goes through both points
    assert f.slope_per_doubling == pytest.approx((f.gains[1] - f.gains[0]) / np.log2(10))
    assert f.slope_per_10x == pytest.approx(f.gains[1] - f.gains[0])


def test_gain_per_training_hour_and_when_it_is_not_recorded():
    pq = _study(np.random.default_rng(4), lambda n: 0.01 * np.log2(n), (10, 100))
    (f,) = fit_scaling(pq, training_seconds={"m-ft-s100": 1800.0}, boot=BootstrapConfig(n_resamples=100))
    assert f.hours == (None, 0.5)
    assert f.gain_per_hour[0] is None and f.gain_per_hour[1] == pytest.approx(2 * f.gains[1])
    assert f.gain_per_hour_ci[1] == pytest.approx((2 * f.gain_ci[1][0], 2 * f.gain_ci[1][1]))
    text = format_scaling([f])
    assert "not recorded" in text and "extrapolation" in text


def test_training_seconds_of_every_kind_of_record(tmp_path):
    from adaptlab.analysis.scaling import training_seconds

    art = tmp_path / "colbert-artifact"
    art.mkdir()
    (art / "manifest.json").write_text(json.dumps({"training": {"wall_s": 90.0}}))
    systems = {
        "m-pt-s10": {"training": {"seconds": 100.0}},
        "m-pt-ft-s10": {"training": {"seconds": 50.0}},
        "m-merged-s10": {"training": {"merge_weight": 0.5}},
        "colbert-ft-s10": {"artifact_path": str(art)},
        "m-ft-s10": {"training": {"seconds": 0}},
    }
    got = training_seconds([{"config": json.dumps({"systems": systems})}, {"config": "not json"}])
    # pt-ft: its FT stage plus the PT stage it started from; nothing for a merge or a zero time
    assert got == {"m-pt-s10": 100.0, "m-pt-ft-s10": 150.0, "colbert-ft-s10": 90.0}


def test_bad_input_is_one_clear_error():
    with pytest.raises(ConfigError, match="model must be one of"):
        fit_scaling({"m-base": [0, 1], "m-ft-s10": [1, 1]}, model="cubic")
    with pytest.raises(Exception, match="same queries"):
        fit_scaling({"m-base": [0, 1, 1], "m-ft-s10": [1, 1]})
    assert fit_scaling({"m-base": [0, 1, 1], "m-ft-s10": [1, 1, 0]}) == []  # one scale: nothing to fit
    with pytest.raises(ConfigError, match="target must be a finite number"):
        fit_scaling({"m-base": [0, 1], "m-ft-s10": [1, 1]}, target=float("nan"))


# ----------------------------------------------------------------------------- store, CLI, report
def _ndcg10(rank: np.ndarray) -> np.ndarray:
    """Independent of the library: one gold document, 1/log2(1 + rank) within the top 10."""
    r = np.asarray(rank, dtype=float)
    return np.where((r > 0) & (r <= 10), 1.0 / np.log2(1.0 + np.maximum(r, 1.0)), 0.0)


def _records(system: str, ranks: np.ndarray, sims: bool = True) -> PerQueryRecords:
    """Records whose gold document d<q>-gold sits at ``ranks[q]`` (0: not in the top 10), with
    made-up gold and random similarities (or none, as a store of TREC runs)."""
    topk, gold = [], []
    for q, r in enumerate(ranks):
        row = [f"d{q}-{j}" for j in range(10)]
        if r:
            row[r - 1] = f"d{q}-gold"
        topk.append(row)
        gold.append([f"d{q}-gold"])
    n = len(ranks)
    return PerQueryRecords(
        system=system,
        dataset="synth",
        query_ids=[f"q{q}" for q in range(n)],
        topk_ids=topk,
        topk_scores=np.tile(np.linspace(1.0, 0.1, 10), (n, 1)),
        gold_ids=gold,
        gold_rank=np.asarray(ranks),
        sim_gold=np.linspace(0.5, 0.9, n) if sims else np.full(n, np.nan),
        sim_random=np.linspace(0.1, 0.4, n) if sims else np.full(n, np.nan),
        random_ids=[f"d{q}-0" for q in range(n)],
    )


@pytest.fixture(scope="module")
def scale_study_store(tmp_path_factory):
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("scaling-store")
    base = rng.integers(0, 11, size=80)
    ranks = {"m-base": base}
    for n, p in ((10, 0.1), (100, 0.3), (1000, 0.5)):  # more documents: more queries move to rank 1
        ranks[f"m-ft-s{n}"] = np.where(rng.random(80) < p, 1, base)
    systems = {
        s: {"variant": "ft", "n_documents": int(s.rsplit("-s", 1)[1]), "training": {"seconds": 360.0 * i}}
        for i, s in enumerate(ranks)
        if s != "m-base"
    }
    runs = [
        results.run_record(
            s,
            "synth",
            model_id=s,
            model_revision=None,
            dataset_fingerprint="fp",
            seed=0,
            config={"k": 10, "systems": systems},
        )
        for s in ranks
    ]
    results.open(root, create=True).commit(runs, [], [_records(s, r) for s, r in ranks.items()])
    return root, {s: _ndcg10(r) for s, r in ranks.items()}


def _rounded(value):
    """``value`` (nested lists and dicts) with every float rounded to 12 significant digits."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return float(f"{value:.12g}") if isinstance(value, float) else value


def test_store_cli_json_and_text(scale_study_store, capsys, tmp_path):
    from adaptlab.cli import main

    root, values = scale_study_store
    expected = scaling_rows(
        fit_scaling(
            values,
            "ndcg@10",
            dataset="synth",
            target=0.2,
            training_seconds={"m-ft-s10": 360.0, "m-ft-s100": 720.0, "m-ft-s1000": 1080.0},
            boot=BootstrapConfig(n_resamples=200, seed=3),
        )
    )
    figure = tmp_path / "scaling.png"
    assert (
        main(
            [
                "scaling",
                "--store",
                str(root),
                "--metric",
                "ndcg@10",
                "--target",
                "0.2",
                "--bootstrap",
                "200",
                "--seed",
                "3",
                "--format",
                "json",
                "--figure",
                str(figure),
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert _rounded(got["fits"]) == _rounded(json.loads(json.dumps(expected)))  # JSON's floats, 12 digits
    fit = got["fits"][0]
    assert (fit["label"], fit["variant"], fit["extrapolation"]) == ("m", "ft", True)
    assert [p["n_documents"] for p in fit["points"]] == [10, 100, 1000]
    assert fit["points"][1]["training_hours"] == pytest.approx(0.2)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["scaling", "--store", str(root), "--target", "0.2", "--bootstrap", "200"]) == 0
    out = capsys.readouterr().out
    assert "Gain per doubling at the largest scale" in out and "Predicted gain there (extrapolation)" in out
    assert "m ft" in out and "log-linear: 3 scales" in out


def test_store_without_a_scale_study_is_one_line(tmp_path, capsys):
    from adaptlab.cli import main

    ranks = np.array([1, 2, 3, 0, 1])
    runs = [
        results.run_record(s, "synth", model_id=s, model_revision=None, dataset_fingerprint="fp", seed=0, config={})
        for s in ("bm25", "minilm")
    ]
    results.open(tmp_path / "s", create=True).commit(runs, [], [_records("bm25", ranks), _records("minilm", ranks)])
    assert main(["scaling", "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no scale-study variant" in err and "bm25, minilm" in err


def test_report_has_the_scaling_figure(scale_study_store, tmp_path):
    from adaptlab.analysis.report import build_report

    root, _values = scale_study_store
    md = build_report(root, tmp_path / "rep", n_resamples=100, dpi=50)
    text = md.read_text()
    assert "### Data-scaling fit of the gain (ndcg@10)" in text
    assert (tmp_path / "rep" / "figures" / "synth_scaling_fit.png").exists()
    assert "dashed part beyond the largest scale is an extrapolation" in text


def test_figure_has_band_points_and_dashed_extrapolation(tmp_path):
    pq = _study(np.random.default_rng(5), lambda n: 0.01 * np.log2(n), (10, 100, 700))
    fits = fit_scaling(pq, boot=BootstrapConfig(n_resamples=100))
    fig = plot_scaling(fits, tmp_path / "f.png")
    ax = fig.axes[0]
    assert any(line.get_linestyle() == "--" for line in ax.get_lines())
    assert len(ax.collections) >= 1 and ax.get_xscale() == "log"
    two = fits + fit_scaling(pq, dataset="other", boot=BootstrapConfig(n_resamples=100))
    panels = [a for a in plot_scaling(two).axes if a.get_visible()]
    assert [a.get_title() for a in panels] == ["", "other"]  # one panel per dataset, never mixed
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["10", "100", "700", "1400"]
    with pytest.raises(ConfigError):
        plot_scaling([])


# ----------------------------------------------------------------------------- typed rows in the store
@pytest.fixture()
def recorded_store(scale_study_store, tmp_path):
    """A copy of the scale-study store with its fits recorded as a scale study records them."""
    import shutil

    from adaptlab.analysis.scaling import record_scaling

    root = tmp_path / "recorded"
    shutil.copytree(scale_study_store[0], root)
    store = results.open(root)
    fits = record_scaling(store, ["ndcg@10", "mrr@10"], boot=BootstrapConfig(n_resamples=200, seed=1), study="demo")
    store.close()
    return root, fits


def test_recorded_fits_read_back_the_same(recorded_store):
    from adaptlab.analysis.scaling import fits_from_store_rows, stored_scaling

    root, fits = recorded_store
    assert sorted(f.measure for f in fits) == ["mrr@10", "ndcg@10"]
    store = results.open(root)
    rows = store.scaling().to_pylist()
    assert len(rows) == 2 and {r["study"] for r in rows} == {"demo"}
    back = fits_from_store_rows(rows)
    assert _rounded(scaling_rows(back)) == _rounded(scaling_rows(fits))
    for a, b in zip(back, fits):
        np.testing.assert_allclose(a.band, b.band)
        np.testing.assert_allclose(a.band_scales, b.band_scales)
    assert [f.measure for f in stored_scaling(store, "nDCG@10")] == ["ndcg@10"]  # canonical measure names
    frame = results.open(str(root)).scaling(as_frame=True)
    assert list(frame["variant"]) == ["ft", "ft"] and "slope_per_doubling" in frame.columns
    assert store.scaling(measure="mrr@10").num_rows == 1 and store.scaling(variant="pt").num_rows == 0
    assert store.table("scaling", columns=["label"]).column("label").to_pylist() == ["m", "m"]


def test_scaling_rows_latest_and_validation(recorded_store):
    from datetime import datetime, timedelta, timezone

    from adaptlab.analysis.scaling import scaling_store_rows
    from adaptlab.errors import StoreError

    root, fits = recorded_store
    store = results.open(root)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    newer = scaling_store_rows(fits[:1], study="again", timestamp=later)
    store.commit_scaling(newer)
    assert store.scaling().num_rows == 3
    latest = store.scaling(latest=True).to_pylist()
    assert len(latest) == 2 and {(r["measure"], r["study"]) for r in latest} == {
        (fits[0].measure, "again"),
        (fits[1].measure, "demo"),
    }
    version = store.version()
    with pytest.raises(StoreError, match="missing required column"):
        store.commit_scaling([{"dataset": "synth", "label": "m"}])
    with pytest.raises(StoreError, match="unknown column"):
        store.commit_scaling([{**newer[0], "slope": 1.0}])
    with pytest.raises(StoreError, match="cannot filter on unknown column 'system'"):
        store.scaling(system="m-base")
    assert store.version() == version  # nothing written
    by_sql = store.sql("SELECT study, measure FROM scaling ORDER BY study, measure")
    assert sorted(map(tuple, by_sql.itertuples(index=False))) == sorted(
        (r["study"], r["measure"]) for r in store.scaling().to_pylist()
    )


def test_a_store_without_fits_reads_an_empty_scaling_table(scale_study_store):
    store = results.open(scale_study_store[0])
    assert store.scaling().num_rows == 0
    assert store.scaling(variant="ft", latest=True).num_rows == 0  # a store from before the table's columns


def test_results_cli_scaling_and_scaling_cli_reads_stored_fits(recorded_store, capsys):
    from adaptlab.cli import main

    root, fits = recorded_store
    assert main(["results", "--store", str(root), "--scaling", "--filter", "measure=ndcg@10", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and rows[0]["trend"] == next(f.trend for f in fits if f.measure == "ndcg@10")
    assert main(["results", "--store", str(root), "--table", "scaling", "--latest"]) == 0
    out = capsys.readouterr().out
    assert "slope_per_doubling" in out and "(2 rows)" in out
    assert main(["scaling", "--store", str(root), "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    stored = [f for f in fits if f.measure == "ndcg@10"]
    assert got["source"] == "stored" and _rounded(got["fits"]) == _rounded(json.loads(json.dumps(scaling_rows(stored))))
    assert got["fits"][0]["n_resamples"] == 200
    assert main(["scaling", "--store", str(root), "--format", "json", "--refit"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["source"] == "fitted" and again["fits"][0]["n_resamples"] == 1000
    assert main(["scaling", "--store", str(root), "--target", "0.2"]) == 0  # a target the stored fit lacks
    assert "fitted now from the stored per-query records" in capsys.readouterr().out


def test_the_runner_records_the_fits_at_the_end_of_a_scale_study(scale_study_store, tmp_path):
    import shutil
    from types import SimpleNamespace

    from adaptlab.study.runner import _record_scaling

    root = tmp_path / "ran"
    shutil.copytree(scale_study_store[0], root)
    study = SimpleNamespace(
        evaluation=SimpleNamespace(metrics=["ndcg@10", "recall@10"]),
        bootstrap_config=lambda: BootstrapConfig(n_resamples=100, seed=0),
        study=SimpleNamespace(name="ran"),
    )
    _record_scaling(study, root)
    rows = results.open(root).scaling().to_pylist()
    assert sorted(r["measure"] for r in rows) == ["ndcg@10", "recall@10"] and {r["n_resamples"] for r in rows} == {100}
    version = results.open(root).version()
    _record_scaling(study, root)  # the study run again: the same fits, nothing added
    assert results.open(root).version() == version and results.open(root).scaling().num_rows == 2
    study.bootstrap_config = lambda: BootstrapConfig(n_resamples=120, seed=0)
    _record_scaling(study, root)  # other settings: other numbers, stored
    assert results.open(root).scaling(latest=True, columns=["n_resamples"]).column("n_resamples").to_pylist() == [
        120,
        120,
    ]


# ----------------------------------------------------------------------------- compare and inspect
def test_compare_prints_the_scaling_summary_in_every_format(scale_study_store, capsys):
    from adaptlab.cli import main

    root, values = scale_study_store
    (fit,) = fit_scaling(values, "ndcg@10", dataset="synth", boot=BootstrapConfig(n_resamples=200, seed=0))
    assert main(["compare", "--store", str(root), "--bootstrap", "200", "--seed", "0"]) == 0
    text = capsys.readouterr().out
    para = text.split("Data scaling", 1)[1]
    assert f"{fit.slope_per_10x:.3f} ndcg@10 per 10x" in para and fit.trend in para
    assert f"predicted gain at {fit.next_scale} documents" in para and "an extrapolation" in para
    assert main(["compare", "--store", str(root), "--bootstrap", "200", "--seed", "0", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    (row,) = got["scaling"]
    assert row["slope_per_10x"] == pytest.approx(fit.slope_per_10x) and row["extrapolation"] is True
    assert row["predicted_next_ci_low"] == pytest.approx(fit.predicted_next_ci[0])
    assert main(["compare", "--store", str(root), "--bootstrap", "200", "--seed", "0", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("scaling,") for line in lines) == 1 and "slope_per_10x" in lines[0]
    assert main(["compare", "--store", str(root), "--bootstrap", "200", "--seed", "0", "--format", "latex"]) == 0
    assert "Data scaling" in capsys.readouterr().out
    assert main(["compare", "--store", str(root), "--bootstrap", "200", "--systems", "m-base,m-ft-s10"]) == 0
    assert "Data scaling" not in capsys.readouterr().out  # one scale is no curve


def test_inspect_prints_the_scaling_summary_of_the_inspected_curve(recorded_store, capsys):
    from adaptlab.cli import main

    root, fits = recorded_store
    assert main(["inspect", "--store", str(root), "--system", "m-ft-s1000", "--against", "m-base"]) == 0
    out = capsys.readouterr().out
    fit = next(f for f in fits if f.measure == "ndcg@10")
    assert "Data scaling" in out and f"{fit.slope_per_10x:.3f} ndcg@10 per 10x" in out
    assert main(["inspect", "--store", str(root), "--system", "m-ft-s10", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["scaling"][0]["variant"] == "ft"
    assert main(["inspect", "--store", str(root), "--system", "m-base"]) == 0
    assert "Data scaling" not in capsys.readouterr().out
