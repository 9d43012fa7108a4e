"""R-Prec, bpref, infAP, Judged@k and ERR@k: values against pytrec_eval and ir_measures on graded
qrels with unjudged documents and score ties, CIs against scipy on the same resamples, names."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
from scipy import stats

from adaptlab.errors import ConfigError, DataError
from adaptlab.metrics import Measure, evaluate, parse_measures, rank_documents, ranked_values
from adaptlab.stats import bootstrap_ci, resample_indices

pytrec_eval = pytest.importorskip("pytrec_eval")
ir_measures = pytest.importorskip("ir_measures")

NEW = ("rprec", "bpref", "infap", "judged@5", "judged@10", "err@5", "err@10")
TREC_NAMES = {"rprec": "Rprec", "bpref": "bpref", "infap": "infAP"}


def _case(seed: int, n_queries: int = 50, n_docs: int = 40) -> tuple[dict, dict]:
    """Graded qrels 0..4 (judged non-relevant documents included), runs that retrieve many
    unjudged documents with coarse scores (many exact ties), numeric query ids (gdeval needs
    them), some queries missing from the run and every 9th without any relevant document."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(n_docs)]
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = str(100 + q)
        judged = rng.choice(n_docs, size=rng.integers(1, 12), replace=False)
        grades = rng.integers(0, 5, size=judged.size) if q % 9 else np.zeros(judged.size, dtype=int)
        qrels[qid] = {docs[j]: int(r) for j, r in zip(judged, grades)}
        if rng.random() < 0.1:
            continue
        retrieved = rng.choice(n_docs, size=rng.integers(1, 30), replace=False)
        run[qid] = {docs[j]: float(s) for j, s in zip(retrieved, np.round(rng.random(retrieved.size), 1))}
    return qrels, run


@pytest.fixture(scope="module", params=[0, 1, 2])
def case(request):
    qrels, run = _case(request.param)
    res = evaluate(qrels, run, NEW)
    assert res.missing_from_run and res.excluded, "the case must have missing and excluded queries"
    assert any(len(set(s.values())) < len(s) for s in run.values()), "the case must have score ties"
    return qrels, run, res


def _by_query(res, measure: str) -> dict[str, float]:
    return dict(zip(res.query_ids, res.values[measure].tolist()))


def test_rprec_bpref_infap_equal_pytrec_eval(case) -> None:
    qrels, run, res = case
    ref = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_NAMES.values())).evaluate(run)
    for ours, trec in TREC_NAMES.items():
        got = _by_query(res, ours)
        want = {q: ref[q][trec] if q in ref else 0.0 for q in res.query_ids}
        assert got == pytest.approx(want, abs=1e-12), ours
    assert sum(_by_query(res, "bpref").values()) > 0 and sum(_by_query(res, "rprec").values()) > 0


def test_rprec_bpref_infap_equal_ir_measures(case) -> None:
    qrels, run, res = case
    names = {"rprec": ir_measures.parse_measure("RPrec"), "bpref": ir_measures.Bpref, "infap": ir_measures.infAP}
    ref: dict[str, dict[str, float]] = {m: {} for m in names}
    back = {v: k for k, v in names.items()}
    for metric in ir_measures.iter_calc(list(names.values()), qrels, run):
        ref[back[metric.measure]][metric.query_id] = metric.value
    for ours in names:
        want = {q: ref[ours].get(q, 0.0) for q in res.query_ids}
        assert _by_query(res, ours) == pytest.approx(want, abs=1e-12), ours


def _tie_free(run: dict) -> dict:
    """The same rankings (adaptlab's tie rule) with distinct scores: a provider that breaks ties
    its own way sees no tie."""
    return {q: {d: float(-i) for i, d in enumerate(rank_documents(s))} for q, s in run.items()}


def test_judged_equals_ir_measures_on_our_ranking(case) -> None:
    qrels, run, res = case
    for k in (5, 10):
        ref = {
            m.query_id: m.value for m in ir_measures.judged.iter_calc([ir_measures.Judged @ k], qrels, _tie_free(run))
        }
        want = {q: ref.get(q, 0.0) for q in res.query_ids}
        assert _by_query(res, f"judged@{k}") == pytest.approx(want, abs=1e-12)
    assert 0 < np.mean(res.values["judged@10"]) < 1, "the case must mix judged and unjudged documents"


