"""Per-group results through the command line, on TREC runs with known group effects: on the
queries of group x, run A ranks the gold document first and run B fifth; on group y both rank it
the same. ``evaluate`` and ``compare`` print and store the groups, ``results --filter group=``
reads them, the whole-dataset rows do not change, and the report has a per-group section."""

from __future__ import annotations

import json

import pytest

from adaptlab.data.trec import write_trec_qrels, write_trec_run

N = 30  # queries per group


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("groups")
    qrels, a, b, lines = {}, {}, {}, []
    for i in range(2 * N):
        q, group = f"Q{i}", "x" if i < N else "y"
        gold = f"G{i}"
        qrels[q] = {gold: 1}
        others = {f"D{i}_{j}": 0.9 - 0.1 * j for j in range(8)}
        rank_a = 1 if group == "x" else 1 + i % 3
        rank_b = 5 if group == "x" else 1 + i % 3
        a[q] = {**others, gold: 0.95 if rank_a == 1 else 0.9 - 0.1 * (rank_a - 1) + 0.05}
        b[q] = {**others, gold: 0.95 if rank_b == 1 else 0.9 - 0.1 * (rank_b - 1) + 0.05}
        lines.append(f"{q}\t{group}")
    write_trec_qrels(qrels, root / "qrels.txt")
    write_trec_run(a, root / "A.trec", tag="A")
    write_trec_run(b, root / "B.trec", tag="B")
    (root / "groups.tsv").write_text("# query type\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return root


def _args(root, *more):
    return (
        "--qrels",
        str(root / "qrels.txt"),
        "--run",
        str(root / "A.trec"),
        "--run",
        str(root / "B.trec"),
        "--metrics",
        "mrr",
        "--bootstrap",
        "400",
        *more,
    )


def test_evaluate_groups_json_has_the_known_effects(files, cli):
    res = cli(
        "evaluate", *_args(files, "--groups", str(files / "groups.tsv"), "--by", "question_type", "--format", "json")
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    groups = out["groups"]["groups"]
    assert out["groups"]["column"] == "question_type" and set(groups) == {"x", "y"}
    x, y = groups["x"], groups["y"]
    assert x["systems"]["A"]["mrr"]["value"] == pytest.approx(1.0)
    assert x["systems"]["B"]["mrr"]["value"] == pytest.approx(0.2)
    assert y["systems"]["A"]["mrr"]["value"] == pytest.approx(y["systems"]["B"]["mrr"]["value"])
    (px,), (py,) = x["pairs"], y["pairs"]
    assert px["diff"] == pytest.approx(0.8) and px["p_adjusted"] < 0.05 and px["family_size"] == 2
    assert py["diff"] == pytest.approx(0.0) and py["p_adjusted"] == pytest.approx(1.0)
    whole = json.loads(cli("evaluate", *_args(files, "--format", "json")).stdout)
    assert whole["systems"] == out["systems"] and whole["pairs"] == out["pairs"]  # whole-dataset rows unchanged


def test_evaluate_store_and_results_filter(files, cli, tmp_path):
    store = str(tmp_path / "store")
    res = cli(
        "evaluate",
        *_args(
            files, "--groups", str(files / "groups.tsv"), "--by", "question_type", "--store", store, "--dataset", "toy"
        ),
    )
    assert res.returncode == 0, res.stderr
    assert "paired differences per question_type" in res.stdout and "across the 2 groups" in res.stdout
    default = json.loads(cli("results", "--store", store, "--table", "metrics", "--format", "json").stdout)
    assert len(default) == 2 and all(r.get("group") is None for r in default)
    rows = json.loads(
        cli(
            "results", "--store", store, "--table", "metrics", "--format", "json", "--filter", "group=question_type=x"
        ).stdout
    )
    assert [(r["system"], r["value"], r["group"]) for r in rows] == [
        ("A", pytest.approx(1.0), "question_type=x"),
        ("B", pytest.approx(0.2), "question_type=x"),
    ]
    both = json.loads(
        cli(
            "results",
            "--store",
            store,
            "--table",
            "comparisons",
            "--format",
            "json",
            "--filter",
            "group=question_type=x,question_type=y",
        ).stdout
    )
    assert sorted(r["group"] for r in both) == ["question_type=x", "question_type=y"]
    every = json.loads(
        cli("results", "--store", store, "--table", "metrics", "--format", "json", "--filter", "group=*").stdout
    )
    assert len(every) == 4
    cmp = cli("compare", "--store", store, "--metrics", "mrr", "--bootstrap", "400", "--by", "question_type")
    assert cmp.returncode == 0, cmp.stderr
    assert "per question_type" in cmp.stdout and "A - B" in cmp.stdout
    bad = cli("compare", "--store", store, "--metrics", "mrr", "--by", "topic")
    assert bad.returncode == 2 and "no per-group rows of 'topic'" in bad.stderr and "question_type" in bad.stderr
    report = cli("report", "--store", store, "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "Per-group results by question_type" in text and "groups_question_type" in text


def test_compare_runs_by_group_needs_a_group_file(files, cli):
    res = cli("compare", *_args(files, "--by", "question_type", "--groups", str(files / "groups.tsv")))
    assert res.returncode == 0, res.stderr
    assert "paired differences per question_type" in res.stdout
    missing = cli("compare", *_args(files, "--by", "question_type"))
    assert missing.returncode == 2 and "--groups FILE" in missing.stderr


def test_bad_group_file_is_one_line_naming_file_and_line(files, cli, tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("Q0\tx\nQ1 x\n", encoding="utf-8")
    res = cli("evaluate", *_args(files, "--groups", str(bad)))
    assert res.returncode == 2 and f"{bad}:2: expected 'query_id<TAB>group'" in res.stderr
    assert "Traceback" not in res.stderr
