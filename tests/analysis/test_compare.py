"""``adaptlab compare`` / :func:`adaptlab.compare`: the p-values of ``adaptlab evaluate``, the tiers
of :func:`adaptlab.stats.rank_intervals`, ranx-style letters, every table through present.py,
and the minimum detectable effect checked by simulation."""

from __future__ import annotations

import json
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pytest

import adaptlab
from adaptlab import results
from adaptlab.analysis.compare import compare, minimum_detectable_effect
from adaptlab.analysis.present import Estimate, format_p, render_cell
from adaptlab.cli import main
from adaptlab.data.trec import read_trec_qrels, read_trec_run, write_trec_qrels, write_trec_run
from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation import summarise
from adaptlab.metrics import evaluate
from adaptlab.stats import BootstrapConfig, rank_intervals
from conftest import synthetic_records

BOOT = BootstrapConfig(n_resamples=400, seed=3)
SYSTEMS = (("good", 0.8), ("weak", 0.4), ("weak2", 0.42))


@pytest.fixture(scope="module")
def trec_files(tmp_path_factory):
    """Three systems on 120 single-gold queries: 'good' finds the gold far more often."""
    rng = np.random.default_rng(11)
    root = tmp_path_factory.mktemp("compare")
    docs = [f"D{i}" for i in range(200)]
    qrels = {f"Q{q}": {docs[q]: 1} for q in range(120)}
    for name, p_top in SYSTEMS:
        run = {}
        for q in range(120):
            r = {docs[c]: float(s) for c, s in zip(rng.choice(200, 30, replace=False), rng.random(30) * 0.5)}
            if rng.random() < p_top:
                r[docs[q]] = 0.9
            run[f"Q{q}"] = r
        write_trec_run(run, root / f"{name}.trec", tag=name)
    write_trec_qrels(qrels, root / "qrels.txt")
    return root


def _run_args(root):
    return ["--qrels", str(root / "qrels.txt")] + [a for n, _ in SYSTEMS for a in ("--run", str(root / f"{n}.trec"))]


@pytest.fixture(scope="module")
def per_query(trec_files):
    qrels = read_trec_qrels(trec_files / "qrels.txt")
    return {
        n: evaluate(qrels, read_trec_run(trec_files / f"{n}.trec", qrels=qrels), "ndcg@10,mrr@10") for n, _ in SYSTEMS
    }


@pytest.fixture(scope="module")
def comparison(per_query):
    return compare(per_query, boot=BOOT)


def test_p_values_are_those_of_adaptlab_evaluate(trec_files, comparison, capsys):
    rc = main(
        [
            "evaluate",
            *_run_args(trec_files),
            "--metrics",
            "ndcg@10,mrr@10",
            "--bootstrap",
            "400",
            "--seed",
            "3",
            "--format",
            "json",
        ]
    )
    assert rc == 0
    pairs = {(p["measure"], p["a"], p["b"]): p for p in json.loads(capsys.readouterr().out)["pairs"]}
    got = comparison.pairs_frame()
    assert len(got) == len(pairs) == 6  # 3 pairs x 2 measures
    for row in got.to_dict("records"):
        ref = pairs[(row["measure"], row["a"], row["b"])]
        for key in ("diff", "ci_low", "ci_high", "p_value", "p_adjusted"):
            assert row[key] == ref[key], key
        assert row["test"] == ref["test"] and row["family_size"] == ref["family_size"] == 3


def test_every_ci_and_p_is_the_evaluation_summarys(per_query, comparison):
    """compare takes its CIs, paired tests and adjusted p from the evaluation summary (the same
    numbers summarise gives, to the last digit); its tiers agree with the summary's rank
    intervals at alpha = 1 - confidence."""
    summary = summarise(per_query, boot=BOOT, workers="local")
    frame = comparison.frame()
    for row in frame.to_dict("records"):
        ref = summary.systems[row["system"]][row["measure"]]
        assert (row["value"], row["ci_low"], row["ci_high"], row["interval"]) == (
            ref.value,
            ref.ci_low,
            ref.ci_high,
            ref.interval,
        )
        assert (row["rank_low"], row["rank_high"], row["tied_with_best"]) == (
            ref.rank_low,
            ref.rank_high,
            ref.tied_with_best,
        )
    pairs = {(p.measure, p.a, p.b): p for p in summary.pairs}
    rows = comparison.pairs_frame().to_dict("records")
    assert len(rows) == len(pairs) == 6
    for row in rows:
        ref = pairs[(row["measure"], row["a"], row["b"])]
        for key in ("diff", "ci_low", "ci_high", "p_value", "p_adjusted", "p_adjusted_bound", "test", "p_draws"):
            assert row[key] == getattr(ref, key), key
        assert row["p_text"] == ref.p_text and row["p_adjusted_text"] == ref.p_adjusted_text


