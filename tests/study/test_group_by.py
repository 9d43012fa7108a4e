"""``group_by`` in a study: a pairs file's grouping column gives per-group results in ``run``'s
output and in the store; the key is in the study-file reference; the readers keep the columns
(pairs CSV/JSONL, BEIR queries' keys or metadata) and say which line is wrong."""

from __future__ import annotations

import json

import pytest

from adaptlab import results
from adaptlab.data import load_beir, load_pairs, write_beir
from adaptlab.errors import ConfigError, DataError

ROWS = [
    (
        f"Which part number {i} fits the pump?",
        f"Part {i} of the pump is the seal number {i}.",
        "factoid" if i % 2 else "list",
    )
    for i in range(12)
]


def _csv(path):
    path.write_text("question,context,question_type\n" + "".join(f'"{q}","{c}",{t}\n' for q, c, t in ROWS))
    return path


def test_group_by_is_in_the_study_reference():
    from adaptlab.study.keys import sections

    info = next(k for k in sections() if (k.section, k.key) == ("datasets", "group_by"))
    assert "grouping" in info.help and info.default in ("[]", "")


def test_study_run_reports_and_stores_groups(tmp_path, cli):
    data = _csv(tmp_path / "qa.csv")
    study = tmp_path / "s.toml"
    study.write_text(
        f'[study]\nstore = "{tmp_path / "store"}"\n[[datasets]]\nspec = "pairs:{data}"\n'
        'group_by = ["question_type"]\n[[models]]\nref = "hash:64"\n[[models]]\nref = "bm25"\n'
        '[evaluation]\nmetrics = ["mrr@10"]\n[bootstrap]\nn_resamples = 200\n[embedding]\nuse_ray = false\n'
    )
    res = cli("run", str(study), "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    groups = out["groups"]["question_type"]["groups"]
    assert set(groups) == {"factoid", "list"} and all(g["n_queries"] == 6 for g in groups.values())
    store = results.open(tmp_path / "store")
    rows = store.metrics(group="question_type=list", kind="all").to_pylist()
    assert {r["n_queries"] for r in rows} == {6} and any(r["compared_to"] for r in rows)
    assert len(store.metrics()) == 2  # the whole-dataset scores alone by default
    text = cli("run", str(study), "--no-store")
    assert "per question_type: 2 groups" in text.stdout


def test_group_by_on_the_command_line(tmp_path, cli):
    data = _csv(tmp_path / "qa.csv")
    res = cli(
        "run",
        "--model",
        "hash:64",
        "--dataset",
        f"pairs:{data}",
        "--dataset-option",
        "group_by=question_type",
        "--metrics",
        "acc@1",
        "--bootstrap",
        "100",
        "--no-ray",
        "--no-store",
        "--format",
        "json",
    )
    assert res.returncode == 0, res.stderr
    assert set(json.loads(res.stdout)["groups"]["question_type"]["groups"]) == {"factoid", "list"}


def test_dry_run_names_a_missing_grouping_column(tmp_path, cli):
    data = _csv(tmp_path / "qa.csv")
    study = tmp_path / "s.toml"
    study.write_text(
        f'[study]\nstore = ""\n[[datasets]]\nspec = "pairs:{data}"\ngroup_by = ["topic"]\n[[models]]\nref = "hash:8"\n'
    )
    res = cli("run", str(study), "--dry-run")
    assert res.returncode == 2 and "header has no column 'topic'" in res.stderr and "check group_by" in res.stderr


def test_pairs_reader_keeps_groups_and_names_bad_lines(tmp_path):
    ds = load_pairs(_csv(tmp_path / "qa.csv"), group_by=["question_type"])
    assert ds.groups["question_type"]["q1"] == "factoid" and ds.groups["question_type"]["q0"] == "list"
    plain = load_pairs(tmp_path / "qa.csv")
    assert plain.groups == {} and plain.fingerprint() != ds.fingerprint()
    with pytest.raises(DataError, match="header has no column 'topic'"):
        load_pairs(tmp_path / "qa.csv", group_by="topic")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "a", "question": "q?", "context": "c.", "t": "x"}\n'
        '{"id": "a", "question": "q?", "context": "d.", "t": "y"}\n'
    )
    with pytest.raises(DataError, match=r"bad.jsonl:2: query 'a' has t 'y', but 'x' at .*bad.jsonl:1"):
        load_pairs(bad, query_id_col="id", group_by="t")
    with pytest.raises(ConfigError, match="is not a column name"):
        load_pairs(bad, group_by=["a=b"])


def test_beir_queries_keep_keys_and_metadata(tmp_path):
    ds = load_pairs(_csv(tmp_path / "qa.csv"), group_by=["question_type"])
    folder = write_beir(ds, tmp_path / "beir")
    back = load_beir(folder, group_by="question_type")
    assert back.groups == ds.groups
    lines = (folder / "queries.jsonl").read_text().splitlines()
    moved = [json.loads(x) for x in lines]
    for m in moved:
        m["metadata"] = {"kind": m.pop("question_type")}
    (folder / "queries.jsonl").write_text("".join(json.dumps(m) + "\n" for m in moved))
    assert load_beir(folder, group_by="kind").groups["kind"] == ds.groups["question_type"]
    with pytest.raises(DataError, match="no query has the grouping column 'topic'"):
        load_beir(folder, group_by="topic")
