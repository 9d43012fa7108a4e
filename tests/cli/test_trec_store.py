"""A store built from TREC runs (``adaptlab evaluate ... --store``) keeps per-query records, so
``compare --store`` and ``plan --store`` work on it and give what ``--qrels``/``--run`` give
(issue 30: they said "the store has no per-query records")."""

from __future__ import annotations

import numpy as np

QRELS = "".join(f"q{i} 0 d{i} 1\n" for i in range(40))


def _run(path, seed: int, skip: int | None = None):
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(40):
        if i == skip:
            continue  # a query the run does not answer
        docs = rng.permutation(12)[: 5 + i % 4]  # rankings of different lengths
        for r, d in enumerate(docs):
            lines.append(f"q{i} Q0 d{d} {r + 1} {round(1 - r * 0.1, 1) if r != 2 else 0.9} tag\n")  # a tie at rank 2-3
    path.write_text("".join(lines))
    return path


def test_compare_and_plan_read_a_trec_built_store(tmp_path, cli):
    from adaptlab import results
    from adaptlab.data.trec import read_trec_qrels, read_trec_run
    from adaptlab.retrieval import records_from_run

    (tmp_path / "qrels.txt").write_text(QRELS)
    a, b = _run(tmp_path / "a.trec", 1), _run(tmp_path / "b.trec", 2, skip=3)
    store = tmp_path / "store"
    out = cli(
        "evaluate",
        "--qrels",
        str(tmp_path / "qrels.txt"),
        "--run",
        str(a),
        "--run",
        str(b),
        "--metrics",
        "ndcg@10,mrr@10",
        "--bootstrap",
        "200",
        "--store",
        str(store),
        "--dataset",
        "toy",
    )
    assert out.returncode == 0, out.stderr
    assert results.open(store).per_query().num_rows == 80
    common = ("--metrics", "ndcg@10,mrr@10", "--bootstrap", "200", "--format", "markdown")
    from_store = cli("compare", "--store", str(store), *common)
    from_runs = cli(
        "compare", "--qrels", str(tmp_path / "qrels.txt"), "--run", str(a), "--run", str(b), "--dataset", "toy", *common
    )
    assert from_store.returncode == 0 and from_runs.returncode == 0, from_store.stderr + from_runs.stderr
    assert from_store.stdout == from_runs.stdout
    plan = cli("plan", "--store", str(store), "--effect", "0.05", "--experiments", "20", "--resamples", "99")
    assert plan.returncode == 0 and "pilot: 40 queries" in plan.stdout, plan.stderr
    qrels = read_trec_qrels(tmp_path / "qrels.txt")
    rec = records_from_run(read_trec_run(b, qrels=qrels), qrels, system="b", dataset="toy")
    i = rec.query_ids.index("q3")
    assert rec.topk_ids[i] == [] and rec.gold_rank[i] == 0 and np.isnan(rec.sim_gold[i])


def test_records_from_a_run_follow_trec_eval_order():
    from adaptlab.retrieval import records_from_run

    run = {"q": {"d4": 1.0, "d40": 1.0, "d1": 2.0, "d2": 0.5}}
    rec = records_from_run(run, {"q": {"d4": 1, "d2": 2, "x": 0}}, system="s", dataset="t")
    assert rec.topk_ids == [["d1", "d40", "d4", "d2"]]  # tie 1.0: id descending, "d40" > "d4"
    assert rec.gold_ids == [["d2", "d4"]] and rec.gold_rank[0] == 3 and rec.sim_gold[0] == 1.0


def test_compare_and_plan_print_json_and_csv_with_every_column(tmp_path, cli):
    import csv
    import io
    import json

    (tmp_path / "qrels.txt").write_text(QRELS)
    a, b = _run(tmp_path / "a.trec", 1), _run(tmp_path / "b.trec", 2)
    runs = ("--qrels", str(tmp_path / "qrels.txt"), "--run", str(a), "--run", str(b), "--bootstrap", "200")
    out = json.loads(cli("compare", *runs, "--format", "json").stdout)
    assert {"p_value", "p_adjusted", "ci_low", "ci_high", "mde", "test", "n_resamples"} <= set(out["pairs"][0])
    assert {"letter", "better_than", "rank_low", "tied_with_best"} <= set(out["systems"][0])
    assert out["systems"][0]["dataset"] == "qrels" and out["settings"]["bootstrap"]["n_resamples"] == 200
    rows = list(csv.DictReader(io.StringIO(cli("compare", *runs, "--format", "csv").stdout)))
    assert [r["table"] for r in rows] == ["systems", "systems", "pairs"]
    assert float(rows[2]["p_value"]) == out["pairs"][0]["p_value"]
    plan = json.loads(
        cli("plan", *runs[:6], "--effect", "0.1", "--experiments", "20", "--resamples", "99", "--format", "json").stdout
    )
    assert plan["plan"]["system"] == "a" and plan["plan"]["against"] == "b" and plan["curve"][0]["n_queries"] > 0
    rows = list(
        csv.DictReader(
            io.StringIO(
                cli(
                    "plan", *runs[:6], "--effect", "0.1", "--experiments", "20", "--resamples", "99", "--format", "csv"
                ).stdout
            )
        )
    )
    assert rows and {"n_queries", "power", "effect", "alpha", "system", "against"} <= set(rows[0])


def test_results_csv_keeps_the_list_columns_as_json(tmp_path, cli):
    import csv
    import io
    import json

    (tmp_path / "qrels.txt").write_text(QRELS)
    a = _run(tmp_path / "a.trec", 1)
    store = str(tmp_path / "store")
    assert (
        cli(
            "evaluate",
            "--qrels",
            str(tmp_path / "qrels.txt"),
            "--run",
            str(a),
            "--bootstrap",
            "50",
            "--store",
            store,
            "--dataset",
            "toy",
        ).returncode
        == 0
    )
    rows = list(
        csv.DictReader(io.StringIO(cli("results", "--store", store, "--table", "per_query", "--format", "csv").stdout))
    )
    assert len(rows) == 40 and json.loads(rows[0]["gold_ids"]) == ["d0"] and len(json.loads(rows[0]["topk_ids"])) >= 5