def test_tiers_are_a_direct_rank_interval_computation(per_query, comparison):
    frame = comparison.frame()
    for measure in ("ndcg@10", "mrr@10"):
        values = np.stack([per_query[n].values[measure] for n, _ in SYSTEMS])
        ranks = rank_intervals(values, n_resamples=BOOT.n_resamples, seed=BOOT.seed, confidence=BOOT.confidence)
        rows = frame[frame.measure == measure]
        assert rows.system.tolist() == [n for n, _ in SYSTEMS]
        assert rows.rank_low.tolist() == ranks.rank_low.tolist()
        assert rows.rank_high.tolist() == ranks.rank_high.tolist()
        assert rows.tied_with_best.tolist() == ranks.tied_with_best.tolist()
    good = frame[frame.system == "good"]
    assert good.tied_with_best.all() and not frame[frame.system != "good"].tied_with_best.any()


def test_letters_of_a_dominating_system():
    """A > B > C on every query: a beats b and c, b beats c; identical systems beat nobody."""
    base = np.linspace(0.1, 0.6, 40)
    c = compare({"A": {"mrr": base + 0.3}, "B": {"mrr": base + 0.01}, "C": {"mrr": base}}, boot=BOOT)
    rows = c.frame().set_index("system")
    assert rows.letter.tolist() == ["a", "b", "c"]
    assert rows.better_than.tolist() == ["bc", "c", ""]
    assert rows.tied_with_best.tolist() == [True, False, False]
    same = compare({"A": {"mrr": base}, "B": {"mrr": base.copy()}, "C": {"mrr": base + 0.3}}, boot=BOOT).frame()
    assert same.better_than.tolist() == ["", "", "ab"]


def test_reversed_pair_gives_the_letter_to_the_better_second_system():
    base = np.linspace(0.1, 0.6, 40)
    rows = compare({"low": {"mrr": base}, "high": {"mrr": base + 0.2}}, boot=BOOT).frame()
    assert rows.better_than.tolist() == ["", "a"]


@pytest.mark.parametrize("style", ["text", "markdown", "latex"])
def test_every_style_prints_the_digits_of_present(comparison, style):
    out = comparison.render(style)
    assert out == {"text": str(comparison), "markdown": comparison.to_markdown(), "latex": comparison.to_latex()}[style]
    for s in comparison.frame().to_dict("records"):
        assert render_cell(Estimate(s["value"], s["ci_low"], s["ci_high"]), style) in out
    for p in comparison.pairs_frame().to_dict("records"):
        assert render_cell(format_p(p["p_value"], bound=p["p_bound"]), style) in out
        assert render_cell(p["p_adjusted_text"], style) in out
        assert render_cell(float(p["mde"]), style) in out
    if style == "latex":
        assert out.count(r"\begin{tabular}") == 2 and "\n% letters:" in out  # the footer compiles
    if style == "markdown":
        assert "| good |" in out


