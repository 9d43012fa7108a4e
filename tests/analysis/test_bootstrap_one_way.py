"""Every public function with bootstrap settings takes them one way: a BootstrapConfig or the loose
keywords, never both (issue 21). Mixing is a ConfigError naming the function and the keys; the
config and the equivalent keywords give the same numbers. Small inputs, few resamples: fast."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from adaptlab.analysis.curves import ndcg_curve, ndcg_curve_from_records, ndcg_curves
from adaptlab.analysis.evalrank import evalrank
from adaptlab.analysis.overlap import overlap_from_arrays, overlap_metrics
from adaptlab.analysis.report.build import build_report
from adaptlab.analysis.thresholds import similarity_thresholds, thresholds_from_arrays
from adaptlab.errors import ConfigError
from adaptlab.evaluation import evaluate, summarise, summarise_runs
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.settings import resolve_bootstrap

pytestmark = [
    pytest.mark.filterwarnings("ignore:sample_size 30 < 40 queries"),
    pytest.mark.filterwarnings("ignore:few successes or failures"),
]

LOOSE = {"n_resamples": 40, "sample_size": 30, "seed": 7, "confidence": 0.9}
CONFIG = BootstrapConfig(**LOOSE)


@pytest.fixture(scope="module")
def data(make_records) -> SimpleNamespace:
    """40 judged queries of one system (records, qrels and run), 30 embedded pairs, two systems'
    per-query metrics."""
    rec = make_records("s", n_queries=40, k=10, seed=3)
    rng = np.random.default_rng(0)
    return SimpleNamespace(
        rec=rec,
        qrels={q: {g[0]: 1} for q, g in zip(rec.query_ids, rec.gold_ids)},
        run={
            q: {d: float(s) for d, s in zip(ids, sc)}
            for q, ids, sc in zip(rec.query_ids, rec.topk_ids, rec.topk_scores)
        },
        emb=rng.normal(size=(30, 8)),
        pairs=np.array([[i, (i + 1) % 30] for i in range(30)]),
        per_query={
            f"sys{s}": PerQueryMetrics(
                [f"q{i}" for i in range(40)],
                {"acc@1": (rng.random(40) < 0.4 + 0.2 * s).astype(np.float64), "ndcg@10": rng.random(40)},
            )
            for s in range(2)
        },
    )


def _plain(x: Any) -> Any:
    """A result as nested plain values, compared with == (floats bit for bit, NaN as "nan")."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if hasattr(x, "to_json"):
        return x.to_json()
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


# name -> (call with settings, the config keyword's name)
CASES: dict[str, tuple[Callable[..., Any], str]] = {
    "overlap_from_arrays": (
        lambda d, **kw: overlap_from_arrays(d.rec.sim_gold, d.rec.topk_scores, d.rec.sim_random, **kw),
        "bootstrap",
    ),
    "overlap_metrics": (lambda d, **kw: overlap_metrics(d.rec, k=5, **kw), "bootstrap"),
    "thresholds_from_arrays": (
        lambda d, **kw: thresholds_from_arrays(d.rec.topk_scores, d.rec.gold_rank, k=5, psi_grid=(10.0, 50.0), **kw),
        "bootstrap",
    ),
    "similarity_thresholds": (
        lambda d, **kw: similarity_thresholds(d.rec, k=5, psi_grid=(10.0, 50.0), **kw),
        "bootstrap",
    ),
    "evalrank": (lambda d, **kw: evalrank(d.emb, d.pairs, ks=(1, 5), **kw), "bootstrap"),
    "ndcg_curve_from_records": (lambda d, **kw: ndcg_curve_from_records(d.rec, (1, 5), **kw), "bootstrap"),
    "ndcg_curve": (lambda d, **kw: ndcg_curve(d.qrels, d.run, (1, 5), **kw), "bootstrap"),
    "ndcg_curves": (lambda d, **kw: ndcg_curves({"s": d.rec}, (1, 5), **kw), "bootstrap"),
    "summarise": (lambda d, **kw: summarise(d.per_query, workers="local", **kw), "boot"),
    "summarise_runs": (lambda d, **kw: summarise_runs(d.qrels, {"a": d.run}, "acc@1", workers="local", **kw), "boot"),
    "evaluate": (lambda d, **kw: evaluate(d.qrels, d.run, "acc@1", **kw).summary, "boot"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_and_equivalent_keywords_agree(name: str, data: SimpleNamespace) -> None:
    call, key = CASES[name]
    by_config = call(data, **{key: CONFIG})
    by_keywords = call(data, **LOOSE)
    assert _plain(by_config) == _plain(by_keywords)
    # and the settings were used: another seed moves the numbers
    assert _plain(call(data, **{**LOOSE, "seed": 8})) != _plain(by_keywords)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mixing_a_config_and_keywords_is_an_error_naming_both(name: str, data: SimpleNamespace) -> None:
    call, key = CASES[name]
    with pytest.raises(
        ConfigError, match=rf"^{name}: give .* as {key}= or as keywords, not both \(got {key}= and seed\)"
    ):
        call(data, **{key: CONFIG, "seed": 7})  # even when the keyword agrees with the config


def test_build_report_refuses_mixing_before_reading_the_store(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"build_report: .*bootstrap= .*not both.*n_resamples"):
        build_report(tmp_path / "no-store", tmp_path / "out", bootstrap=CONFIG, n_resamples=40)
    assert not (tmp_path / "out").exists()


def test_tune_adaptation_takes_its_bootstrap_only_inside_its_sweep_config() -> None:
    """One way in: the sweep's bootstrap is a SweepConfig field; loose keywords do not exist."""
    from adaptlab.adapt.train.sweep_config import SweepConfig
    from adaptlab.adapt.train.tune import tune_adaptation

    assert SweepConfig(bootstrap=CONFIG).bootstrap is CONFIG
    with pytest.raises(
        ConfigError, match=r"^SweepConfig.bootstrap must be an adaptlab.stats.BootstrapConfig, got dict"
    ):
        SweepConfig(bootstrap={"seed": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ci_seed"):
        tune_adaptation("unused", [], None, storage_path="unused", ci_seed=7)  # type: ignore[arg-type,call-arg]


def test_compare_takes_only_a_config_and_says_so() -> None:
    from adaptlab.analysis.compare import compare

    with pytest.raises(
        ConfigError, match=r"^compare: boot must be an adaptlab.stats.settings.BootstrapConfig, got dict"
    ):
        compare({}, boot={"seed": 1})  # type: ignore[arg-type]


def test_resolve_bootstrap_defaults_aliases_and_type() -> None:
    assert resolve_bootstrap("f", None) == BootstrapConfig()
    assert resolve_bootstrap("f", None, n_resamples=None, seed=None) == BootstrapConfig()
    assert resolve_bootstrap("f", None, aliases={"ci_seed": "seed"}, ci_seed=4) == BootstrapConfig(seed=4)
    assert resolve_bootstrap("f", CONFIG, sample_size=None) is CONFIG
    with pytest.raises(ConfigError, match=r"f: give .* not both \(got bootstrap= and ci_seed, n_resamples\)"):
        resolve_bootstrap("f", CONFIG, aliases={"ci_seed": "seed"}, ci_seed=1, n_resamples=5)
    with pytest.raises(ConfigError, match=r"f: boot must be an adaptlab.stats.settings.BootstrapConfig, got dict"):
        resolve_bootstrap("f", {"seed": 1}, config_key="boot")  # type: ignore[arg-type]
