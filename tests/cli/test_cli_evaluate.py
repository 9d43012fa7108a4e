"""``adaptlab evaluate`` and ``adaptlab results`` end to end. In this process (the ``cli`` fixture: the
same ``main`` the console script calls, without a fresh interpreter's 1-3 s import each time), except
where the process itself is the subject: the light commands' imports and ``--debug``'s traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adaptlab.data.trec import write_trec_qrels, write_trec_run

pytrec_eval = pytest.importorskip("pytrec_eval")


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adaptlab", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.fixture(scope="module")
def trec_files(tmp_path_factory):
    """Two systems on 200 single-gold queries; 'good' ranks the gold higher than 'weak'."""
    rng = np.random.default_rng(7)
    root = tmp_path_factory.mktemp("trec")
    docs = [f"D{i}" for i in range(300)]
    qrels = {f"Q{q}": {docs[q]: 1} for q in range(200)}
    qrels["Q_norel"] = {docs[0]: 0}  # no relevant document: excluded and counted
    runs = {}
    for name, p_top in (("good", 0.7), ("weak", 0.4)):
        run = {}
        for q in range(200):
            scores = rng.random(50) * 0.5
            cand = rng.choice(300, size=50, replace=False)
            r = {docs[c]: float(s) for c, s in zip(cand, scores)}
            if rng.random() < p_top:
                r[docs[q]] = 0.9
            run[f"Q{q}"] = r
        runs[name] = run
    write_trec_qrels(qrels, root / "qrels.txt")
    for name, run in runs.items():
        write_trec_run(run, root / f"{name}.trec", tag=name)
    return root, qrels, runs


def test_evaluate_json_matches_pytrec_eval_and_compares_pairs(trec_files, cli):
    root, qrels, runs = trec_files
    res = cli(
        "evaluate",
        "--qrels",
        str(root / "qrels.txt"),
        "--run",
        str(root / "good.trec"),
        "--run",
        str(root / "weak.trec"),
        "--metrics",
        "ndcg@10,recall@5,mrr",
        "--bootstrap",
        "500",
        "--adjustment",
        "bh",
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["n_queries"] == 200 and out["excluded_queries"] == 1
    assert set(out["systems"]) == {"good", "weak"}
    for name, run in runs.items():
        ref = pytrec_eval.RelevanceEvaluator(
            {q: r for q, r in qrels.items() if q != "Q_norel"}, {"ndcg_cut.10", "recip_rank"}
        ).evaluate(run)
        mean_ndcg = np.mean([v["ndcg_cut_10"] for v in ref.values()])
        got = out["systems"][name]["ndcg@10"]
        assert got["value"] == pytest.approx(mean_ndcg, abs=1e-9)
        assert got["ci_low"] < got["value"] < got["ci_high"]
    pair = [p for p in out["pairs"] if p["measure"] == "ndcg@10"][0]
    assert {pair["a"], pair["b"]} == {"good", "weak"}
    sign = 1 if pair["a"] == "good" else -1
    assert sign * pair["diff"] > 0.1 and pair["p_value"] < 0.05
    assert {p["adjustment"] for p in out["pairs"]} == {"bh"}  # --adjustment reaches the summary (it was dropped)


def test_evaluate_table_and_store_round_trip(trec_files, tmp_path, cli):
    root, _, _ = trec_files
    store = tmp_path / "store"
    res = cli(
        "evaluate",
        "--qrels",
        str(root / "qrels.txt"),
        "--run",
        str(root / "good.trec"),
        "--metrics",
        "acc@5",
        "--bootstrap",
        "200",
        "--store",
        str(store),
        "--dataset",
        "toy",
    )
    assert res.returncode == 0, res.stderr
    assert "acc@5" in res.stdout and "95% CI" in res.stdout
    res = cli("results", "--store", str(store), "--filter", "measure=acc@5", "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) == 1 and rows[0]["system"] == "good" and rows[0]["dataset"] == "toy"
    assert rows[0]["n_resamples"] == 200
    res = cli("results", "--store", str(store), "--table", "runs", "--format", "csv")
    assert res.returncode == 0 and "good" in res.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--metrics", "ndcg@x"], "ndcg@x"),
        (["--metrics", "bogus@3"], "bogus"),
        (["--qrels", "/nonexistent/qrels.txt"], "/nonexistent/qrels.txt"),
        (["--run", "BADRUN"], "BADRUN"),
        (["--store", "S"], "--dataset"),
    ],
)
def test_evaluate_bad_input_is_one_line_exit_2(trec_files, tmp_path, args, needle, cli):
    """In this process (the ``cli`` fixture): the same main() and stderr as a subprocess, without
    a Python start per case; the subprocess path is the other tests'."""
    root, _, _ = trec_files
    bad_run = tmp_path / "bad.trec"
    bad_run.write_text("Q1 Q0 D1 1 0.5 tag\nQ2 Q0 D2 not-a-number\n")
    base = {"--qrels": str(root / "qrels.txt"), "--run": str(root / "good.trec")}
    if args[0] == "--run":
        base["--run"] = str(bad_run)
        needle = "bad.trec"
    elif args[0] in base:
        base[args[0]] = args[1]
    flat = [x for k, v in base.items() for x in (k, v)]
    if args[0] not in base:
        flat += args
    res = cli("evaluate", *flat, "--bootstrap", "50")
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln]
    assert len(lines) == 1, res.stderr
    assert needle in lines[0] and "Traceback" not in res.stderr


def test_bad_run_names_its_line(tmp_path, trec_files, cli):
    root, _, _ = trec_files
    bad_run = tmp_path / "bad.trec"
    bad_run.write_text("Q1 Q0 D1 1 0.5 tag\nQ2 Q0 D2 not-a-number\n")
    res = cli("evaluate", "--qrels", str(root / "qrels.txt"), "--run", str(bad_run))
    assert res.returncode == 2 and ":2" in res.stderr
    res = _cli("evaluate", "--qrels", str(root / "qrels.txt"), "--run", str(bad_run), "--debug")
    assert "Traceback" in res.stderr


def test_results_unknown_filter_column(tmp_path, trec_files, cli):
    root, _, _ = trec_files
    store = tmp_path / "s"
    assert (
        cli(
            "evaluate",
            "--qrels",
            str(root / "qrels.txt"),
            "--run",
            str(root / "good.trec"),
            "--metrics",
            "acc@1",
            "--bootstrap",
            "20",
            "--store",
            str(store),
            "--dataset",
            "d",
        ).returncode
        == 0
    )
    res = cli("results", "--store", str(store), "--filter", "colour=red")
    assert res.returncode == 2 and "colour" in res.stderr


@pytest.mark.parametrize("command", ["evaluate", "results"])
def test_light_commands_import_neither_torch_nor_ray(command):
    code = (
        "import sys\nfrom adaptlab.cli import main\n"
        f"try:\n    main([{command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('torch', 'ray', 'transformers', 'sentence_transformers') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY=\n" in res.stdout or res.stdout.strip().endswith("HEAVY="), res.stdout
    imported = {ln.split("|")[-1].strip().split(".")[0] for ln in res.stderr.splitlines() if "|" in ln}
    assert "torch" not in imported and "ray" not in imported