def test_judged_breaks_ties_by_document_id_descending() -> None:
    """ir_measures' Judged provider breaks ties by id ascending; adaptlab keeps trec_eval's rule."""
    qrels = {"q": {"a": 1, "b": 0}}
    run = {"q": {"a": 1.0, "b": 0.5, "c": 0.5}}  # tie b/c: trec_eval ranks c (greater id) first
    assert evaluate(qrels, run, ["judged@2"]).values["judged@2"].tolist() == [0.5]
    assert evaluate(qrels, run, ["judged@3"]).values["judged@3"].tolist() == pytest.approx([2 / 3])
    assert evaluate(qrels, {"q": {"a": 1.0}}, ["judged@10"]).values["judged@10"].tolist() == [1.0]  # of 1 shown


@pytest.mark.skipif(shutil.which("perl") is None, reason="ir_measures computes ERR@k with gdeval.pl (perl)")
def test_err_equals_ir_measures_gdeval(case) -> None:
    qrels, run, res = case
    for k in (5, 10):
        ref = {m.query_id: m.value for m in ir_measures.gdeval.iter_calc([ir_measures.ERR @ k], qrels, run)}
        assert {q for q in res.query_ids if q in run} <= set(ref)
        want = {q: ref.get(q, 0.0) for q in res.query_ids}
        assert _by_query(res, f"err@{k}") == pytest.approx(want, abs=6e-6)  # gdeval prints 5 decimals
    assert np.mean(res.values["err@10"]) > 0


def test_err_by_hand_and_grade_scale() -> None:
    qrels = {"q": {"a": 4, "b": 2, "c": 0}}
    run = {"q": {"c": 3.0, "b": 2.0, "a": 1.0}}
    r2, r4 = 3 / 16, 15 / 16
    want = 0.0 + (1 - 0) * r2 / 2 + (1 - r2) * r4 / 3
    assert evaluate(qrels, run, ["err@3"]).values["err@3"][0] == pytest.approx(want, abs=1e-15)
    assert evaluate(qrels, run, ["err@1"]).values["err@1"][0] == 0.0
    with pytest.raises(DataError, match=r"err@3: relevance grade 5 is above ERR's scale 0\.\.4"):
        evaluate({"q": {"a": 5}}, {"q": {"a": 1.0}}, ["err@3"])
    np.testing.assert_allclose(ranked_values("err@3", [[0, 2, 4]], [[4, 2]]), [want])


@pytest.mark.parametrize("seed", [3, 4])
def test_ci_equals_scipy_percentile_on_the_same_resamples(seed: int) -> None:
    qrels, run = _case(seed, n_queries=80)
    res = evaluate(qrels, run, NEW)
    b = 999
    for measure in NEW:
        values = res.values[measure]
        ours = bootstrap_ci(values, n_resamples=b, seed=seed, method="index", interval="percentile")
        rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=(0, 0))))
        same = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=(0, 0))))
        assert np.array_equal(
            same.integers(0, values.size, size=(b, values.size)),
            resample_indices(values.size, n_resamples=b, seed=seed),
        ), "not the same resamples"
        ref = stats.bootstrap((values,), np.mean, n_resamples=b, method="percentile", vectorized=True, rng=rng)
        assert ours.ci_low == pytest.approx(ref.confidence_interval.low, abs=1e-12), measure
        assert ours.ci_high == pytest.approx(ref.confidence_interval.high, abs=1e-12), measure
        assert ours.ci_low < ours.ci_high, measure


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("R-Prec", "rprec"),
        ("r-prec", "rprec"),
        ("Rprec", "rprec"),
        ("RPrec", "rprec"),
        ("Bpref", "bpref"),
        ("BPref", "bpref"),
        ("bpref", "bpref"),
        ("infAP", "infap"),
        ("Judged@10", "judged@10"),
        ("judged_at_5", "judged@5"),
        ("ERR@10", "err@10"),
        ("err@20", "err@20"),
        ("P@10", "precision@10"),
        ("R@100", "recall@100"),
        ("RR", "mrr"),
        ("AP", "map"),
        ("nDCG@10", "ndcg@10"),
        ("Success@5", "acc@5"),
    ],
)
def test_ir_measures_spellings_parse(text: str, canonical: str) -> None:
    assert str(Measure.parse(text)) == canonical
    assert str(Measure.parse(canonical)) == canonical


def test_bad_names_give_one_line_with_what_is_accepted() -> None:
    with pytest.raises(ConfigError) as e:
        parse_measures("ndcg@10,R-Precision")
    text = str(e.value)
    assert "\n" not in text and "unknown measure 'R-Precision'" in text
    for name in ("rprec", "bpref", "infap", "judged", "err", "R-Prec", "Judged@10", "ERR@10"):
        assert name in text
    with pytest.raises(ConfigError, match="bpref takes no cutoff"):
        Measure.parse("bpref@10")
    with pytest.raises(ConfigError, match="'err' needs a cutoff, for example err@10"):
        Measure.parse("ERR")
    with pytest.raises(ConfigError, match="'judged' needs a cutoff"):
        Measure.parse("Judged")


