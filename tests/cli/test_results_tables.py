"""``adaptlab results --wide`` and ``--format latex`` on a small store: latest runs, the
significance mark, CSV columns, LaTeX output and the option checks; one value printed with the
same digits by the CLI, the report and LaTeX; stored names escaped on a terminal."""

from __future__ import annotations

import csv
import io
import sys
from datetime import datetime, timezone

import pytest

from adaptlab import results


def _run(system: str, dataset: str, when: datetime) -> dict:
    row = results.run_record(
        system,
        dataset,
        model_id=f"org/{system}",
        model_revision="r1",
        dataset_fingerprint="fp-" + dataset,
        seed=0,
        config={"k": 10},
    )
    return dict(row, timestamp=when)


def _score(run: dict, measure: str, value: float) -> dict:
    return {
        "run_id": run["run_id"],
        "system": run["system"],
        "dataset": run["dataset"],
        "measure": measure,
        "value": value,
        "ci_low": value - 0.05,
        "ci_high": value + 0.05,
        "n_queries": 300,
        "n_resamples": 1000,
        "sample_size": 300,
        "seed": 0,
        "confidence": 0.95,
        "interval_method": "percentile",
    }


def _diff(run: dict, against: str, measure: str, p_adjusted: float) -> dict:
    return dict(
        _score(run, measure, 0.1),
        compared_to=against,
        p_value=p_adjusted / 2,
        p_adjusted=p_adjusted,
        adjustment="holm",
        family_size=2,
    )


@pytest.fixture
def store(tmp_path):
    """An older run of base and ft on sci_fact, then the latest runs of base, ft and pt with
    comparisons against base (ft significant, pt not)."""
    st = results.open(tmp_path / "store", create=True)
    old = [_run(s, "sci_fact", datetime(2025, 1, 1, tzinfo=timezone.utc)) for s in ("base", "ft")]
    st.commit(old, [_score(r, m, 0.111) for r in old for m in ("ndcg@10", "mrr")])
    new = {s: _run(s, "sci_fact", datetime(2025, 2, 1, tzinfo=timezone.utc)) for s in ("base", "ft", "pt")}
    values = {"base": 0.6, "ft": 0.727, "pt": 0.65}
    rows = [_score(r, m, values[s] + (0.01 if m == "mrr" else 0)) for s, r in new.items() for m in ("ndcg@10", "mrr")]
    rows += [_diff(new["ft"], "base", m, 0.004) for m in ("ndcg@10", "mrr")]
    rows += [_diff(new["pt"], "base", m, 0.2) for m in ("ndcg@10", "mrr")]
    st.commit(list(new.values()), rows)
    return st, old


def test_wide_table_latest_runs_with_mark_and_footnote(store, cli):
    st, _ = store
    res = cli("results", "--store", str(st.root), "--wide")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["dataset", "system", "ndcg@10", "mrr"]
    assert [ln.split()[:2] for ln in lines[2:5]] == [["sci_fact", s] for s in ("base", "ft", "pt")]
    assert "0.727 [0.677, 0.777]\u2020" in lines[3] and "\u2020" not in lines[2] + lines[4]
    assert "0.111" not in res.stdout and "compared_to" not in res.stdout  # latest runs, scores only
    assert "95% confidence intervals" in res.stdout and "Queries: sci_fact 300." in res.stdout
    assert lines[-1].startswith("\u2020 p < 0.05") and "Holm" in lines[-1] and "ft, pt against base" in lines[-1]
    res = cli("results", "--store", str(st.root), "--wide", "--filter", "measure=mrr,ndcg@10", "--digits", "1")
    assert res.stdout.splitlines()[0].split()[2:] == ["mrr", "ndcg@10"] and "0.7 [0.7, 0.8]" in res.stdout


