"""One direction for differences everywhere, with the same interval; the verdict line; look-alike names.

* A pair's resampled differences depend only on its two systems' values and the seed, so its
  interval is the same alone, beside other systems, or at other row positions, and the reversed
  pair gets the negated interval (to 1e-12: the quantile interpolation's last bit) (earlier versions drew the multinomial differences
  from a stream keyed by row positions and orientation, or over the joint values of all systems).
* ``run`` (summarise) and ``compare`` print the same pair in the same direction (the first named
  system minus the second) with the same interval; a store's pair keeps its stored direction.
* The verdict line is built from the numbers of the row it states.
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest

from adaptlab import results
from adaptlab.analysis._rows import metric_row
from adaptlab.analysis.compare import compare
from adaptlab.analysis.evaluation_table import format_summary
from adaptlab.analysis.present import LookalikeNamesWarning, headline_pair, lookalike_names, verdict_line
from adaptlab.evaluation import summarise
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig, paired_bootstrap


def _graded(n_sys: int, q: int, seed: int, levels: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.random((n_sys, q)) ** (1 + np.arange(n_sys))[:, None]
    return np.round(v * levels) / levels if levels else v


@pytest.mark.parametrize("method", ["index", "multinomial", "auto"])
@pytest.mark.parametrize("levels", [None, 4])
def test_a_pairs_interval_depends_only_on_its_two_systems_and_flips_exactly(method: str, levels: int | None) -> None:
    v = _graded(4, 120, seed=1, levels=levels)
    kw = dict(n_resamples=400, seed=7, method=method)
    alone = paired_bootstrap(v[[0, 1]], pairs=[(0, 1)], **kw)[0]
    moved = paired_bootstrap(v[[2, 3, 1, 0]], pairs=[(3, 2)], **kw)[0]  # same systems at other rows
    among = paired_bootstrap(v, **kw)[0]  # all six pairs; (0, 1) first
    flipped = paired_bootstrap(v[[0, 1]], pairs=[(1, 0)], **kw)[0]
    for d in (moved, among):
        assert (d.diff, d.ci_low, d.ci_high, d.boot_mean) == (alone.diff, alone.ci_low, alone.ci_high, alone.boot_mean)
    # negated up to the last bit of the quantile interpolation (the printed digits are identical)
    assert (flipped.diff, flipped.ci_low, flipped.ci_high) == pytest.approx(
        (-alone.diff, -alone.ci_high, -alone.ci_low), abs=1e-12
    )
    assert flipped.p_value == alone.p_value


def _per_query(order: tuple[str, str]) -> dict[str, PerQueryMetrics]:
    v = _graded(2, 150, seed=4, levels=8)
    ids = [f"q{i}" for i in range(150)]
    vals = {"minilm": v[0], "bm25": v[1]}
    return {n: PerQueryMetrics(ids, {"ndcg@10": vals[n]}) for n in order}


def test_run_and_compare_print_one_direction_with_one_interval() -> None:
    boot = BootstrapConfig(n_resamples=500, seed=3)
    run = summarise(_per_query(("minilm", "bm25")), boot=boot).pairs[0]
    assert (run.a, run.b) == ("minilm", "bm25")
    named = (
        compare({n: p.values for n, p in _per_query(("bm25", "minilm")).items()}, boot=boot, systems=["minilm", "bm25"])
        .pairs_frame()
        .iloc[0]
    )
    assert (named["a"], named["b"]) == ("minilm", "bm25")
    assert (named["diff"], named["ci_low"], named["ci_high"]) == (run.diff, run.ci_low, run.ci_high)
    other = compare({n: p.values for n, p in _per_query(("bm25", "minilm")).items()}, boot=boot).pairs_frame().iloc[0]
    assert (other["a"], other["b"]) == ("bm25", "minilm")
    assert (other["diff"], other["ci_low"], other["ci_high"]) == pytest.approx(
        (-run.diff, -run.ci_high, -run.ci_low), abs=1e-12
    )


def test_a_store_pair_keeps_its_stored_direction(tmp_path) -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "analysis_conftest", Path(__file__).resolve().parents[1] / "analysis" / "conftest.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    synthetic_records = mod.synthetic_records

    recs = {s: synthetic_records(s, noise=n, seed=0) for s, n in (("sharp", 0.3), ("blurry", 1.5))}
    store = results.open(tmp_path / "store", create=True)
    runs = [
        results.run_record(s, "synth", model_id=s, model_revision="r", dataset_fingerprint="fp", seed=0, config={})
        for s in recs
    ]
    stored = metric_row("blurry", "synth", "ndcg@10", -0.1, ci_low=-0.2, ci_high=0.0, compared_to="sharp", p_value=0.01)
    stored["run_id"] = runs[1]["run_id"] if isinstance(runs[1], dict) else runs[1].run_id
    store.commit(runs, [stored], pa.concat_tables([r.to_arrow() for r in recs.values()]))
    pairs = compare(store, measures="ndcg@10", boot=BootstrapConfig(n_resamples=200)).pairs_frame()
    store.close()
    assert (pairs.iloc[0]["a"], pairs.iloc[0]["b"]) == ("blurry", "sharp")


def test_verdict_line_states_the_row_below_it() -> None:
    row = {
        "a": "minilm-ft-s120",
        "b": "minilm-base",
        "measure": "ndcg@10",
        "diff": 0.0104,
        "ci_low": 0.0021,
        "ci_high": 0.0187,
        "p_value": 0.0112,
        "p_adjusted": 0.18,
        "adjustment": "holm",
        "family_size": 21,
    }
    assert verdict_line(row) == (
        "minilm-ft-s120 > minilm-base by 0.010 ndcg@10 [0.002, 0.019], p 0.0112 "
        "(Holm 0.18: not significant over 21 pairs)"
    )
    neg = dict(
        row,
        a="minilm",
        b="bm25",
        diff=-0.136,
        ci_low=-0.160,
        ci_high=-0.111,
        p_value=1 / 4001,
        p_adjusted=1 / 4001,
        family_size=1,
        p_bound=True,
        p_adjusted_bound=True,
    )
    assert verdict_line(neg) == "bm25 > minilm by 0.136 ndcg@10 [0.111, 0.160], p <= 2.50e-04 (significant at 0.05)"
    stored = {
        "system": "a",
        "compared_to": "b",
        "measure": "mrr",
        "value": 0.0,
        "ci_low": -0.01,
        "ci_high": 0.01,
        "p_value": 1.0,
    }
    assert verdict_line(stored).startswith("a = b on mrr: difference 0 [-0.010, 0.010], p 1")


def test_run_and_compare_output_start_with_the_verdict() -> None:
    boot = BootstrapConfig(n_resamples=300, seed=0)
    s = summarise(_per_query(("minilm", "bm25")), boot=boot)
    first = format_summary(s).splitlines()[0]
    p = s.pairs[0]
    assert first == "verdict: " + verdict_line(p.as_dict())
    assert p.p_text in first and f"{abs(p.diff):.3f}" in first
    c = compare({n: q.values for n, q in _per_query(("minilm", "bm25")).items()}, boot=boot)
    assert str(c).splitlines()[0] == "verdict: " + c.verdict()
    assert c.verdict() == verdict_line({**c.pairs_frame().iloc[0].to_dict(), "measure": "ndcg@10"})


def test_headline_pair_prefers_the_best_against_the_baseline() -> None:
    rows = [{"a": "x", "b": "base", "measure": "m"}, {"a": "y", "b": "base", "measure": "m"}]
    assert headline_pair(rows, {"x": 0.5, "y": 0.7, "base": 0.4})["a"] == "y"
    rows = [
        {"a": "x", "b": "y", "measure": "m"},
        {"a": "x", "b": "z", "measure": "m"},
        {"a": "y", "b": "z", "measure": "m"},
    ]
    assert headline_pair(rows, {"x": 0.1, "y": 0.7, "z": 0.6}) == rows[2]


def test_lookalike_system_names_warn() -> None:
    latin, cyrillic, wide = "minilm", "m\u0456nilm", "\uff4dinilm"
    assert lookalike_names([latin, cyrillic, wide, "bm25"]) == [(latin, cyrillic), (latin, wide)]
    assert lookalike_names(["minilm", "minilm-ft", "bm25"]) == []
    ids = [f"q{i}" for i in range(40)]
    per = {
        n: PerQueryMetrics(ids, {"acc@1": (np.arange(40) % (2 + i)).astype(bool).astype(float)})
        for i, n in enumerate((latin, cyrillic))
    }
    with pytest.warns(LookalikeNamesWarning, match="U\\+0069 vs U\\+0456"):
        summarise(per, n_resamples=50)
    with pytest.warns(LookalikeNamesWarning):
        compare({n: p.values for n, p in per.items()}, boot=BootstrapConfig(n_resamples=50))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LookalikeNamesWarning)
        summarise({"minilm": per[latin], "bm25": per[cyrillic]}, n_resamples=50)


def test_compare_names_the_interval_method_per_row_where_rows_differ() -> None:
    ids = 60
    rng = np.random.default_rng(2)
    per = {n: {"acc@1": (rng.random(ids) < 0.6).astype(float), "ndcg@10": rng.random(ids)} for n in ("x", "y")}
    both = str(compare(per, boot=BootstrapConfig(n_resamples=200)))
    assert "CI method" in both and "wilson" in both and "studentized" in both
    one = str(compare(per, measures="ndcg@10", boot=BootstrapConfig(n_resamples=200)))
    assert "value [95% CI (studentized)]" in one and "CI method" not in one
    assert "difference [95% CI (studentized)]" in one
