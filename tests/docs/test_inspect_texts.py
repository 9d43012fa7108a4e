"""Issue 20's inspect findings: texts come from the dataset spec the store recorded (no --data
needed), one line says where it looked when that spec is not readable, and a system against
itself is said in one line instead of a list of ties."""

from __future__ import annotations

import json
import re

from adaptlab.analysis.inspect import recorded_texts, same_system_note


def test_inspect_shows_texts_from_the_recorded_spec(cli, docs_store):
    res = cli("inspect", "--store", str(docs_store), "--system", "minilm", "--limit", "4")
    assert res.returncode == 0, res.stderr
    listed = re.findall(r"^- \[(\w+)\] (\S+?)(: .+)?$", res.stdout, re.M)
    assert len(listed) == 4 and all(text for _, _, text in listed), res.stdout  # every query with its text
    assert res.stderr == ""


def test_an_unreadable_recorded_spec_is_one_line_naming_where_it_looked(cli, docs_data, tmp_path, monkeypatch):
    from adaptlab.data import load_dataset
    from adaptlab.data.beir import write_beir

    monkeypatch.chdir(tmp_path)
    write_beir(load_dataset("synthetic:n_documents=3,seed=0"), tmp_path / "data")
    res = cli(
        "--quiet",
        "run",
        "--model",
        "hash:8",
        "--dataset",
        "beir:data",
        "--no-ray",
        "--store",
        "st",
        "--bootstrap",
        "50",
    )
    assert res.returncode == 0, res.stderr
    (tmp_path / "data").rename(tmp_path / "moved")
    res = cli("inspect", "--store", "st", "--system", "8", "--limit", "2")
    assert res.returncode == 0, res.stderr
    assert re.findall(r"^- \[\w+\] \S+$", res.stdout, re.M)  # ids only, as before
    notes = res.stderr.strip().splitlines()
    assert len(notes) == 1 and "not readable from the recorded spec" in notes[0]
    assert str(tmp_path) in notes[0] and "--data" in notes[0]


def test_recorded_texts_of_each_dataset(docs_store):
    texts, notes = recorded_texts(docs_store, ["heldout", "scifact"])
    assert sorted(texts) == ["heldout", "scifact"] and notes == []
    assert texts["heldout"].fingerprint() != texts["scifact"].fingerprint()


def test_a_system_against_itself_is_one_line(cli, docs_store):
    res = cli("inspect", "--store", str(docs_store), "--system", "ft", "--against", "ft")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines() == [same_system_note("ft", "ft")]
    assert "tie" in res.stdout and same_system_note("ft", "base") is None
    as_json = cli("inspect", "--store", str(docs_store), "--system", "ft", "--against", "ft", "--format", "json")
    assert json.loads(as_json.stdout) == {"note": same_system_note("ft", "ft"), "win_loss": [], "queries": []}
    missing = cli("inspect", "--store", str(docs_store), "--system", "nope", "--against", "nope")
    assert missing.returncode == 2 and "systems in the store" in missing.stderr