def test_wide_csv_columns_and_picked_runs(store, cli):
    st, old = store
    res = cli("results", "--store", str(st.root), "--wide", "--format", "csv", "--filter", "system=ft,pt")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert list(rows[0]) == [
        "dataset",
        "system",
        "ndcg@10",
        "ndcg@10_ci_low",
        "ndcg@10_ci_high",
        "mrr",
        "mrr_ci_low",
        "mrr_ci_high",
    ]
    assert [r["system"] for r in rows] == ["ft", "pt"] and float(rows[0]["ndcg@10"]) == 0.727
    res = cli(
        "results",
        "--store",
        str(st.root),
        "--wide",
        "--format",
        "csv",
        "--filter",
        f"run_id={old[0]['run_id']},{old[1]['run_id']}",
    )
    assert [float(r["mrr"]) for r in csv.DictReader(io.StringIO(res.stdout))] == [0.111, 0.111]


def test_latex_table(store, cli):
    st, _ = store
    res = cli("results", "--store", str(st.root), "--format", "latex", "--digits", "2")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert r"\begin{table}" in out and r"\begin{tabular}{llcc}" in out and out.rstrip().endswith(r"\end{table}")
    assert r"sci\_fact & base & 0.60 [0.55, 0.65] & 0.61 [0.56, 0.66] \\" in out
    assert r" & ft & \textbf{0.73} [0.68, 0.78]\textsuperscript{\dag} & " in out
    assert r"95\% confidence intervals in brackets (percentile bootstrap; 1000 bootstrap resamples)" in out
    assert "Queries: sci\\_fact 300." in out and "not a claim of significance" in out
    with_base = cli("results", "--store", str(st.root), "--format", "latex", "--baseline", "pt").stdout
    assert r"\dag" not in with_base.split(r"\bottomrule")[0]  # no comparison is against pt


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--digits", "2"], "--digits applies to --wide"),
        (["--baseline", "base"], "--baseline applies to --wide"),
        (["--wide", "--table", "runs"], "--table runs"),
        (["--format", "latex", "--sql", "SELECT 1"], "--sql"),
        (["--wide", "--filter", "compared_to=base"], "compared_to"),
        (["--wide", "--digits", "-1"], "--digits"),
        (["--wide", "--filter", "system=nope"], "no row of metrics has system 'nope'"),
    ],
)
def test_wide_option_errors_are_one_line(store, cli, args, needle):
    st, _ = store
    res = cli("results", "--store", str(st.root), *args)
    assert res.returncode == 2 and needle in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_wide_on_a_store_of_the_previous_layout(tmp_path, cli):
    from testkit.legacy_writer import LegacyWriter

    old = LegacyWriter(tmp_path / "old")
    runs = {s: _run(s, "toy", datetime(2025, 1, 1, tzinfo=timezone.utc)) for s in ("base", "ft")}
    old.commit(
        list(runs.values()),
        [
            _score(runs["base"], "ndcg@10", 0.5),
            _score(runs["ft"], "ndcg@10", 0.6),
            _diff(runs["ft"], "base", "ndcg@10", 0.01),
        ],
    )
    res = cli("results", "--store", str(old.root), "--wide", "--filter", "system=ft")
    assert res.returncode == 0, res.stderr
    assert "0.600 [0.550, 0.650]\u2020" in res.stdout and "base" in res.stdout.splitlines()[-1]
    res = cli("results", "--store", str(old.root), "--wide", "--latest")
    assert res.returncode == 2 and "--latest needs a Delta Lake store" in res.stderr


# -- one presentation layer: the same digits everywhere, stored names escaped on a terminal --------
def _one_value_store(root, system: str = "base") -> object:
    """``system`` with nDCG@10 = 0.64508 [0.60119, 0.68791] and a better ``ft`` (so nothing of
    ``system`` is bold in LaTeX)."""
    st = results.open(root, create=True)
    runs = {s: _run(s, "toy", datetime(2025, 1, 1, tzinfo=timezone.utc)) for s in (system, "ft")}
    rows = [
        dict(_score(runs[system], "ndcg@10", 0.64508), ci_low=0.60119, ci_high=0.68791, boot_mean=0.64433),
        _score(runs["ft"], "ndcg@10", 0.8),
    ]
    st.commit(list(runs.values()), rows)
    return st


