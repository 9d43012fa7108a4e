"""commit_summary takes what the runs are one way: a RunContext (context=) or its fields as keyword
options, never both; both give the same run ids and rows. summarise's keyword options are the
BootstrapConfig fields: another key is a TypeError naming the valid ones."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab import results
from adaptlab.errors import ConfigError
from adaptlab.evaluation import summarise
from adaptlab.evaluation.persist import RunContext, commit_summary, evaluation_key
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig

FIELDS = {
    "dataset": "toy",
    "config": {"k": 1},
    "provenance": {"a": {"model_id": "m-a"}},
    "dataset_fingerprint": "fp",
    "study": "s",
}


@pytest.fixture(scope="module")
def summary():
    rng = np.random.default_rng(2)
    ids = [f"q{i}" for i in range(40)]
    per = {n: PerQueryMetrics(ids, {"ndcg@10": rng.random(40)}) for n in ("a", "b")}
    return summarise(per, n_resamples=50, seed=1, workers="local")


def _rows(root) -> list[tuple]:
    table = results.open(root).metrics(kind="all").to_pylist()
    return sorted((r["run_id"], r["measure"], str(r["compared_to"]), r["value"], r["ci_low"]) for r in table)


def test_a_context_and_its_keywords_store_the_same_runs(summary, tmp_path) -> None:
    by_keywords = commit_summary(tmp_path / "kw", summary, **FIELDS)
    by_context = commit_summary(tmp_path / "ctx", summary, context=RunContext(**FIELDS))
    assert dict(by_keywords) == dict(by_context) and by_context.added
    rows = _rows(tmp_path / "ctx")
    assert rows == _rows(tmp_path / "kw") and len(rows) == 3  # two scores and one paired difference
    runs = results.open(tmp_path / "ctx").runs().to_pylist()
    assert {(r["system"], r["model_id"], r["study"], r["dataset_fingerprint"]) for r in runs} == {
        ("a", "m-a", "s", "fp"),
        ("b", "", "s", "fp"),
    }
    again = commit_summary(tmp_path / "ctx", summary, **FIELDS)  # the same evaluation: nothing added
    assert not again.added and dict(again) == dict(by_context)


def test_the_key_reads_every_field_of_the_context(summary) -> None:
    ctx = RunContext(**FIELDS)
    key = evaluation_key(summary, ctx)
    assert key == evaluation_key(summary, RunContext(**FIELDS))
    for change in ({"dataset": "other"}, {"study": "t"}, {"dataset_fingerprint": "fp2"}, {"config": {"k": 2}}):
        assert evaluation_key(summary, RunContext(**{**FIELDS, **change})) != key, change
    by_content = RunContext(**FIELDS, key_content={"qrels": "abc"})
    assert evaluation_key(summary, by_content) == evaluation_key(
        summary, RunContext(**{**FIELDS, "config": {"k": 9}}, key_content={"qrels": "abc"})
    )  # the inputs by content replace config and provenance in the key


def test_context_and_keywords_together_is_an_error(summary, tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^commit_summary: give .* not both \(got context= and study\)"):
        commit_summary(tmp_path / "s", summary, context=RunContext(**FIELDS), study="s")
    with pytest.raises(ConfigError, match="context must be an adaptlab.evaluation.persist.RunContext, got dict"):
        commit_summary(tmp_path / "s", summary, context=FIELDS)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"commit_summary\(\) needs config= \(or context=\)"):
        commit_summary(tmp_path / "s", summary, dataset="toy")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'fingerprint'; .*dataset_fingerprint"):
        commit_summary(tmp_path / "s", summary, dataset="toy", config={}, fingerprint="x")  # type: ignore[call-arg]
    assert not (tmp_path / "s").exists()  # refused before the store was touched


def test_summarise_keywords_are_the_config_fields(summary) -> None:
    per = summary.per_query
    with pytest.raises(
        TypeError, match=r"^summarise\(\) got an unexpected keyword argument 'n_resample'; .*n_resamples"
    ):
        summarise(per, n_resample=10)  # type: ignore[call-arg]
    by_test = summarise(per, n_resamples=50, seed=1, test="bootstrap", workers="local")
    assert (
        by_test.to_json()
        == summarise(per, boot=BootstrapConfig(n_resamples=50, seed=1, test="bootstrap"), workers="local").to_json()
    )
    assert {p.test for p in by_test.pairs} == {"bootstrap"}
