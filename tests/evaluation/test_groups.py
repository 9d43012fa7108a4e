"""Per-group results on a fixture with known group effects: system A is better than B on group
x and equal to it on group y. Each group's numbers equal those of the group evaluated alone, the
exact tests equal scipy's, and the paired p-values are Holm-adjusted within each measure across
the groups."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from adaptlab.analysis.evaluation_table import format_groups
from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation import summarise
from adaptlab.evaluation.groups import split_by_group, summarise_groups
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.pvalues import adjust_pvalues

N = 20  # queries per group (small groups: the exact sign and Wilcoxon tests are attached)


def _fixture():
    """Queries x0.. (A better by 0.3 +- noise) and y0.. (A - B alternates +0.1 / -0.1: no effect);
    z0 has no group. Queries of the two groups are interleaved."""
    rng = np.random.default_rng(7)
    ids, a, b, labels = [], [], [], {}
    for i in range(N):
        for g in ("x", "y"):
            q = f"{g}{i}"
            base = float(rng.uniform(0.2, 0.6))
            diff = 0.3 + float(rng.uniform(-0.05, 0.05)) if g == "x" else (0.1 if i % 2 else -0.1)
            ids.append(q)
            a.append(base + diff)
            b.append(base)
            labels[q] = g
    ids.append("z0")
    a.append(0.5)
    b.append(0.5)
    labels["z0"] = ""
    per_query = {"A": PerQueryMetrics(ids, {"mrr": np.array(a)}), "B": PerQueryMetrics(ids, {"mrr": np.array(b)})}
    return per_query, labels


BOOT = BootstrapConfig(n_resamples=500, seed=3)


def test_known_group_effects_are_found_and_adjusted_across_groups():
    per_query, labels = _fixture()
    with pytest.warns(UserWarning, match="groups with few queries"):
        grouped = summarise_groups(per_query, labels, column="question_type", boot=BOOT, workers="local")
    assert list(grouped.groups) == ["x", "y"] and grouped.unassigned == ["z0"]
    x, y = grouped.groups["x"], grouped.groups["y"]
    a, b = per_query["A"].values["mrr"], per_query["B"].values["mrr"]
    in_x = np.array([q.startswith("x") for q in per_query["A"].query_ids])
    in_y = np.array([q.startswith("y") for q in per_query["A"].query_ids])
    assert x.systems["A"]["mrr"].value == pytest.approx(a[in_x].mean())
    assert y.systems["B"]["mrr"].value == pytest.approx(b[in_y].mean())
    px, py = x.pairs[0], y.pairs[0]
    assert px.diff == pytest.approx((a - b)[in_x].mean()) and py.diff == pytest.approx(0.0, abs=1e-12)
    # independent implementations of the exact tests attached to small groups
    assert px.p_wilcoxon == pytest.approx(stats.wilcoxon(a[in_x], b[in_x]).pvalue)
    assert px.p_exact == pytest.approx(stats.binomtest(N, N).pvalue)
    assert py.p_exact == pytest.approx(stats.binomtest(N // 2, N).pvalue)
    # Holm within the measure across the 2 groups, from the raw per-group p-values
    holm = adjust_pvalues([px.p_value, py.p_value], "holm")
    assert (px.p_adjusted, py.p_adjusted) == pytest.approx(tuple(holm))
    assert px.family_size == py.family_size == 2
    assert px.p_adjusted < 0.05 and px.ci_low > 0  # significant on x
    assert py.p_adjusted > 0.5 and py.ci_low < 0 < py.ci_high  # not on y


def test_a_group_equals_the_group_evaluated_alone():
    per_query, labels = _fixture()
    with pytest.warns(UserWarning):
        grouped = summarise_groups(per_query, labels, column="question_type", boot=BOOT, workers="local")
    split, _ = split_by_group(per_query, labels)
    with pytest.warns(UserWarning):
        alone = summarise(split["x"], boot=BOOT, workers="local")
    got, want = grouped.groups["x"], alone
    assert got.systems == want.systems
    assert [(p.diff, p.ci_low, p.ci_high, p.p_value) for p in got.pairs] == [
        (p.diff, p.ci_low, p.ci_high, p.p_value) for p in want.pairs
    ]
    assert got.query_ids == [f"x{i}" for i in range(N)]


def test_store_rows_carry_the_group_and_the_table_prints_every_group():
    per_query, labels = _fixture()
    with pytest.warns(UserWarning):
        grouped = summarise_groups(per_query, labels, column="question_type", boot=BOOT, workers="local")
    rows = grouped.metric_rows({"A": "ra", "B": "rb"}, "toy")
    assert {r["group"] for r in rows} == {"question_type=x", "question_type=y"}
    assert sum(1 for r in rows if r["compared_to"] == "B") == 2
    text = format_groups(grouped)
    assert "question_type" in text and "A - B" in text and "across the 2 groups" in text
    assert "1 queries without a question_type" in text


def test_bad_groupings_are_one_line():
    per_query, _ = _fixture()
    with pytest.raises(DataError, match="no evaluated query has a value"):
        summarise_groups(per_query, {"other": "x"}, column="question_type", boot=BOOT, workers="local")
    with pytest.raises(ConfigError, match="grouping column"):
        summarise_groups(per_query, {}, column="a=b", boot=BOOT, workers="local")


def _rows_without_ids(table):
    drop = {"run_id", "commit_id", "commit_row"}
    return sorted((tuple((k, v) for k, v in sorted(r.items()) if k not in drop) for r in table.to_pylist()), key=repr)


def test_store_keeps_whole_dataset_rows_and_reads_group_rows_by_filter(tmp_path):
    from adaptlab import results
    from adaptlab.evaluation import commit_summary

    per_query, labels = _fixture()
    with pytest.warns(UserWarning):
        whole = summarise(per_query, boot=BOOT, workers="local")
        grouped = summarise_groups(per_query, labels, column="question_type", boot=BOOT, workers="local")
    plain = commit_summary(tmp_path / "plain", whole, dataset="toy", config={})
    stored = commit_summary(tmp_path / "grouped", whole, dataset="toy", config={}, groups=[grouped])
    assert stored.added and set(stored.values()).isdisjoint(plain.values())  # groups are part of the key
    a, b = results.open(tmp_path / "plain"), results.open(tmp_path / "grouped")
    for kind in ("score", "comparison"):
        assert _rows_without_ids(b.metrics(kind=kind)) == _rows_without_ids(a.metrics(kind=kind))
    x = b.metrics(group="question_type=x", kind="all").to_pylist()
    assert len(x) == 3 and {r["n_queries"] for r in x} == {N}
    diff = next(r for r in x if r["compared_to"] == "B")
    assert diff["family_size"] == 2 and diff["p_adjusted"] == pytest.approx(grouped.groups["x"].pairs[0].p_adjusted)
    assert len(b.metrics(group="*", kind="all")) == 6
    assert b.metrics(group="question_type=x", columns=["system", "value"]).column_names == ["system", "value"]
    pytest.importorskip("duckdb")
    counts = b.sql(
        "SELECT (SELECT count(*) FROM metrics_all) AS whole, (SELECT count(*) FROM groups) AS g, "
        "(SELECT count(*) FROM groups WHERE \"group\" = 'question_type=y') AS y"
    )
    assert counts.to_dict("records") == [{"whole": 3, "g": 6, "y": 3}]
    assert a.sql("SELECT count(*) AS g FROM groups")["g"].tolist() == [0]
    again = commit_summary(tmp_path / "grouped", whole, dataset="toy", config={}, groups=[grouped])
    assert not again.added


def test_version_1_metrics_upgrade_to_whole_dataset_rows():
    import pyarrow as pa

    from adaptlab.results.legacy.schema_upgrade import upgrade

    v1 = pa.table({"run_id": ["r"], "system": ["s"], "dataset": ["d"], "measure": ["mrr"], "value": [0.5]})
    out = upgrade("metrics", v1, 1, source="old.parquet")
    assert out.column("group").to_pylist() == [None] and out.column("value").to_pylist() == [0.5]
