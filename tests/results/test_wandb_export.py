"""W&B export (issue 20): a store's runs written as offline W&B runs and read back with wandb's own
reader of a run's ``.wandb`` log (``wandb leet inspect --json``): run names, config, summary
values and CI bounds under W&B-sortable names, attached files, no API key anywhere, nothing sent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from toy_tracker_store import toy_store

from adaptlab.errors import ConfigError, StoreError
from adaptlab.results.exports.tracker_runs import score_metrics
from adaptlab.results.exports.wandb_log import log_to_wandb, offline, wandb_metric_name

MEASURES = {"ndcg@10": "ndcg_at_10", "recall@5": "recall_at_5", "rprec": "rprec", "judged@5": "judged_at_5"}
"""Stored measure -> its W&B summary key."""
FREE = ("isoscore-2d", 0.8125, "isoscore_2d")
"""A free analysis measure without a CI: its stored name, value and W&B key."""
FAKE_KEY = "adaptlabtestkey" + "0" * 25
"""A W&B API key (40 characters) in the environment, which no written file may contain."""
_NEEDS_WANDB = "W&B exports need the trackers extra: pip install 'adaptlab[trackers]'"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A store with the scores (values and CIs) of two systems on ``toy`` and one free measure
    without a CI; the stored rows; a report and a run file to attach."""
    tmp = tmp_path_factory.mktemp("wandb-store")
    built = toy_store(
        tmp,
        list(MEASURES),
        n_queries=12,
        seed=7,
        run_seed=3,
        config={"k": 8, "train": {"lr": 1e-4}},
        extra_rows=[FREE[:2]],
    )
    store, ids, rows = built["store"], built["ids"], built["rows"]
    (tmp / "report.html").write_text("<html>report</html>")
    (tmp / "ft.trec").write_text("q0 Q0 d0 1 0.625 ft\n")
    return {"store": store, "ids": ids, "rows": rows, "dir": tmp, "files": [tmp / "report.html", tmp / "ft.trec"]}


def _isolate(mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """Offline, wandb's own folders in ``tmp``, and an API key in the environment."""
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_API_KEY", FAKE_KEY)
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        mp.setenv(var, str(tmp / var.lower()))


@pytest.fixture(scope="module")
def exported(toy, tmp_path_factory):
    """The store written as offline W&B runs (the one wandb import and service start, ~8 s on a
    loaded 2-core machine, shared by the tests); wandb's service is stopped afterwards."""
    wandb = pytest.importorskip("wandb", reason=_NEEDS_WANDB)
    tmp = tmp_path_factory.mktemp("wandb-out")
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, tmp)
        logged = log_to_wandb(toy["store"], tmp / "out", project="toy-wandb", artifacts=toy["files"])
        yield {"logged": logged, "dir": tmp}
        wandb.teardown()