def test_one_value_prints_the_same_digits_in_the_cli_the_report_and_latex(tmp_path, cli):
    from adaptlab.analysis import build_report

    st = _one_value_store(tmp_path / "store")
    plain = cli("results", "--store", str(st.root)).stdout
    row = next(line.split() for line in plain.splitlines() if " base " in line)
    assert row[-4:-1] == ["0.645", "0.601", "0.688"], plain
    wide = cli("results", "--store", str(st.root), "--wide").stdout
    latex = cli("results", "--store", str(st.root), "--format", "latex").stdout
    report = build_report(st.root, tmp_path / "rep", compute_missing=False).read_text()
    assert "0.645 [0.601, 0.688]" in wide and r"& base & 0.645 [0.601, 0.688] \\" in latex
    assert "| base | ndcg@10 | 0.645 | 0.644 | [0.601, 0.688] | 0.087 |" in report
    for out in (plain, wide, latex, report):
        assert "0.6451" not in out and "0.6012" not in out  # no second precision anywhere


HOSTILE_NAME = "evil\x1b[2J\x1b[31mred\nsecond line\x00"


def test_ansi_and_newline_names_are_escaped_in_the_terminal_table(tmp_path, cli, monkeypatch):
    st = _one_value_store(tmp_path / "store", HOSTILE_NAME)
    shown = r"evil\x1b[2J\x1b[31mred\nsecond line\x00"
    for args in ([], ["--wide"], ["--table", "runs"]):
        res = cli("results", "--store", str(st.root), *args)
        assert res.returncode == 0, res.stderr
        assert "\x1b" not in res.stdout and "\x00" not in res.stdout and shown in res.stdout, args
        assert not any(line.startswith("second line") for line in res.stdout.splitlines())
    res = cli("results", "--store", str(st.root), "--filter", "system=nope")
    assert res.returncode == 2 and "\x1b" not in res.stderr and shown in res.stderr
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # CSV and LaTeX on a terminal
    for args in (["--format", "csv"], ["--format", "latex"]):
        out = cli("results", "--store", str(st.root), *args).stdout
        assert "\x1b" not in out and "\x00" not in out and "x1b[2J" in out, args


def _records(system: str, ranks: list[int], doc_prefix: str = "d"):
    """Four queries, top-3 rankings with the gold document at ``ranks`` (0 = not retrieved)."""
    import numpy as np

    from adaptlab.retrieval import PerQueryRecords

    top = [[f"{doc_prefix}{q}-{j}" for j in range(3)] for q in range(4)]
    gold = [[top[q][r - 1] if r else f"{doc_prefix}{q}-gold"] for q, r in enumerate(ranks)]
    return PerQueryRecords(
        system=system,
        dataset="toy",
        query_ids=[f"q\x1b[1m{q}" for q in range(4)],
        topk_ids=top,
        topk_scores=np.tile([0.9, 0.8, 0.7], (4, 1)),
        gold_ids=gold,
        gold_rank=np.array(ranks),
        sim_gold=np.full(4, 0.8),
        sim_random=np.full(4, 0.1),
        random_ids=["r"] * 4,
    )


def test_inspect_escapes_stored_names_and_ids(tmp_path, cli):
    st = results.open(tmp_path / "store", create=True)
    runs = {s: _run(s, "toy", datetime(2025, 1, 1, tzinfo=timezone.utc)) for s in (HOSTILE_NAME, "base")}
    recs = [_records(HOSTILE_NAME, [1, 1, 2, 0], "d\x1b[31m"), _records("base", [2, 3, 1, 0], "d\x1b[31m")]
    st.commit(list(runs.values()), [], recs)
    res = cli("inspect", "--store", str(st.root), "--system", HOSTILE_NAME, "--against", "base", "--limit", "2")
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "\x00" not in res.stdout
    assert r"q\x1b[1m" in res.stdout and r"d\x1b[31m" in res.stdout and r"evil\x1b[2J" in res.stdout