def test_measures_through_ir_measures_need_the_qrels() -> None:
    with pytest.raises(ValueError, match="bpref is computed through ir_measures"):
        ranked_values("bpref", [[1, 0]], [[1]])
    with pytest.raises(ValueError, match="judged@2 needs to know which documents are judged"):
        ranked_values("judged@2", [[1, 0]], [[1]])


def test_missing_ir_measures_is_one_line_naming_the_package(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ir_measures", None)  # import raises ImportError
    with pytest.raises(ConfigError, match=r"bpref are computed through ir_measures.*pip install 'ir-measures>=0.4'"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ndcg@10", "bpref"])
    assert evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ndcg@10", "err@5"]).values["ndcg@10"].tolist() == [1.0]


def test_values_keep_the_asked_order_when_mixed() -> None:
    qrels, run = _case(5)
    ms = ["bpref", "ndcg@10", "judged@5", "rprec", "mrr"]
    res = evaluate(qrels, run, ms)
    assert list(res.values) == [str(Measure.parse(m)) for m in ms]
    alone = evaluate(qrels, run, ["ndcg@10"])
    np.testing.assert_array_equal(res.values["ndcg@10"], alone.values["ndcg@10"])


def _write_trec(tmp_path, qrels: dict, runs: dict) -> tuple[str, list[str]]:
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items())
    )
    paths = []
    for name, run in runs.items():
        lines = [f"{q} Q0 {d} {i + 1} {s!r} {name}\n" for q, sc in run.items() for i, (d, s) in enumerate(sc.items())]
        (tmp_path / f"{name}.trec").write_text("".join(lines))
        paths.append(str(tmp_path / f"{name}.trec"))
    return str(tmp_path / "qrels.txt"), paths


def test_cli_evaluate_prints_the_new_measures_with_cis(tmp_path, cli) -> None:
    import json

    qrels, run = _case(6, n_queries=40)
    better = {q: {d: s + (0.35 if qrels[q].get(d, 0) > 0 else 0.0) for d, s in sc.items()} for q, sc in run.items()}
    runs = {"base": run, "tuned": better}
    qpath, rpaths = _write_trec(tmp_path, qrels, runs)
    args = [
        "evaluate",
        "--qrels",
        qpath,
        "--run",
        rpaths[0],
        "--run",
        rpaths[1],
        "--metrics",
        "R-Prec,Bpref,Judged@10,ERR@10,infAP",
    ]
    table, as_json = cli(*args), cli(*args, "--format", "json")
    assert table.returncode == 0 and as_json.returncode == 0, table.stderr + as_json.stderr
    systems = json.loads(as_json.stdout)["systems"]
    for name, r in runs.items():
        per_query = evaluate(qrels, r, ["rprec", "bpref", "judged@10", "err@10", "infap"])
        for measure, values in per_query.values.items():
            row = systems[name][measure]
            assert row["value"] == pytest.approx(values.mean(), abs=1e-12)
            assert row["ci_low"] < row["value"] < row["ci_high"] and row["interval"] == "studentized"
            line = next(x for x in table.stdout.splitlines() if x.split()[:2] == [name, measure])
            assert f"{row['value']:.3f}" in line and f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]" in line
    pairs = [x for x in table.stdout.split("paired differences")[1].splitlines() if x.startswith("base - tuned")]
    assert sorted(p.split()[3] for p in pairs) == sorted(["rprec", "bpref", "judged@10", "err@10", "infap"])


def test_every_measure_has_a_row_in_docs_metrics() -> None:
    """docs/metrics.md's measure table names every canonical measure (the docs cannot drift)."""
    from pathlib import Path

    from adaptlab.metrics import MEASURE_NAMES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    missing = [n for n in MEASURE_NAMES if not any(r.startswith((f"| `{n}`", f"| `{n}@k`")) for r in rows)]
    assert not missing, f"docs/metrics.md has no table row for {missing}"


def test_compare_from_a_store_refuses_measures_that_need_the_judgments() -> None:
    """The store's per-query records keep the gold documents only: bpref, infAP and Judged@k
    recomputed from them would count no judged non-relevant document."""
    from adaptlab.analysis.compare import store_groups

    assert [m for m in NEW if Measure.parse(m).needs_judgments] == ["bpref", "infap", "judged@5", "judged@10"]
    with pytest.raises(ConfigError, match=r"^bpref, judged@10: the store's records keep only the gold documents"):
        store_groups(None, None, ["ndcg@10", "Bpref", "judged@10", "err@10"])