def _inspect(folder: Path, *options: str) -> str:
    """``wandb leet inspect OPTIONS FOLDER``'s output: wandb's reader of a run's ``.wandb`` log."""
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", *options, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode and "No such command" in done.stderr:
        pytest.skip(f"this wandb has no `wandb leet inspect` (wandb>=0.31 has): {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _expected(rows: list[dict], system: str) -> dict[str, float]:
    """The stored scores of ``system`` under their W&B keys, CI bounds included."""
    stored = {r["measure"]: r for r in rows if r["system"] == system}
    out = {FREE[2]: FREE[1]}
    for measure, key in MEASURES.items():
        row = stored[measure]
        assert row["ci_low"] < row["ci_high"], measure
        out |= {key: row["value"], f"{key}_ci_low": row["ci_low"], f"{key}_ci_high": row["ci_high"]}
    return out


@pytest.mark.slow
def test_offline_runs_read_back_with_wandbs_reader(toy, exported) -> None:
    logged = exported["logged"]
    assert sorted(logged) == sorted(toy["ids"].values())
    for system, run_id in toy["ids"].items():
        folder = logged[run_id]
        assert folder.parent == exported["dir"] / "out" / "wandb" and folder.name.startswith("offline-run-")
        got = json.loads(_inspect(folder, "--summary", "--json"))
        assert (got["name"], got["project"], got["state"], got["exit_code"]) == (
            f"{system} on toy",
            "toy-wandb",
            "finished",
            0,
        )
        summary = {k: v for k, v in got["summary"].items() if not k.startswith("_")}
        assert summary == _expected(toy["rows"], system)  # exact: float64 values through JSON
        config = got["config"]
        assert config["config"] == {"k": 8, "model": system, "train": {"lr": 1e-4}}
        assert (config["system"], config["dataset"], config["dataset_fingerprint"], config["seed"]) == (
            system,
            "toy",
            "fp-toy",
            3,
        )
        assert config["adaptlab"]["run_id"] == run_id and "model_revision" not in config
        for original in toy["files"]:
            assert (folder / "files" / "adaptlab" / original.name).read_bytes() == original.read_bytes()
    records = [json.loads(line) for line in _inspect(folder, "--json").splitlines()]  # one run's, ~8 s a call
    saved = sorted(f["path"] for r in records if r["type"] == "files" for f in r["files"]["files"])
    assert saved == ["adaptlab/ft.trec", "adaptlab/report.html"]  # recorded for `wandb sync`


@pytest.mark.slow
def test_no_api_key_and_no_console_or_system_data_written(exported) -> None:
    written = [p for p in (exported["dir"] / "out").rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in written)
    assert not [p for p in written if FAKE_KEY.encode() in p.read_bytes()]
    names = {p.name for p in written}
    assert not names & {"output.log", "wandb-metadata.json", "requirements.txt", "diff.patch"}


@pytest.mark.slow
def test_cli_export_to_wandb(toy, exported, tmp_path, cli, monkeypatch) -> None:
    _isolate(monkeypatch, tmp_path)
    done = cli(
        "export",
        "--store",
        str(toy["dir"] / "store"),
        "--to",
        "wandb",
        "--out",
        str(tmp_path / "wb"),
        "--system",
        "ft",
        "--artifact",
        str(toy["files"][0]),
    )
    assert done.returncode == 0, done.stderr
    assert f"run {toy['ids']['ft']} -> W&B run {tmp_path / 'wb' / 'wandb'}" in done.stdout
    assert "exported 1 runs" in done.stdout and f"wandb sync {tmp_path / 'wb' / 'wandb'}" in done.stdout
    (folder,) = (tmp_path / "wb" / "wandb").glob("offline-run-*")
    got = json.loads(_inspect(folder, "--summary", "--json"))
    assert got["project"] == "adaptlab" and got["name"] == "ft on toy"  # no study: the default project
    assert {k: v for k, v in got["summary"].items() if not k.startswith("_")} == _expected(toy["rows"], "ft")


@pytest.mark.parametrize(
    ("measure", "key"),
    [
        ("ndcg@10", "ndcg_at_10"),
        ("acc@5", "accuracy_at_5"),
        ("mrr", "mrr"),
        ("isoscore-2d", "isoscore_2d"),
        ("coe/layer.3", "coe_layer_3"),
        ("2d", "m_2d"),
        ("_x", "m_x"),
    ],
)
def test_metric_names_are_ones_wandb_sorts(measure: str, key: str) -> None:
    assert wandb_metric_name(measure) == key


def test_measures_that_share_a_name_are_refused() -> None:
    rows = [{"measure": "coe-a", "value": 1.0}, {"measure": "coe.a", "value": 2.0}]
    with pytest.raises(StoreError, match="'coe-a' and 'coe.a' both become the tracker metric 'coe_a'"):
        score_metrics(rows, wandb_metric_name)
    assert score_metrics(rows) == {"coe-a": 1.0, "coe.a": 2.0}  # MLflow's names keep them apart


def test_without_wandb_one_line_names_the_extra(toy, tmp_path, monkeypatch, cli) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import raises ImportError
    with pytest.raises(ConfigError, match=r"^W&B exports need the trackers extra: pip install 'adaptlab\[trackers\]'"):
        log_to_wandb(toy["store"], tmp_path / "out")
    done = cli("export", "--store", str(toy["dir"] / "store"), "--to", "wandb", "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "pip install 'adaptlab[trackers]'" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_bad_input_is_one_line(toy, tmp_path) -> None:
    with pytest.raises(ConfigError, match="project 'a/b' is not a W&B project name"):
        log_to_wandb(toy["store"], tmp_path / "out", project="a/b")
    with pytest.raises(ConfigError, match="artifact file.*not found: .*nope.html"):
        log_to_wandb(toy["store"], tmp_path / "out", artifacts=[tmp_path / "nope.html"])
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "report.html").write_text("other")
    with pytest.raises(ConfigError, match=r"artifact files share a name \(report.html\)"):
        log_to_wandb(toy["store"], tmp_path / "out", artifacts=[toy["files"][0], tmp_path / "x" / "report.html"])
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file; expected a folder"):
        log_to_wandb(toy["store"], tmp_path / "file")
    with pytest.raises(StoreError, match="no runs in the store"):
        log_to_wandb(toy["store"], tmp_path / "out", system="nope")
    assert not (tmp_path / "out").exists()


def test_offline_unless_the_user_chose_online(monkeypatch) -> None:
    for value, expected in (("", True), ("offline", True), ("disabled", True), ("online", False), (" Online ", False)):
        monkeypatch.setenv("WANDB_MODE", value)
        assert offline() is expected
    monkeypatch.delenv("WANDB_MODE")
    assert offline()