def test_cli_prints_the_table_from_runs(trec_files, per_query, capsys):
    assert (
        main(["compare", *_run_args(trec_files), "--metrics", "ndcg@10,mrr@10", "--bootstrap", "400", "--seed", "3"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.strip() == str(compare(per_query, boot=BOOT, dataset="qrels")).strip()  # named by the qrels file
    assert "better than" in out and "tied with best" in out and "MDE (80% power)" in out


def test_store_is_compared_like_its_records(tmp_path, capsys):
    recs = {s: synthetic_records(s, noise=n, seed=0) for s, n in (("sharp", 0.3), ("blurry", 1.5))}
    store = results.open(tmp_path / "store", create=True)
    runs = [
        results.run_record(s, "synth", model_id=s, model_revision="r", dataset_fingerprint="fp", seed=0, config={})
        for s in recs
    ]
    store.commit(runs, None, pa.concat_tables([r.to_arrow() for r in recs.values()]))
    got = compare(store, measures="ndcg@10,acc@1", boot=BOOT).pairs_frame()
    qrels = {q: {g: 1 for g in gold} for r in recs.values() for q, gold in zip(r.query_ids, r.gold_ids)}
    direct = compare(
        {s: evaluate(qrels, r.to_run(), "ndcg@10,acc@1") for s, r in recs.items()}, boot=BOOT, dataset="synth"
    ).pairs_frame()
    assert got.to_dict("records") == direct.to_dict("records")
    store.close()
    assert main(["compare", "--store", str(tmp_path / "store"), "--measure", "ndcg@10", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "| synth | ndcg@10 |" in out and "| sharp |" in out and "| blurry |" in out


def test_a_long_dataframe_gives_the_same_comparison(per_query, comparison):
    import pandas as pd

    rows = [
        {"system": n, "query_id": q, "measure": m.upper() if m == "mrr@10" else m, "value": float(v)}
        for n, pq in per_query.items()
        for m, vals in pq.values.items()
        for q, v in zip(pq.query_ids, vals)
    ]
    frame = pd.DataFrame(rows)
    got = compare(frame, boot=BOOT)
    assert got.pairs_frame().to_dict("records") == comparison.pairs_frame().to_dict("records")
    assert got.frame().to_dict("records") == comparison.frame().to_dict("records")
    with pytest.raises(DataError, match="lack values for some queries"):
        compare(frame.iloc[1:], boot=BOOT)
    with pytest.raises(ConfigError, match="lacks column"):
        compare(frame.drop(columns="value"))


def test_top_level_export():
    assert adaptlab.compare is compare and "compare" in adaptlab.__all__


def test_minimum_detectable_effect_detects_at_the_planned_rate():
    """A true paired shift equal to the MDE of sd = 1, Q = 100 is found by the two-sided 5% z-test
    in about 80% of 4000 seeded simulations (t-test-like studentised, so a little below)."""
    rng = np.random.default_rng(5)
    q, sims = 100, 4000
    pilot = rng.normal(size=q)
    pilot = (pilot - pilot.mean()) / pilot.std(ddof=1)  # sd exactly 1
    shift = minimum_detectable_effect(pilot, power=0.8)
    assert shift == pytest.approx((NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)) / np.sqrt(q))
    d = rng.normal(loc=shift, size=(sims, q))
    z = d.mean(axis=1) / (d.std(axis=1, ddof=1) / np.sqrt(q))
    rate = float(np.mean(np.abs(z) > NormalDist().inv_cdf(0.975)))
    assert 0.77 <= rate <= 0.83, rate


def test_minimum_detectable_effect_formula_and_column(per_query, comparison):
    d = per_query["good"].values["mrr@10"] - per_query["weak"].values["mrr@10"]
    expected = 2.8015852 * d.std(ddof=1) / np.sqrt(d.size)
    row = comparison.pairs_frame().query("measure == 'mrr@10' and a == 'good' and b == 'weak'").iloc[0]
    assert row.mde == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    "bad, needle",
    [
        ({"A": {"mrr": [0.1, 0.2]}}, "at least 2"),
        ({"A": {"mrr": [0.1, 0.2]}, "B": {"mrr": [0.1]}}, "expected 2 per-query values"),
        ({"A": {"mrr": [0.1, 0.2]}, "B": {"ndcg@10": [0.1, 0.3]}}, "missing for system(s) B"),
        ({"A": {"mrr": ["x", 0.2]}, "B": {"mrr": [0.1, 0.3]}}, "must be numbers"),
    ],
)
def test_bad_input_is_one_clear_line(bad, needle):
    with pytest.raises((ConfigError, DataError)) as e:
        compare(bad)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_store_uri_asks_to_open_it_first(tmp_path):
    with pytest.raises(ConfigError, match="open the store first"):
        compare(str(tmp_path))


def test_cli_needs_runs_or_a_store(trec_files, capsys):
    assert main(["compare", "--run", str(trec_files / "good.trec")]) == 2
    assert "either --qrels" in capsys.readouterr().err
    assert main(["compare", "--qrels", str(trec_files / "qrels.txt"), "--run", str(trec_files / "good.trec")]) == 2
    assert "at least two --run" in capsys.readouterr().err


def _clearly_different(n_systems: int, q: int, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """nDCG@10 of one gold document whose rank each system draws from the same uniform per query
    (better systems never worse on a query; means from about 0.3 to 0.95)."""
    u = np.random.default_rng(seed).random(q)
    p = np.linspace(0.1, 0.9, n_systems)[:, None]
    rank = np.maximum(1.0, np.ceil(np.log(u[None, :]) / np.log1p(-p)))
    v = np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0)
    return {f"s{i}": {"ndcg@10": v[i]} for i in range(n_systems)}


@pytest.mark.parametrize("n_systems, q", [(12, 500), (22, 400), pytest.param(30, 400, marks=pytest.mark.slow)])
def test_many_clearly_different_systems_are_all_told_apart(n_systems: int, q: int) -> None:
    """Issue 29: with 1,000 sign vectors Holm's smallest adjusted p was K/1001, so 11 or more
    systems (55+ pairs) could never differ; the sign vectors now grow with the family (the 30
    systems, 435 pairs, also take two-letter labels)."""
    c = compare(_clearly_different(n_systems, q, seed=n_systems))
    pairs = c.pairs_frame()
    assert len(pairs) == n_systems * (n_systems - 1) // 2
    assert (pairs["p_adjusted"] < 0.05).all(), pairs.sort_values("p_adjusted").tail(3)
    best = c.frame().iloc[-1]
    assert len(best["better_than"].replace(",", "")) == (n_systems - 1) * (1 if n_systems <= 26 else 2)
    assert "random sign vectors" in str(c)
